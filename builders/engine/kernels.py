"""The engine's kernels for one layer: a cuDNN graph per convolution with its fused epilogue (FP8 or fp16),
and an FP8 linear through `torch._scaled_mm` (cuBLASLt). Graphs are shared by layers of one signature,
and their plan is chosen by timing (builders.engine.plans).
"""

from __future__ import annotations

import hashlib
import inspect
import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import torch

from builders.engine.plans import Choice, CompiledPlans, TimingCache, choose_plan, timing_cache_path
from builders.engine.weight_residency import gpu_l2_bytes, weight_packs
from builders.fp8.format import FP8, quantize_weight
from builders.pytorch.graph_capture import capture_graph
from builders.pytorch.inductor_workers import end_compile_workers
from sessions.documents.errors import joined_message

CUDNN_ACTIVATIONS = {"relu": "relu", "swish": "swish", "sigmoid": "sigmoid", "gelu": "gelu"}
PLAN_WARMUP, PLAN_REPEATS = 3, 10  # executions per plan: discarded, then timed between two events
# A plan's execution costs the host about 20 us to enqueue, more than a small convolution runs (about 5 us): timed
# as enqueued, every plan measures the host. A spin kernel queued first holds the GPU until all repeats are queued,
# so the events time the kernels back to back. Cycles per repeat: 60 us at 2 GHz, three times the enqueue cost.
HOLD_CYCLES_PER_REPEAT = 120_000
# Every tensor of a conv graph by a fixed uid, so a plan deserialized from the timing cache binds the same names.
TENSOR_UIDS = {"x": 1, "w": 2, "descale": 3, "bias": 4, "residual": 5, "qscale": 6, "y": 7}
SCALED_MM_ALIGNMENT = 16  # torch._scaled_mm takes FP8 operands whose inner and outer dimensions are multiples of it
NOT_SERIALIZED = "built, but cuDNN did not serialize it"
Compiled = tuple[list[str], dict[int, bytes | str]]  # a graph's plan names; by index, its plan serialized or why not


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
    # fp16 only: a per-output-channel scale (bound to ones) after the convolution, as an FP8 graph descales; cuDNN
    # offers such a graph of a grouped convolution its runtime-fusion engines, which it offers no plain fp16 graph of
    # one (`conv_tactics.scaled_companion`)
    unit_scale: bool = False
    # a 1x1 convolution (stride 1, no padding, one group) defined as cuDNN's matmul of the NHWC rows by the weights,
    # (N*H*W, Cin) @ (Cin, Cout), with the same epilogue: cuDNN lists other plans for it
    # (`conv_tactics.matmul_companion`)
    as_matmul: bool = False
    # how its tactics are timed: each timed call reads another copy of the weights, as a layer of an engine whose
    # weights exceed L2 reads its own from memory (`weight_residency`); part of the key, so cached choices are apart
    cold_weights: bool = False

    def output_shape(self) -> tuple[int, int, int, int]:
        n, _, h, w = self.input_shape
        ho, wo = ((size + 2 * p - d * (k - 1) - 1) // s + 1
                  for size, k, s, p, d in zip((h, w), self.kernel, self.stride, self.padding, self.dilation,
                                              strict=False))
        return n, self.out_channels, ho, wo

    def key(self) -> str:
        return (f"conv {self.precision} in={'x'.join(map(str, self.input_shape))} k={self.out_channels} "
                f"r={self.kernel} s={self.stride} p={self.padding} d={self.dilation} g={self.groups} "
                f"epi={'+'.join(self.epilogue) or '-'} out={'fp8' if self.output_fp8 else 'fp16'}"
                + (" scale=1" if self.unit_scale else "") + (" matmul" if self.as_matmul else "")
                + (" cold-w" if self.cold_weights else ""))

    def graph_words(self) -> str:
        """What runs the layer, in a layer's `kind`: "cuDNN conv graph (fp16)", "cuDNN conv graph (fp16, scaled by
        ones)", "cuDNN matmul graph (fp8)"."""
        return (f"cuDNN {'matmul' if self.as_matmul else 'conv'} graph ({self.precision}"
                f"{', scaled by ones' if self.unit_scale else ''})")

    def descaled(self) -> bool:
        """Whether the graph multiplies the convolution by a per-output-channel scale: FP8's descale, or the fp16
        graph's scale of one (`unit_scale`)."""
        return self.precision == "fp8" or self.unit_scale


