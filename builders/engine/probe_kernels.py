"""Real FP8 (e4m3) kernels for one layer, without TensorRT: cuDNN's FP8 convolution through the cuDNN
frontend's graph API, and `torch._scaled_mm` (cuBLASLt) for linears and 1x1 convolutions.

Per-tensor scales, as TensorRT's FP8 Q/DQ uses them: the weight is quantized once, offline; the
activation with a static scale from calibration. Each candidate either runs or says why not: a
refusal is a finding (no FP8 kernel for that shape), never an error.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch

from builders.fp8.format import E4M3_MAX, FP8, scale_from_amax
from builders.models.layer_spec import LayerSpec
from sessions.documents.errors import MissingEnvironment

CUDNN_PACKAGE = "nvidia-cudnn-frontend"


def quantize(x: torch.Tensor, inverse_scale: torch.Tensor, channels_last: bool) -> torch.Tensor:
    """ONNX's QuantizeLinear to e4m3, which TensorRT's explicit Q/DQ takes: scale with the product in fp32 (as
    ModelOpt's simulation, `_fp8_eager`), saturate to the e4m3 range and round once in the cast (PyTorch's cast
    alone turns overflow into NaN): three kernels."""
    layout = torch.channels_last if channels_last and x.dim() == 4 else torch.contiguous_format
    scaled = (x * inverse_scale.reshape(1)).reshape(x.shape)  # a 1-element tensor takes part in type promotion
    return scaled.clamp_(-E4M3_MAX, E4M3_MAX).to(FP8, memory_format=layout)


@dataclass
class Quantizer:
    """The activation quantize an FP8 engine runs in front of a layer, and how it is implemented here."""

    run: Callable[[torch.Tensor, torch.Tensor, bool], torch.Tensor]
    implementation: str
    refused: list[str] = field(default_factory=list)  # why the fused kernel refused a call (the eager ones ran)


EAGER_QUANTIZE = "eager PyTorch: scale, saturate, cast (one kernel each)"
FUSED_QUANTIZE = "Triton: scale, saturate and cast in one kernel, the eager kernels' values"


def make_quantizer() -> Quantizer:
    """One Triton kernel (`builders.fp8.quantize`) where it compiles and `agrees_with_eager` on the GPU; else PyTorch's
    eager kernels, saying why."""
    try:
        from builders.fp8.quantize import quantize_triton

        if not agrees_with_eager(quantize_triton, "cuda"):
            return Quantizer(quantize, EAGER_QUANTIZE + " (the Triton quantize disagreed)")
    except Exception as exc:  # noqa: BLE001  (no Triton, no GPU, no FP8 conversion: use the eager kernels)
        return Quantizer(quantize, f"{EAGER_QUANTIZE} (Triton quantize unavailable: {type(exc).__name__})")
    refused: list[str] = []
    return Quantizer(_falling_back(quantize_triton, refused), FUSED_QUANTIZE, refused)


def agrees_with_eager(fused: Callable[[torch.Tensor, torch.Tensor, bool], torch.Tensor], device: str) -> bool:
    """Whether `fused` gives `quantize`'s values (`same_values`) and strides, on `device`, for samples with a layout
    change, a strided view, saturation, NaN, Inf, e4m3 subnormals and exact ties between two e4m3 values."""
    wide = torch.randn(2, 24, 5, 3, device=device, dtype=torch.float16) * 300
    wide[0, 0, 0, :3] = torch.tensor([float("nan"), float("inf"), -float("inf")])
    small = torch.linspace(-0.02, 0.02, 2 * 8 * 4 * 4, device=device, dtype=torch.float16).reshape(2, 8, 4, 4)
    ties = torch.tensor([2.125, -2.375, 17.0, 9.25], device=device, dtype=torch.float16).reshape(1, 4, 1, 1)
    samples = [(wide, 1.7), (small, 1.0), (ties, 0.5)]  # ties: x * 0.5 halfway between neighbours (1.0625: 1 or 1.125)
    for x, inverse_value in samples:
        inverse = torch.tensor(inverse_value, device=device)
        for channels_last in (True, False):
            for view in (x, x.contiguous(memory_format=torch.channels_last), x[:, :, :, :2]):
                fused_out, reference = fused(view, inverse, channels_last), quantize(view, inverse, channels_last)
                if fused_out.stride() != reference.stride() or not same_values(fused_out, reference):
                    return False
    return True


def same_values(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether two tensors hold the same values, NaN where the other has NaN (a NaN's sign and payload, and the sign
    of a zero, aside: no later kernel reads them)."""
    a, b = a.float(), b.float()
    return torch.equal(a.isnan(), b.isnan()) and torch.equal(a.nan_to_num(0.0), b.nan_to_num(0.0))


