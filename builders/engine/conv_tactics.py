"""A convolution's tactics from other libraries than cuDNN, timed against its cuDNN plans (`builders.engine.build`):

- a 1x1 convolution (stride 1, no padding or dilation, one group) on an NHWC tensor is a GEMM,
  (N*H*W, Cin) @ (Cin, Cout), run by cuBLASLt through torch: `torch.addmm` on the channels-last view in fp16,
  `torch._scaled_mm` through `Fp8Linear` in FP8 (its scales: per-tensor input, per-output-channel weights);
- a depthwise convolution (groups == Cin == Cout) in fp16 runs as ATen dispatches `F.conv2d`, in two tactics: on the
  channels-last tensor (on CUDA that is cuDNN's legacy depthwise path: ATen's `use_cudnn_depthwise` takes cuDNN for
  every channels-last input, not the frontend graphs' plans), and on an NCHW copy (ATen's own depthwise kernel), the
  copy there and the one back to channels-last timed with it; PyTorch has no FP8 convolution.

Each computes what the signature's cuDNN graph computes: bias, then the graph's epilogue (activations, the residual
add) and its output quantize as PyTorch ops after the GEMM or the convolution, in fp16. Which convolution may take
which tactic is decided by pure functions (`gemm_eligible`, `depthwise_eligible`, `offered`; cuDNN's other graphs
of the same convolution by `companions`); the runners run on the CPU too (the tests compare them with `F.conv2d`);
`time_library` times one on the GPU, as the engine runs it: replays of a captured CUDA graph (a tactic enqueued from
Python as several kernels, the GEMM, its epilogue's ops and the quantize, costs the host more a call than the plans'
timer covers, and eager its time was the host's: `docs/engine.md`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import torch
import torch.nn.functional as F

from builders.engine.kernels import (
    SCALED_MM_ALIGNMENT,
    TENSOR_UIDS,
    ConvSignature,
    Fp8Linear,
    scratch_tensors,
    time_captured,
)
from builders.engine.plans import tactics_timed
from builders.engine.tactics import CUBLASLT, CUDNN_MATMUL, CUDNN_SCALED, PYTORCH, PYTORCH_NCHW
from builders.engine.weight_residency import FP16_BYTES, gpu_l2_bytes, weight_copies
from builders.fp8.quantizer import Quantizer

TORCH_ACTIVATIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "relu": torch.relu, "swish": F.silu, "sigmoid": torch.sigmoid, "gelu": F.gelu}
LIBRARY_KINDS = {CUBLASLT: "cuBLASLt GEMM, 1x1 conv", PYTORCH: "ATen depthwise conv",
                 PYTORCH_NCHW: "ATen depthwise conv, NCHW"}  # a layer's kind, by library


def nhwc_strides(shape: tuple[int, ...]) -> tuple[int, int, int, int]:
    """The strides (in NCHW order) of a dense channels-last tensor of NCHW `shape`."""
    _, c, h, w = shape
    return c * h * w, 1, w * c, c


def channels_last_dense(shape: tuple[int, ...], strides: tuple[int, ...]) -> bool:
    """Whether a 4-D tensor of NCHW `shape` and `strides` is dense channels-last (a dimension of size 1 takes any
    stride)."""
    return all(size == 1 or stride == dense for size, stride, dense in zip(shape, strides, nhwc_strides(shape),
                                                                            strict=True))


def gemm_geometry(sig: ConvSignature) -> str | None:
    """None where `sig`'s convolution is, by its geometry, a GEMM over the pixels of its NHWC input: a 1x1 kernel,
    stride 1, padding 0, dilation 1, one group; else why not."""
    checks = (("kernel", sig.kernel, (1, 1)), ("stride", sig.stride, (1, 1)), ("padding", sig.padding, (0, 0)),
              ("dilation", sig.dilation, (1, 1)), ("groups", sig.groups, 1))
    for what, value, needed in checks:
        if value != needed:
            return f"a GEMM needs {what} {needed}, not {value}"
    return None


def gemm_eligible(sig: ConvSignature, input_strides: tuple[int, ...] | None = None) -> str | None:
    """None where cuBLASLt's GEMM may run `sig`'s convolution: a GEMM by its geometry (`gemm_geometry`), the input
    dense channels-last (`input_strides`, NCHW order; None: the engine's own NHWC layout, which every conv graph
    reads) and, in FP8, Cin and Cout multiples of 16 (torch._scaled_mm); else why not."""
    geometry = gemm_geometry(sig)
    if geometry is not None:
        return geometry
    if input_strides is not None and not channels_last_dense(sig.input_shape, input_strides):
        return f"a GEMM reads a dense channels-last input without a copy; strides {input_strides} are not"
    cin, cout = sig.input_shape[1], sig.out_channels
    if sig.precision == "fp8" and (cin % SCALED_MM_ALIGNMENT or cout % SCALED_MM_ALIGNMENT):
        return (f"torch._scaled_mm needs in and out channels divisible by {SCALED_MM_ALIGNMENT} "
                f"(got {cin} -> {cout})")
    return None


def depthwise_eligible(sig: ConvSignature) -> str | None:
    """None where ATen's convolution may run `sig`'s: depthwise (groups == Cin == Cout) in fp16."""
    cin = sig.input_shape[1]
    if not sig.groups == cin == sig.out_channels:
        return f"not depthwise: {sig.groups} groups, {cin} -> {sig.out_channels} channels"
    if sig.precision != "fp16":
        return "PyTorch has no FP8 convolution"
    return None


def offered(sig: ConvSignature, plan_limit: int) -> tuple[str, ...]:
    """The other libraries whose tactic is timed against `sig`'s cuDNN plans: none where `tactics_timed` says no, else
    cuBLASLt where `gemm_eligible`, PyTorch's two where `depthwise_eligible`."""
    if not tactics_timed(plan_limit):
        return ()
    depthwise = depthwise_eligible(sig)
    eligible = ((CUBLASLT, gemm_eligible(sig)), (PYTORCH, depthwise), (PYTORCH_NCHW, depthwise))
    return tuple(library for library, reason in eligible if reason is None)