def _nhwc(shape: tuple[int, ...]) -> list[int]:
    _, c, h, w = shape
    return [c * h * w, 1, w * c, c]


def define_graph(sig: ConvSignature, cudnn: Any, handle: Any) -> Any:
    """The fused cuDNN graph for `sig`, its plans listed (heuristic modes A, B and the fallback), none built:
    conv (or, `as_matmul`, the matmul of the NHWC rows by the weights) -> x (descale per output channel: FP8's, or
    ones where `unit_scale`) -> + bias -> epilogue -> (x 1 / output scale -> FP8); NHWC tensors (the matmul's are
    the same memory seen as rows), each by its fixed uid (TENSOR_UIDS). Raises cuDNN's error where it has no engine
    for the graph."""
    dt = cudnn.data_type
    in_type = dt.FP8_E4M3 if sig.precision == "fp8" else dt.HALF
    k, cg = sig.out_channels, sig.input_shape[1] // sig.groups
    out_shape = sig.output_shape()
    g = cudnn.pygraph(io_data_type=dt.HALF, intermediate_data_type=dt.FLOAT, compute_data_type=dt.FLOAT, handle=handle)

    def tensor(name: str, dim: list[int], stride: list[int], data_type: Any) -> Any:
        return g.tensor(name=name, dim=dim, stride=stride, data_type=data_type, uid=TENSOR_UIDS[name])

    if sig.as_matmul:
        rows = out_shape[0] * out_shape[2] * out_shape[3]
        cin = sig.input_shape[1]
        channel, scalar = ([1, 1, k], [k, k, 1]), ([1, 1, 1], [1, 1, 1])
        out_dim, out_stride = [1, rows, k], [rows * k, k, 1]
        y = g.matmul(A=tensor("x", [1, rows, cin], [rows * cin, cin, 1], in_type),
                     B=tensor("w", [1, cin, k], [cin * k, 1, cin], in_type), compute_data_type=dt.FLOAT)
    else:
        channel, scalar = ([1, k, 1, 1], [k, 1, k, k]), ([1, 1, 1, 1], [1, 1, 1, 1])
        out_dim, out_stride = list(out_shape), _nhwc(out_shape)
        y = g.conv_fprop(image=tensor("x", list(sig.input_shape), _nhwc(sig.input_shape), in_type),
                         weight=tensor("w", [k, cg, *sig.kernel], _nhwc((k, cg, *sig.kernel)), in_type),
                         padding=list(sig.padding), stride=list(sig.stride), dilation=list(sig.dilation),
                         compute_data_type=dt.FLOAT)
    if sig.descaled():
        y = g.mul(a=y, b=tensor("descale", *channel, dt.FLOAT), compute_data_type=dt.FLOAT)
    y = g.add(a=y, b=tensor("bias", *channel, dt.HALF), compute_data_type=dt.FLOAT)
    for word in sig.epilogue:
        if word == "add":
            y = g.add(a=y, b=tensor("residual", out_dim, out_stride, dt.HALF), compute_data_type=dt.FLOAT)
        else:
            y = getattr(g, CUDNN_ACTIVATIONS[word])(input=y, compute_data_type=dt.FLOAT)
    if sig.output_fp8:
        y = g.mul(a=y, b=tensor("qscale", *scalar, dt.FLOAT), compute_data_type=dt.FLOAT)
    y.set_output(True).set_data_type(dt.FP8_E4M3 if sig.output_fp8 else dt.HALF).set_dim(out_dim) \
        .set_stride(out_stride).set_uid(TENSOR_UIDS["y"])
    g.validate()
    g.build_operation_graph()
    g.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.B, cudnn.heur_mode.FALLBACK])
    g.check_support()
    return g