def _falling_back(fused: Callable[[torch.Tensor, torch.Tensor, bool], torch.Tensor],
                  refused: list[str]) -> Callable[[torch.Tensor, torch.Tensor, bool], torch.Tensor]:
    """The fused quantize, or the eager one for a call it cannot take, whose reason is appended to `refused`."""

    def run(x: torch.Tensor, inverse_scale: torch.Tensor, channels_last: bool) -> torch.Tensor:
        try:
            return fused(x, inverse_scale, channels_last)
        except Exception as exc:  # noqa: BLE001  (any refusal: the eager kernels compute the same values)
            refused.append(f"{tuple(x.shape)}: {type(exc).__name__}: {one_line(exc, 200)}")
            return quantize(x, inverse_scale, channels_last)

    return run


@dataclass
class Prepared:
    """One layer's weight in FP8 with what the kernel needs beside it (scales, bias)."""

    weight: torch.Tensor
    tensors: dict[str, torch.Tensor] = field(default_factory=dict)


class Fp8Op(Protocol):
    path: str  # what runs, for the session
    channels_last: bool  # the layout the activation quantize must write

    def prepare(self, weight: torch.Tensor, bias: torch.Tensor | None, x_scale: float) -> Prepared: ...

    def __call__(self, x8: torch.Tensor, prepared: Prepared) -> torch.Tensor: ...


class Unsupported(Exception):
    """This candidate has no kernel for the layer; the message says why."""


def _quantize_weight(weight: torch.Tensor, channels_last: bool) -> tuple[torch.Tensor, float]:
    w_scale = scale_from_amax(float(weight.detach().abs().max()))
    inverse = torch.tensor(1.0 / w_scale, device=weight.device)
    return quantize(weight.detach(), inverse, channels_last), w_scale


class ScaledMmGemm:
    """`torch._scaled_mm`: a linear, or a 1x1 convolution as a GEMM over the pixels of an NHWC tensor."""

    def __init__(self, spec: LayerSpec) -> None:
        if spec.op == "conv" and not spec.pointwise:
            raise Unsupported("torch._scaled_mm: only linears and 1x1 stride-1 ungrouped convolutions are GEMMs")
        if spec.padding_mode != "zeros":
            raise Unsupported(f"torch._scaled_mm: padding mode {spec.padding_mode}")
        k, n = spec.in_channels, spec.out_channels
        if k % 16 or n % 16:
            raise Unsupported(f"torch._scaled_mm needs in and out features divisible by 16 (got {k} -> {n})")
        self.spec = spec
        self.channels_last = spec.op == "conv"
        self.path = (
            "torch._scaled_mm (1x1 conv as a channels-last GEMM), FP8 e4m3 in, fp16 out"
            if spec.op == "conv"
            else "torch._scaled_mm, FP8 e4m3 in, fp16 out"
        )

    def prepare(self, weight: torch.Tensor, bias: torch.Tensor | None, x_scale: float) -> Prepared:
        w8, w_scale = _quantize_weight(weight.reshape(self.spec.out_channels, -1), False)
        device = weight.device
        tensors = {
            "scale_a": torch.tensor(x_scale, dtype=torch.float32, device=device),
            "scale_b": torch.tensor(w_scale, dtype=torch.float32, device=device),
        }
        if bias is not None:
            tensors["bias"] = bias.detach().to(torch.float16)
        return Prepared(w8.t(), tensors)  # column-major, as _scaled_mm wants its second operand

    def __call__(self, x8: torch.Tensor, prepared: Prepared) -> torch.Tensor:
        t = prepared.tensors
        if self.spec.op == "conv":
            n, _, h, w = x8.shape
            rows = x8.permute(0, 2, 3, 1).reshape(-1, x8.shape[1])  # a view of the NHWC tensor
        else:
            rows = x8.reshape(-1, x8.shape[-1])
        out = torch._scaled_mm(
            rows, prepared.weight, scale_a=t["scale_a"], scale_b=t["scale_b"], bias=t.get("bias"),
            out_dtype=torch.float16
        )
        if self.spec.op == "conv":
            return out.view(n, h, w, -1).permute(0, 3, 1, 2)
        return out.view(*x8.shape[:-1], -1)