def scaled_companion(sig: ConvSignature, plan_limit: int) -> ConvSignature | None:
    """The graph whose plans are timed beside `sig`'s as one more cuDNN tactic: `sig` with a per-channel scale of one
    after the convolution (`unit_scale`), for an fp16 grouped or depthwise convolution writing fp16 where
    `tactics_timed`; else None (a companion has none of its own). An FP8 graph, or one writing FP8, has a scale in
    it already. cuDNN offers its runtime-fusion engines (eng4, eng7, eng8) to the scaled graph of a grouped
    convolution and none to the plain one (docs/engine.md); dense convolutions are not offered one, since cuDNN
    already offers their plain graphs those engines (the frontend check's 1x1 lines)."""
    if (not tactics_timed(plan_limit) or sig.precision != "fp16" or sig.output_fp8 or sig.unit_scale or sig.as_matmul
            or sig.groups == 1):
        return None
    return dataclasses.replace(sig, unit_scale=True)


def matmul_companion(sig: ConvSignature, plan_limit: int) -> ConvSignature | None:
    """The graph whose plans are timed beside `sig`'s as cuDNN's matmul tactic: `sig` defined as the matmul of its
    input's rows by its weights (`as_matmul`: same tensors, epilogue and output), for a convolution that is a GEMM by
    its geometry (`gemm_geometry`), in either precision and output format, where `tactics_timed`; else None. cuDNN
    lists other plans for the matmul graph than for the convolution's, and they beat the convolution's on many 1x1
    shapes (`benchmarks/cudnn_matmul_tactic.py`)."""
    if not tactics_timed(plan_limit) or sig.as_matmul or sig.unit_scale or gemm_geometry(sig) is not None:
        return None
    return dataclasses.replace(sig, as_matmul=True)


def companions(sig: ConvSignature, plan_limit: int) -> dict[str, ConvSignature]:
    """cuDNN's other graphs of `sig`'s convolution whose plans are timed beside its own, by the library word of their
    tactic (`scaled_companion`, `matmul_companion`); none for a companion itself."""
    found = {CUDNN_SCALED: scaled_companion(sig, plan_limit), CUDNN_MATMUL: matmul_companion(sig, plan_limit)}
    return {library: companion for library, companion in found.items() if companion is not None}


