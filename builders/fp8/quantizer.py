"""The activation quantize an FP8 engine runs in front of a layer, the engine's and the FP8 probe's alike: `quantize`,
ONNX's QuantizeLinear to e4m3 in eager PyTorch, and `make_quantizer`, the Triton kernel (`builders.fp8.quantize`)
where it gives the eager kernels' values on the GPU, else those eager kernels, saying why."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from builders.fp8.format import E4M3_MAX, FP8
from sessions.documents.errors import joined_message


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
    drawn = torch.Generator().manual_seed(0)  # the same samples in every process, whatever drew before
    wide = (torch.randn(2, 24, 5, 3, generator=drawn) * 300).to(device=device, dtype=torch.float16)
    wide[0, 0, 0, :3] = torch.tensor([float("nan"), float("inf"), -float("inf")])
    wide[1, 0, 0, :2] = torch.tensor([136.5, -178.75])  # x * 1.7 rounded to fp16 first lands on another e4m3 value
    small = torch.linspace(-0.02, 0.02, 2 * 8 * 4 * 4, device=device, dtype=torch.float16).reshape(2, 8, 4, 4)
    ties = torch.tensor([2.125, -2.375, 17.0, 9.5], device=device, dtype=torch.float16).reshape(1, 4, 1, 1)
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
            refused.append(f"{tuple(x.shape)}: {type(exc).__name__}: {joined_message(exc, 200)}")
            return quantize(x, inverse_scale, channels_last)

    return run