def graph_definition() -> str:
    """A digest of how graphs are defined here (`define_graph`, the rule `ConvSignature.descaled` it reads, the
    tensors' uids), for the timing cache's key: a serialized plan holds its whole graph, so a plan kept under another
    definition is not loaded."""
    source = (inspect.getsource(define_graph) + inspect.getsource(ConvSignature.descaled)
              + repr(sorted(TENSOR_UIDS.items())))
    return hashlib.sha256(source.encode()).hexdigest()[:16]


def engine_timing_cache(cudnn: Any) -> TimingCache:
    """The timing cache of this process's GPU and cuDNN (`timing_cache_path`: the GPU, its compute capability, the
    cuDNN and frontend versions), keyed by how graphs are defined here (`graph_definition`). On the GPU only."""
    name, capability, versions = _cache_identity(cudnn)
    return TimingCache(timing_cache_path(name, capability, versions),
                       {"gpu": name, "compute_capability": capability, "versions": versions,
                        "graph_definition": graph_definition()})


def engine_timing_cache_exists(cudnn: Any) -> bool:
    """Whether this process's GPU and cuDNN have a timing cache file (`engine_timing_cache`), read or not: where
    none, a first build compiles every graph."""
    return timing_cache_path(*_cache_identity(cudnn)).exists()


def _cache_identity(cudnn: Any) -> tuple[str, str, str]:
    """The GPU's name, its compute capability and the cuDNN and frontend versions, as the timing cache names them."""
    capability = "{}{}".format(*torch.cuda.get_device_capability())
    return (torch.cuda.get_device_name(), capability,
            f"cudnn{cudnn.backend_version()}-fe{getattr(cudnn, '__version__', 'unknown')}")


def tensor_names(sig: ConvSignature) -> list[str]:
    """The names of the tensors `define_graph` gives `sig`'s graph."""
    names = ["x", "w", *(["descale"] if sig.descaled() else []), "bias"]
    return names + (["residual"] if "add" in sig.epilogue else []) + (["qscale"] if sig.output_fp8 else []) + ["y"]


def time_execution(run: Callable[[], object]) -> float:
    """Microseconds per call of `run` (one plan's execution), warmed up, then timed back to back on the GPU, once no
    compile worker of Inductor's is alive (`end_compile_workers`)."""
    end_compile_workers()
    for _ in range(PLAN_WARMUP):
        run()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda._sleep(HOLD_CYCLES_PER_REPEAT * PLAN_REPEATS)  # the GPU waits while the host enqueues
    start.record()
    for _ in range(PLAN_REPEATS):
        run()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1e3 / PLAN_REPEATS


CAPTURED_TIMING = "graph-replays"  # how `time_captured` times: the tag of such times in the timing cache


def time_captured(run: Callable[[], object]) -> float:
    """Microseconds per call of `run` as the engine runs it: captured in a CUDA graph (`capture_graph`: one call on a
    side stream first), its replays timed by `time_execution`. A replay is one launch, so a `run` that enqueues several
    kernels from Python is timed by its kernels, not by the host's enqueueing. RuntimeError where it does not capture:
    what the engine's graph could not hold is no tactic of it."""
    captured = capture_graph(run, lambda: None)
    if not captured.step.graphed:
        raise RuntimeError(captured.step.note or "CUDA graph capture failed")
    return time_execution(captured.step.run)