def gemm_rows(x: torch.Tensor) -> torch.Tensor:
    """The (N*H*W, C) rows of a dense channels-last 4-D `x`, a view (no copy). ValueError for any other layout."""
    if not channels_last_dense(tuple(x.shape), tuple(x.stride())):
        raise ValueError(f"not dense channels-last: shape {tuple(x.shape)}, strides {x.stride()}")
    return x.permute(0, 2, 3, 1).reshape(-1, x.shape[1])


class LibraryConv:
    """A convolution run outside cuDNN: `core` (the GEMM or the convolution, bias included, an NCHW-shaped
    channels-last result), then the epilogue words in order and the output quantize where one is given."""

    def __init__(self, core: Callable[[torch.Tensor], torch.Tensor], path: str, epilogue: tuple[str, ...],
                 quantize: Callable[[torch.Tensor], torch.Tensor] | None) -> None:
        self.core, self.path, self.epilogue, self.quantize = core, path, epilogue, quantize

    def __call__(self, x: torch.Tensor, residual: torch.Tensor | None = None) -> torch.Tensor:
        y = apply_epilogue(self.core(x.contiguous(memory_format=torch.channels_last)), self.epilogue, residual)
        return self.quantize(y) if self.quantize is not None else y


def apply_epilogue(y: torch.Tensor, epilogue: tuple[str, ...], residual: torch.Tensor | None) -> torch.Tensor:
    """`y` through a conv graph's epilogue words in order, as PyTorch ops: "add" adds `residual` (ValueError where
    none is given), an activation word applies that activation."""
    for word in epilogue:
        if word == "add":
            if residual is None:
                raise ValueError("an add epilogue reads a residual")
            y = y + residual
        else:
            y = TORCH_ACTIVATIONS[word](y)
    return y


def _gemm(sig: ConvSignature, weight: torch.Tensor, bias: torch.Tensor | None, x_scale: float | None,
          w_scale: torch.Tensor | None, dtype: torch.dtype) -> tuple[Callable[[torch.Tensor], torch.Tensor], str]:
    """The GEMM of a 1x1 convolution and its description: FP8 through `Fp8Linear`, else `torch.addmm` in `dtype`."""
    matrix = weight.detach().reshape(sig.out_channels, -1)
    if sig.precision == "fp8":
        if x_scale is None or w_scale is None:
            raise ValueError("an FP8 GEMM needs the input and weight scales")
        linear = Fp8Linear(matrix, bias, x_scale, w_scale)
        multiply: Callable[[torch.Tensor], torch.Tensor] = linear
        path = linear.path.replace("torch._scaled_mm (cuBLASLt)", "torch._scaled_mm (cuBLASLt, 1x1 conv as a GEMM)")
    else:
        matrix_t = matrix.to(dtype).t()
        shift = (bias.detach() if bias is not None else torch.zeros(sig.out_channels, device=weight.device)).to(dtype)
        path = f"torch.addmm (cuBLASLt, 1x1 conv as a GEMM on the channels-last view), {str(dtype)[6:]}"

        def multiply(rows: torch.Tensor) -> torch.Tensor:
            return torch.addmm(shift, rows, matrix_t)

    def core(x: torch.Tensor) -> torch.Tensor:
        n, _, h, w = x.shape
        return multiply(gemm_rows(x)).view(n, h, w, -1).permute(0, 3, 1, 2)

    return core, path