def import_cudnn():
    """The cuDNN frontend, bound to the libcudnn PyTorch already loaded."""
    torch.backends.cudnn.version()  # loads PyTorch's libcudnn into the process
    library_dir = _loaded_library_dir("libcudnn.so")
    if library_dir and library_dir not in os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep):
        # the frontend looks for libcudnn in LD_LIBRARY_PATH first, then in its own wheel's layout
        os.environ["LD_LIBRARY_PATH"] = os.pathsep.join(
            p for p in (library_dir, os.environ.get("LD_LIBRARY_PATH")) if p)
    try:
        import cudnn
    except Exception as exc:  # noqa: BLE001  (ImportError, or OSError from its library loader)
        raise MissingEnvironment(
            f"the cuDNN frontend is not usable ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}); "
            f"pip install {CUDNN_PACKAGE} (its nvidia-cutlass-dsl and apache-tvm-ffi dependencies are not needed)"
        ) from None
    return cudnn


def _loaded_library_dir(prefix: str) -> str | None:
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                path = line.rsplit(None, 1)[-1]
                if os.path.basename(path).startswith(prefix):
                    return os.path.dirname(path)
    except OSError:
        return None
    return None


class CudnnConv:
    """cuDNN's FP8 convolution forward (grouped and depthwise included): NHWC e4m3 input and weight,
    one float descale (x scale times w scale) and the bias applied in the epilogue, fp16 NHWC out."""

    def __init__(self, spec: LayerSpec, cudnn: Any, handle: Any) -> None:
        if spec.op != "conv" or len(spec.kernel) != 2:
            raise Unsupported("cuDNN conv_fprop: only 2-D convolutions")
        if spec.padding_mode != "zeros":
            raise Unsupported(f"cuDNN conv_fprop: padding mode {spec.padding_mode} is not a convolution padding")
        self.spec, self.cudnn, self.handle = spec, cudnn, handle
        self.channels_last = True
        self.path = "cuDNN conv_fprop (graph API), FP8 e4m3 in, fp16 out, NHWC"
        dt = cudnn.data_type
        n, c, h, w = spec.input_shape
        k, (r, s), cg = spec.out_channels, spec.kernel, spec.in_channels // spec.groups
        self.out_shape = spec.output_shape()
        _, _, ho, wo = self.out_shape
        try:
            g = cudnn.pygraph(io_data_type=dt.HALF, intermediate_data_type=dt.FLOAT, compute_data_type=dt.FLOAT,
                              handle=handle)
            self.x = g.tensor(name="x", dim=[n, c, h, w], stride=[c * h * w, 1, w * c, c], data_type=dt.FP8_E4M3)
            self.w = g.tensor(name="w", dim=[k, cg, r, s], stride=[cg * r * s, 1, s * cg, cg], data_type=dt.FP8_E4M3)
            y = g.conv_fprop(
                image=self.x, weight=self.w, padding=list(spec.padding), stride=list(spec.stride),
                dilation=list(spec.dilation), compute_data_type=dt.FLOAT,
            )
            self.descale = g.tensor(name="descale", dim=[1, 1, 1, 1], stride=[1, 1, 1, 1], data_type=dt.FLOAT)
            y = g.mul(a=y, b=self.descale, compute_data_type=dt.FLOAT)
            self.bias = None
            if spec.bias:
                self.bias = g.tensor(name="bias", dim=[1, k, 1, 1], stride=[k, 1, k, k], data_type=dt.HALF)
                y = g.add(a=y, b=self.bias, compute_data_type=dt.FLOAT)
            y.set_output(True).set_data_type(dt.HALF).set_dim([n, k, ho, wo]).set_stride([k * ho * wo, 1, wo * k, k])
            self.y = y
            g.build([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
            self.workspace = torch.empty(max(g.get_workspace_size(), 1), dtype=torch.uint8, device="cuda")
        except Exception as exc:  # noqa: BLE001  (cudnnGraphNotSupportedError and its cousins: a refusal)
            raise Unsupported(f"cuDNN conv_fprop: {one_line(exc)}") from None
        self.graph = g

    def prepare(self, weight: torch.Tensor, bias: torch.Tensor | None, x_scale: float) -> Prepared:
        w8, w_scale = _quantize_weight(weight, True)
        tensors = {"descale": torch.full((1, 1, 1, 1), x_scale * w_scale, dtype=torch.float32, device=weight.device)}
        if bias is not None:
            tensors["bias"] = bias.detach().to(torch.float16).reshape(1, -1, 1, 1).contiguous()
        return Prepared(w8, tensors)

    def __call__(self, x8: torch.Tensor, prepared: Prepared) -> torch.Tensor:
        out = torch.empty(self.out_shape, dtype=torch.float16, device=x8.device, memory_format=torch.channels_last)
        pack = {self.x: x8, self.w: prepared.weight, self.descale: prepared.tensors["descale"], self.y: out}
        if self.bias is not None:
            pack[self.bias] = prepared.tensors["bias"]
        self.cudnn.set_stream(self.handle, torch.cuda.current_stream().cuda_stream)
        self.graph.execute(pack, self.workspace, handle=self.handle)
        return out


@dataclass
class Choice:
    """The FP8 op that ran for a layer spec, or None; why each refused candidate refused."""

    op: Fp8Op | None
    refusals: list[str]


def candidates(spec: LayerSpec) -> list[str]:
    """FP8 paths to try, best first: GEMMs through cuBLASLt, other convolutions through cuDNN."""
    if spec.op == "linear":
        return ["gemm"]
    return ["gemm", "cudnn"] if spec.pointwise else ["cudnn"]


def choose(
    spec: LayerSpec,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    x_scale: float,
    x16: torch.Tensor,
    quantizer: Quantizer,
    cudnn: Any,
    handle: Any,
) -> Choice:
    """The first candidate that builds and runs on a real activation `x16`."""
    refusals = []
    for name in candidates(spec):
        try:
            op: Fp8Op = ScaledMmGemm(spec) if name == "gemm" else CudnnConv(spec, cudnn, handle)
            prepared = op.prepare(weight, bias, x_scale)
            inverse = torch.tensor(1.0 / x_scale, device=x16.device)
            op(quantizer.run(x16, inverse, op.channels_last), prepared)
            if x16.is_cuda:
                torch.cuda.synchronize()  # a kernel's asynchronous failure surfaces here, as a refusal
        except Unsupported as exc:
            refusals.append(str(exc))
            continue
        except Exception as exc:  # noqa: BLE001  (a run-time refusal: cuBLASLt or cuDNN status, shape checks)
            refusals.append(f"{name}: {type(exc).__name__}: {one_line(exc)}")
            continue
        return Choice(op, refusals)
    return Choice(None, refusals)


def one_line(exc: BaseException, limit: int = 400) -> str:
    """The message on one line (libraries spread theirs over several), at most `limit` characters:
    long ones keep their start and their end, where cuDNN states the reason."""
    text = " ".join(str(exc).split())
    if not text:
        return type(exc).__name__
    if len(text) <= limit:
        return text
    head = limit // 3
    return f"{text[:head]} ... {text[-(limit - head - 5):]}"