def scratch_tensors(sig: ConvSignature, device: str = "cuda") -> dict[int, torch.Tensor]:
    """Tensors on `device` to time `sig`'s plans on, by uid."""
    dtype = FP8 if sig.precision == "fp8" else torch.float16
    n, c, h, w = sig.input_shape
    k = sig.out_channels
    data = {
        "x": torch.randn(n, c, h, w, device=device).to(dtype, memory_format=torch.channels_last),
        "w": (torch.randn(k, c // sig.groups, *sig.kernel, device=device) * 0.05).to(
            dtype, memory_format=torch.channels_last),
        "bias": torch.zeros(1, k, 1, 1, device=device, dtype=torch.float16),
        "descale": torch.full((1, k, 1, 1), 0.01, device=device),
        "residual": torch.zeros(sig.output_shape(), device=device, dtype=torch.float16).to(
            memory_format=torch.channels_last),
        "qscale": torch.ones(1, 1, 1, 1, device=device),
        "y": torch.empty(sig.output_shape(), device=device, dtype=FP8 if sig.output_fp8 else torch.float16)
        .to(memory_format=torch.channels_last),
    }
    return {TENSOR_UIDS[name]: data[name] for name in tensor_names(sig)}


def scratch_packs(sig: ConvSignature, device: str = "cuda") -> Callable[[], dict[int, torch.Tensor]]:
    """What each timed call of `sig`'s plans reads, one call's tensors at a time: `scratch_tensors` every call, or,
    with `sig.cold_weights`, the next of its copies with another copy of the weights (`weight_residency`)."""
    scratch = scratch_tensors(sig, device)
    packs = weight_packs(scratch, TENSOR_UIDS["w"], gpu_l2_bytes(device)) if sig.cold_weights else [scratch]
    return itertools.cycle(packs).__next__


def serialize_selected(graph: Any) -> bytes | None:
    """The graph's selected plan in cuDNN's serialized form, or None where cuDNN does not serialize it."""
    try:
        return bytes(graph.serialize(as_bytes=True))
    except Exception:  # noqa: BLE001  (a plan kind cuDNN cannot serialize: the cache keeps only its index)
        return None


def load_plan(cudnn: Any, handle: Any, plan: bytes) -> Any:
    """A graph whose one plan is `plan` (serialized by `serialize_selected`, same GPU and cuDNN): nothing compiled."""
    graph = cudnn.pygraph(handle=handle)
    graph.deserialize(handle, plan)
    return graph


@dataclass
class ConvGraph:
    """One fused cuDNN graph with its chosen plan selected, built here or loaded from its serialized bytes; layers
    of one signature share it."""

    sig: ConvSignature
    cudnn: Any
    handle: Any
    graph: Any
    choice: Choice
    plan: bytes | None  # the chosen plan serialized, for the timing cache

    @property
    def workspace_bytes(self) -> int:
        return int(self.graph.get_workspace_size())

    def execute(self, values: dict[str, torch.Tensor], workspace: torch.Tensor) -> None:
        self.cudnn.set_stream(self.handle, torch.cuda.current_stream().cuda_stream)
        self.graph.execute({TENSOR_UIDS[name]: value for name, value in values.items()}, workspace, handle=self.handle)

    def time_us(self) -> float:
        """Microseconds per execution of the chosen plan: as timed when it was chosen (here or in the run that
        cached it), else timed now on scratch tensors as plans are (`time_execution`)."""
        if self.choice.time_us is None:
            pack = scratch_packs(self.sig)
            workspace = torch.empty(max(self.workspace_bytes, 1), dtype=torch.uint8, device="cuda")
            self.cudnn.set_stream(self.handle, torch.cuda.current_stream().cuda_stream)
            self.choice.time_us = time_execution(lambda: self.graph.execute(pack(), workspace, handle=self.handle))
        return self.choice.time_us


def select_in_process(sig: ConvSignature, cudnn: Any, handle: Any, limit: int, cache: TimingCache | None) -> ConvGraph:
    """Builds and times up to `limit` of `sig`'s plans here, keeps the fastest (or the choice the cache names)."""
    graph = define_graph(sig, cudnn, handle)
    pack = scratch_packs(sig)
    cudnn.set_stream(handle, torch.cuda.current_stream().cuda_stream)

    def time_plan(index: int) -> float:
        graph.build_plan_at_index(index)
        workspace = torch.empty(max(graph.get_workspace_size_plan_at_index(index), 1), dtype=torch.uint8, device="cuda")
        return time_execution(lambda: graph.execute_plan_at_index(pack(), workspace, index, handle=handle))

    choice = choose_plan(graph, sig.key(), limit, time_plan, cache)
    return ConvGraph(sig, cudnn, handle, graph, choice, serialize_selected(graph))


def select_compiled(sig: ConvSignature, cudnn: Any, handle: Any, limit: int, names: list[str],
                    plans: dict[int, bytes | str]) -> ConvGraph:
    """The fastest of the plans a worker compiled and serialized (`plans_compiled`), each loaded and timed here."""
    pack = scratch_packs(sig)
    loaded: dict[int, Any] = {}

    def load(index: int, plan: bytes) -> Any:
        loaded[index] = load_plan(cudnn, handle, plan)
        return loaded[index]

    compiled = CompiledPlans(names, {i: p for i, p in plans.items() if isinstance(p, bytes)},
                             {i: p for i, p in plans.items() if isinstance(p, str)}, load)
    cudnn.set_stream(handle, torch.cuda.current_stream().cuda_stream)

    def time_plan(index: int) -> float:
        graph = compiled.build_plan_at_index(index)
        workspace = torch.empty(max(graph.get_workspace_size(), 1), dtype=torch.uint8, device="cuda")
        return time_execution(lambda: graph.execute(pack(), workspace, handle=handle))

    choice = choose_plan(compiled, sig.key(), limit, time_plan, None)
    return ConvGraph(sig, cudnn, handle, loaded[choice.index], choice, compiled.plans[choice.index])


def plans_compiled(sig: ConvSignature, cudnn: Any, handle: Any, limit: int) -> Compiled:
    """`sig`'s plan names, and each of its first `limit` plans built and serialized or the reason it was not (what a
    worker process returns to `select_compiled`). Raises cuDNN's error where it has no engine for the graph."""
    graph = define_graph(sig, cudnn, handle)
    names = [graph.get_plan_name_at_index(i) for i in range(graph.get_execution_plan_count())]
    plans: dict[int, bytes | str] = {}
    for index in range(min(len(names), max(1, limit))):
        try:
            graph.build_plan_at_index(index)
        except Exception as exc:  # noqa: BLE001  (a plan that does not build is a refusal of that plan)
            plans[index] = joined_message(exc, 200)
            continue
        plans[index] = serialize_selected(graph) or NOT_SERIALIZED
    return names, plans


class ConvLayer:
    """One convolution's tensors bound to a shared graph: weights (FP8 with per-channel descale, or fp16 with a
    descale of ones where the graph has one), bias, and the output quantize scale."""

    def __init__(self, graph: ConvGraph, weight: torch.Tensor, bias: torch.Tensor | None, x_scale: float | None,
                 w_scale: torch.Tensor | None, out_scale: float | None, workspace: list[torch.Tensor]) -> None:
        sig = graph.sig
        self.graph, self.workspace = graph, workspace
        k = sig.out_channels
        values: dict[str, torch.Tensor] = {}
        if sig.precision == "fp8":
            assert x_scale is not None and w_scale is not None
            w_scale = w_scale.float().reshape(-1, 1, 1, 1)
            values["w"] = quantize_weight(weight, w_scale).contiguous(memory_format=torch.channels_last)
            values["descale"] = (w_scale * x_scale).reshape(1, k, 1, 1).contiguous()
        else:
            values["w"] = weight.detach().half().contiguous(memory_format=torch.channels_last)
            if sig.unit_scale:
                values["descale"] = torch.ones(1, k, 1, 1, device=weight.device)
        values["bias"] = (bias.detach().half() if bias is not None
                          else torch.zeros(k, device=weight.device, dtype=torch.float16)
                          ).reshape(1, k, 1, 1).contiguous()
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
        if in_features % SCALED_MM_ALIGNMENT or out_features % SCALED_MM_ALIGNMENT:
            raise ValueError(f"torch._scaled_mm needs in and out features divisible by {SCALED_MM_ALIGNMENT} "
                             f"(got {in_features} -> {out_features})")
        per_channel = w_scale.numel() > 1
        scale = w_scale.float().reshape(-1, 1)
        self.weight = quantize_weight(weight, scale).t()
        self.scale_b = scale.reshape(1, -1).contiguous() if per_channel else scale.reshape(()).contiguous()
        self.x_scale, self.per_channel = x_scale, per_channel
        self.bias = bias.detach().half() if bias is not None else None
        self._scale_a: dict[int, torch.Tensor] = {}
        self.path = ("torch._scaled_mm (cuBLASLt), FP8 e4m3 in, rowwise scales (per-tensor input, "
                     "per-channel weights), bias fused, fp16 out") if per_channel else (
                         "torch._scaled_mm (cuBLASLt), FP8 e4m3 in, per-tensor scales, bias fused, fp16 out")

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


GraphSource = Literal["cached", "answered", "built"]  # how `build_graph` made a graph


def build_graph(sig: ConvSignature, cudnn: Any, handle: Any, limit: int, cache: TimingCache | None,
                compiled: Compiled | None = None) -> tuple[ConvGraph, float, GraphSource]:
    """The graph for `sig` with its plan chosen, the seconds it took and how it was made: loaded from the cache's
    serialized plan where it holds one ("cached"), else the fastest of the plans a worker compiled (`compiled`, where
    its answer covers every plan to try: `answer_covers`; "answered"), else built and timed here ("built"); the
    choice recorded in the cache. RuntimeError with cuDNN's reason."""
    started = time.perf_counter()
    source: GraphSource = "cached"
    try:
        graph = _cached(sig, cudnn, handle, cache)
        if graph is None and compiled is not None and answer_covers(compiled, limit):
            source = "answered"
            try:
                graph = select_compiled(sig, cudnn, handle, limit, *compiled)
            except Exception:  # noqa: BLE001  (the plans compiled elsewhere did not load or run here: built here)
                graph = None
        if graph is None:
            source = "built"
            graph = select_in_process(sig, cudnn, handle, limit, cache)
    except Exception as exc:  # noqa: BLE001  (cudnnGraphNotSupportedError and its kin: no engine for this graph)
        raise RuntimeError(f"cuDNN: {joined_message(exc, 300)}") from None
    if cache is not None:
        cache.put(sig.key(), graph.choice, graph.plan)
    return graph, time.perf_counter() - started, source


def answer_covers(compiled: Compiled, limit: int) -> bool:
    """Whether a worker's answer covers every plan to be tried the way this process would: each serialized, or
    refused by cuDNN (a plan that built but did not serialize, or ran out of memory in the worker, is not)."""
    names, plans = compiled
    tried = [plans.get(index) for index in range(min(len(names), max(1, limit)))]
    return any(isinstance(p, bytes) for p in tried) and not any(
        p is None or (isinstance(p, str) and (p == NOT_SERIALIZED or "out of memory" in p.lower())) for p in tried)


def _cached(sig: ConvSignature, cudnn: Any, handle: Any, cache: TimingCache | None) -> ConvGraph | None:
    """The graph loaded from the cache's serialized plan for `sig`, or None (none held, or cuDNN refuses it)."""
    found = cache.plan(sig.key()) if cache is not None else None
    if found is None:
        return None
    plan, entry = found
    try:
        graph = load_plan(cudnn, handle, plan)
    except Exception:  # noqa: BLE001  (a plan this cuDNN no longer loads is chosen again)
        return None
    time_us = entry.get("time_us") or None  # checked for meaning when the cache was read (cache_files.timing_entry)
    return ConvGraph(sig, cudnn, handle, graph,
                     Choice(entry["index"], entry["name"], 1, int(entry.get("offered", 0)), time_us, True, []), plan)