def _depthwise(sig: ConvSignature, weight: torch.Tensor, bias: torch.Tensor | None, dtype: torch.dtype,
               nchw: bool) -> tuple[Callable[[torch.Tensor], torch.Tensor], str]:
    """ATen's convolution for `sig` in `dtype` and its description: on the channels-last tensor, or (`nchw`) on an
    NCHW copy of it, the result copied back to channels-last."""
    layout = torch.contiguous_format if nchw else torch.channels_last
    kernel = weight.detach().to(dtype).contiguous(memory_format=layout)
    shift = bias.detach().to(dtype) if bias is not None else None

    def core(x: torch.Tensor) -> torch.Tensor:
        y = F.conv2d(x.contiguous(memory_format=layout), kernel, shift, sig.stride, sig.padding, sig.dilation,
                     sig.groups)
        return y.contiguous(memory_format=torch.channels_last)

    where = "an NCHW copy, the result copied back to channels-last" if nchw else "channels-last"
    return core, f"torch.nn.functional.conv2d (ATen's depthwise dispatch, {where}), {str(dtype)[6:]}"


def library_conv(library: str, sig: ConvSignature, weight: torch.Tensor, bias: torch.Tensor | None,
                 x_scale: float | None, w_scale: torch.Tensor | None, out_scale: float | None,
                 quantizer: Callable[[], Quantizer], dtype: torch.dtype = torch.float16) -> LibraryConv:
    """`sig`'s convolution as `library`'s tactic (cuBLASLt or PyTorch), computing what its cuDNN graph computes:
    in FP8 the input is FP8 and scaled by `x_scale`, the weight quantized with `w_scale` (per output channel, or
    one); with `sig.output_fp8` the result is quantized with `out_scale` by the engine's quantize (`quantizer`).
    `dtype` is the precision of an fp16 signature's arithmetic (fp32 where the CPU tests compare values).
    ValueError where the library cannot run the signature (`gemm_eligible`, `depthwise_eligible`)."""
    reason = gemm_eligible(sig) if library == CUBLASLT else depthwise_eligible(sig) if library in (
        PYTORCH, PYTORCH_NCHW) else f"no tactic of library {library!r} here"
    if reason is not None:
        raise ValueError(reason)
    core, path = (_gemm(sig, weight, bias, x_scale, w_scale, dtype) if library == CUBLASLT
                  else _depthwise(sig, weight, bias, dtype, library == PYTORCH_NCHW))
    quantize = None
    if sig.output_fp8:
        if out_scale is None:
            raise ValueError("an FP8 output needs its scale")
        quantize = _quantize(quantizer(), torch.tensor(1.0 / out_scale, dtype=torch.float32, device=weight.device))
    return LibraryConv(core, path, sig.epilogue, quantize)


def _quantize(quantizer: Quantizer, inverse: torch.Tensor) -> Callable[[torch.Tensor], torch.Tensor]:
    """The engine's quantize of a conv's output with the inverse of its readers' input scale, channels-last."""
    return lambda y: quantizer.run(y, inverse, True)


def time_library(library: str, sig: ConvSignature, quantizer: Callable[[], Quantizer], device: str = "cuda") -> float:
    """Microseconds per call of `library`'s tactic for `sig` on scratch tensors on `device` (the cuDNN plans' own:
    NHWC input, residual), as the engine runs it (`time_captured`: replays of a captured CUDA graph; RuntimeError
    where it does not capture, and the tactic is not offered); with `sig.cold_weights`, one graph of one call per copy
    of the weights (`weight_residency.weight_copies`), each reading its own, the graph's time divided by the calls.
    On the GPU (the CPU only where a test stands in for the timer)."""
    scratch = scratch_tensors(sig, device)
    k, cin = sig.out_channels, sig.input_shape[1]
    shape = (k, cin // sig.groups, *sig.kernel)
    copies = weight_copies(math.prod(shape) * FP16_BYTES, gpu_l2_bytes(device)) if sig.cold_weights else 1
    bias, w_scale = torch.zeros(k, device=device), torch.full((k,), 0.01, device=device)
    runners = [library_conv(library, sig, torch.randn(shape, device=device) * 0.05, bias, 1.0, w_scale, 1.0, quantizer)
               for _ in range(copies)]
    x, residual = scratch[TENSOR_UIDS["x"]], scratch.get(TENSOR_UIDS["residual"])

    def calls() -> torch.Tensor:
        for runner in runners:  # each output dropped by the next call: the capture reuses its memory
            out = runner(x, residual)
        return out

    return time_captured(calls) / copies
