"""FP8 as the engine, the probe, the simulated variants and the ONNX files compute it, owned here once: the format
(e4m3, PyTorch's float8_e4m3fn, as TensorRT's FP8 and cuDNN's FP8 tensors), its largest finite value (quantizing
saturates to it), the scale rule (scale = amax / 448, refused for an amax that is not finite) and its floor (the
smallest normal fp16, which the simulated variants and the ONNX files apply), the weight quantize, and whether a GPU
has FP8 tensor cores."""

from __future__ import annotations

import math
from typing import TypeVar

import torch

from sessions.analyses.lowering import FP8_TENSOR_CORES

FP8 = torch.float8_e4m3fn
E4M3_MAX = 448.0  # largest finite float8_e4m3fn value
MIN_SCALE = 2.0**-14  # the floor of every scale: the smallest normal fp16 value (a scale an fp16 graph can hold)

Amax = TypeVar("Amax", float, torch.Tensor)


def amax_scale(amax: Amax) -> Amax:
    """The scale that maps `amax` (a float, or a tensor of per-channel amaxes) onto the largest e4m3 value."""
    return amax / E4M3_MAX


def scale_from_amax(amax: float) -> float:
    """Per-tensor scale (real value = fp8 value x scale); 1 where the tensor is all zeros or not finite."""
    if not math.isfinite(amax) or amax <= 0:
        return 1.0
    return amax_scale(amax)


def calibrated_scale(amax: Amax) -> Amax:
    """The scale of a calibrated `amax` (a float, or a tensor of per-channel amaxes) as the engine and the simulated
    variants take it: amax / E4M3_MAX, where an amax that is not positive or below E4M3_MAX x MIN_SCALE is first
    raised to E4M3_MAX x MIN_SCALE, so every scale is at least MIN_SCALE. ValueError (one line) where an amax is not
    finite: no scale holds it (a floored one would saturate the whole tensor). A float stays a Python float
    (computed as the engine computes an input scale), a tensor keeps its dtype."""
    floor = E4M3_MAX * MIN_SCALE
    if isinstance(amax, torch.Tensor):
        if not bool(torch.isfinite(amax).all()):
            raise ValueError(f"no FP8 scale for an amax that is not finite ({_first_non_finite(amax)})")
        return amax_scale(torch.where(amax >= floor, amax, torch.full_like(amax, floor)))
    if not math.isfinite(amax):
        raise ValueError(f"no FP8 scale for an amax that is not finite ({amax})")
    return amax_scale(max(amax, floor))


def _first_non_finite(amax: torch.Tensor) -> str:
    """The first value of `amax` that is not finite, with its index where `amax` holds more than one."""
    flat = amax.flatten()
    index = int((~torch.isfinite(flat)).nonzero()[0])
    return f"{flat[index].item()}" if flat.numel() == 1 else f"{flat[index].item()} at channel {index}"


def quantize_weight(weight: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """`weight` / `scale` (per output channel, broadcast along dim 0, or one) in e4m3, saturated, rounded once in
    the cast; in `weight`'s memory format."""
    return (weight.float() / scale).clamp(-E4M3_MAX, E4M3_MAX).to(FP8)


def capability_problem(capability: tuple[int, int] | None, gpu: str) -> str | None:
    """Why a GPU of compute `capability` cannot run FP8 tensor-core kernels (None: it can); `gpu` names it."""
    if capability is not None and tuple(capability) >= FP8_TENSOR_CORES:
        return None
    found = ".".join(str(c) for c in capability) if capability else "unknown"
    floor = ".".join(str(c) for c in FP8_TENSOR_CORES)
    return f"FP8 tensor cores need compute capability {floor} or newer; {gpu or 'this GPU'} has {found}"


def gpu_problem() -> str | None:
    """Why this process cannot run FP8 kernels on a GPU (none visible to PyTorch, or one without FP8), or None."""
    if not torch.cuda.is_available():
        return "running FP8 kernels needs a CUDA GPU; none is visible to PyTorch here"
    return capability_problem(tuple(torch.cuda.get_device_capability()), torch.cuda.get_device_name())
