"""The engine's kernels for one layer: a cuDNN graph per convolution with its fused epilogue (FP8 or fp16),
and an FP8 linear through `torch._scaled_mm` (cuBLASLt). Graphs are shared by layers of one signature,
and their plan is chosen by timing (builders.engine_plans).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import torch

from builders.engine_plans import Choice, TimingCache, choose_plan
from builders.fp8_kernels import E4M3_MAX, FP8, one_line

CUDNN_ACTIVATIONS = {"relu": "relu", "swish": "swish", "sigmoid": "sigmoid", "gelu": "gelu"}
PLAN_WARMUP, PLAN_REPEATS = 3, 10  # executions per plan: discarded, then timed between two events
# A plan's execution costs the host about 20 us to enqueue, more than a small convolution runs (about 5 us): timed
# as enqueued, every plan measures the host. A spin kernel queued first holds the GPU until all repeats are queued,
# so the events time the kernels back to back. Cycles per repeat: 60 us at 2 GHz, three times the enqueue cost.
HOLD_CYCLES_PER_REPEAT = 120_000


@dataclass(frozen=True)
class ConvSignature:
    """What one cuDNN graph computes; layers with equal signatures share the graph and its plan."""

    precision: str  # fp8 | fp16: input and weight
    input_shape: tuple[int, int, int, int]  # NCHW (stored NHWC)
    out_channels: int
    kernel: tuple[int, int]
    stride: tuple[int, int]
    padding: tuple[int, int]
    dilation: tuple[int, int]
    groups: int
    epilogue: tuple[str, ...]  # after the (de)scale and bias: activations and "add", in order
    output_fp8: bool

    def output_shape(self) -> tuple[int, int, int, int]:
        n, _, h, w = self.input_shape
        ho, wo = ((size + 2 * p - d * (k - 1) - 1) // s + 1
                  for size, k, s, p, d in zip((h, w), self.kernel, self.stride, self.padding, self.dilation))
        return n, self.out_channels, ho, wo

    def key(self) -> str:
        return (f"conv {self.precision} in={'x'.join(map(str, self.input_shape))} k={self.out_channels} "
                f"r={self.kernel} s={self.stride} p={self.padding} d={self.dilation} g={self.groups} "
                f"epi={'+'.join(self.epilogue) or '-'} out={'fp8' if self.output_fp8 else 'fp16'}")


def _nhwc(shape: tuple[int, ...]) -> list[int]:
    _, c, h, w = shape
    return [c * h * w, 1, w * c, c]


class ConvGraph:
    """One fused cuDNN graph: conv -> x (descale per output channel, FP8 only) -> + bias -> epilogue ->
    (x 1 / output scale -> FP8) ; NHWC tensors."""

    def __init__(self, sig: ConvSignature, cudnn: Any, handle: Any) -> None:
        self.sig, self.cudnn, self.handle = sig, cudnn, handle
        dt = cudnn.data_type
        in_type = dt.FP8_E4M3 if sig.precision == "fp8" else dt.HALF
        k, cg = sig.out_channels, sig.input_shape[1] // sig.groups
        out_shape = sig.output_shape()
        g = cudnn.pygraph(io_data_type=dt.HALF, intermediate_data_type=dt.FLOAT, compute_data_type=dt.FLOAT, handle=handle)
        t: dict[str, Any] = {
            "x": g.tensor(name="x", dim=list(sig.input_shape), stride=_nhwc(sig.input_shape), data_type=in_type),
            "w": g.tensor(name="w", dim=[k, cg, *sig.kernel], stride=_nhwc((k, cg, *sig.kernel)), data_type=in_type),
        }
        y = g.conv_fprop(image=t["x"], weight=t["w"], padding=list(sig.padding), stride=list(sig.stride),
                         dilation=list(sig.dilation), compute_data_type=dt.FLOAT)
        channel = {"dim": [1, k, 1, 1], "stride": [k, 1, k, k]}
        if sig.precision == "fp8":
            t["descale"] = g.tensor(name="descale", data_type=dt.FLOAT, **channel)
            y = g.mul(a=y, b=t["descale"], compute_data_type=dt.FLOAT)
        t["bias"] = g.tensor(name="bias", data_type=dt.HALF, **channel)
        y = g.add(a=y, b=t["bias"], compute_data_type=dt.FLOAT)
        for word in sig.epilogue:
            if word == "add":
                t["residual"] = g.tensor(name="residual", dim=list(out_shape), stride=_nhwc(out_shape), data_type=dt.HALF)
                y = g.add(a=y, b=t["residual"], compute_data_type=dt.FLOAT)
            else:
                y = getattr(g, CUDNN_ACTIVATIONS[word])(input=y, compute_data_type=dt.FLOAT)
        if sig.output_fp8:
            t["qscale"] = g.tensor(name="qscale", dim=[1, 1, 1, 1], stride=[1, 1, 1, 1], data_type=dt.FLOAT)
            y = g.mul(a=y, b=t["qscale"], compute_data_type=dt.FLOAT)
        y.set_output(True).set_data_type(dt.FP8_E4M3 if sig.output_fp8 else dt.HALF).set_dim(list(out_shape)) \
            .set_stride(_nhwc(out_shape))
        t["y"] = y
        g.validate()
        g.build_operation_graph()
        g.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.B, cudnn.heur_mode.FALLBACK])
        g.check_support()
        self.graph, self.tensors = g, t
        self.choice: Choice | None = None
        self.workspace_bytes = 0

    def select(self, limit: int, cache: TimingCache | None) -> Choice:
        """Builds and times up to `limit` plans on scratch tensors, keeps the fastest (or the cached one)."""
        scratch = self._scratch()
        workspace: dict[int, torch.Tensor] = {}

        def time_plan(index: int) -> float:
            self.graph.build_plan_at_index(index)
            size = max(self.graph.get_workspace_size_plan_at_index(index), 1)
            workspace[index] = torch.empty(size, dtype=torch.uint8, device="cuda")
            self.cudnn.set_stream(self.handle, torch.cuda.current_stream().cuda_stream)
            for _ in range(PLAN_WARMUP):
                self.graph.execute_plan_at_index(scratch, workspace[index], index, handle=self.handle)
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda._sleep(HOLD_CYCLES_PER_REPEAT * PLAN_REPEATS)  # the GPU waits while the host enqueues
            start.record()
            for _ in range(PLAN_REPEATS):
                self.graph.execute_plan_at_index(scratch, workspace[index], index, handle=self.handle)
            end.record()
            end.synchronize()
            return start.elapsed_time(end) * 1e3 / PLAN_REPEATS

        self.choice = choose_plan(self.graph, self.sig.key(), limit, time_plan, cache)
        self.workspace_bytes = self.graph.get_workspace_size()
        return self.choice

    def _scratch(self) -> dict[Any, torch.Tensor]:
        sig = self.sig
        dtype = FP8 if sig.precision == "fp8" else torch.float16
        n, c, h, w = sig.input_shape
        k = sig.out_channels
        data = {
            "x": torch.randn(n, c, h, w, device="cuda").to(dtype, memory_format=torch.channels_last),
            "w": (torch.randn(k, c // sig.groups, *sig.kernel, device="cuda") * 0.05).to(dtype, memory_format=torch.channels_last),
            "bias": torch.zeros(1, k, 1, 1, device="cuda", dtype=torch.float16),
            "descale": torch.full((1, k, 1, 1), 0.01, device="cuda"),
            "residual": torch.zeros(sig.output_shape(), device="cuda", dtype=torch.float16).to(memory_format=torch.channels_last),
            "qscale": torch.ones(1, 1, 1, 1, device="cuda"),
            "y": torch.empty(sig.output_shape(), device="cuda", dtype=FP8 if sig.output_fp8 else torch.float16)
            .to(memory_format=torch.channels_last),
        }
        return {tensor: data[name] for name, tensor in self.tensors.items()}

    def execute(self, values: dict[str, torch.Tensor], workspace: torch.Tensor) -> None:
        self.cudnn.set_stream(self.handle, torch.cuda.current_stream().cuda_stream)
        self.graph.execute({self.tensors[name]: value for name, value in values.items()}, workspace, handle=self.handle)


class ConvLayer:
    """One convolution's tensors bound to a shared graph: weights (FP8 with per-channel descale, or fp16),
    bias, and the output quantize scale."""

    def __init__(self, graph: ConvGraph, weight: torch.Tensor, bias: torch.Tensor | None, x_scale: float | None,
                 w_scale: torch.Tensor | None, out_scale: float | None, workspace: list[torch.Tensor]) -> None:
        sig = graph.sig
        self.graph, self.workspace = graph, workspace
        k = sig.out_channels
        values: dict[str, torch.Tensor] = {}
        if sig.precision == "fp8":
            assert x_scale is not None and w_scale is not None
            w_scale = w_scale.float().reshape(-1, 1, 1, 1)
            values["w"] = (weight.float() / w_scale).clamp(-E4M3_MAX, E4M3_MAX).to(FP8, memory_format=torch.channels_last)
            values["descale"] = (w_scale * x_scale).reshape(1, k, 1, 1).contiguous()
        else:
            values["w"] = weight.detach().half().contiguous(memory_format=torch.channels_last)
        values["bias"] = (bias.detach().half() if bias is not None else torch.zeros(k, device=weight.device,
                                                                                   dtype=torch.float16)).reshape(1, k, 1, 1).contiguous()
        if sig.output_fp8:
            assert out_scale is not None
            values["qscale"] = torch.full((1, 1, 1, 1), 1.0 / out_scale, device=weight.device)
        self.values = values
        self.out_dtype = FP8 if sig.output_fp8 else torch.float16

    def __call__(self, x: torch.Tensor, residual: torch.Tensor | None = None) -> torch.Tensor:
        out = torch.empty(self.graph.sig.output_shape(), dtype=self.out_dtype, device=x.device,
                          memory_format=torch.channels_last)
        values = dict(self.values, x=x.contiguous(memory_format=torch.channels_last), y=out)
        if residual is not None:
            values["residual"] = residual.contiguous(memory_format=torch.channels_last)
        self.graph.execute(values, self.workspace[0])
        return out


class Fp8Linear:
    """A linear in FP8 through torch._scaled_mm: per-tensor input scale, per-channel (rowwise) or per-tensor weight
    scales, bias fused, fp16 out."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None, x_scale: float, w_scale: torch.Tensor) -> None:
        out_features, in_features = weight.shape
        if in_features % 16 or out_features % 16:
            raise ValueError(f"torch._scaled_mm needs in and out features divisible by 16 (got {in_features} -> {out_features})")
        per_channel = w_scale.numel() > 1
        scale = w_scale.float().reshape(-1, 1)
        self.weight = (weight.float() / scale).clamp(-E4M3_MAX, E4M3_MAX).to(FP8).t()
        self.scale_b = scale.reshape(1, -1).contiguous() if per_channel else scale.reshape(()).contiguous()
        self.x_scale, self.per_channel = x_scale, per_channel
        self.bias = bias.detach().half() if bias is not None else None
        self._scale_a: dict[int, torch.Tensor] = {}
        self.path = ("torch._scaled_mm (cuBLASLt), FP8 e4m3 in, rowwise scales (per-tensor input, per-channel weights), "
                     "bias fused, fp16 out") if per_channel else "torch._scaled_mm (cuBLASLt), FP8 e4m3 in, per-tensor scales, bias fused, fp16 out"

    def _scale(self, rows: int, device: torch.device) -> torch.Tensor:
        if rows not in self._scale_a:  # made on the eager call before capture, reused by the graph
            shape = (rows, 1) if self.per_channel else ()
            self._scale_a[rows] = torch.full(shape, self.x_scale, dtype=torch.float32, device=device)
        return self._scale_a[rows]

    def __call__(self, x8: torch.Tensor) -> torch.Tensor:
        rows = x8.reshape(-1, x8.shape[-1])
        out = torch._scaled_mm(rows, self.weight, scale_a=self._scale(rows.shape[0], x8.device), scale_b=self.scale_b,
                               bias=self.bias, out_dtype=torch.float16)
        return out.view(*x8.shape[:-1], -1)


def build_graph(sig: ConvSignature, cudnn: Any, handle: Any, limit: int, cache: TimingCache | None) -> tuple[ConvGraph, float]:
    """The graph for `sig` with its plan chosen, and the seconds it took; RuntimeError with cuDNN's reason."""
    started = time.perf_counter()
    try:
        graph = ConvGraph(sig, cudnn, handle)
        graph.select(limit, cache)
    except Exception as exc:  # noqa: BLE001  (cudnnGraphNotSupportedError and its kin: no engine for this graph)
        raise RuntimeError(f"cuDNN: {one_line(exc, 300)}") from None
    return graph, time.perf_counter() - started
