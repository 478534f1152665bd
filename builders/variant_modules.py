"""A PyTorch module per variant: the base precisions, and FP8 through NVIDIA ModelOpt.

The one source of variant modules: the PyTorch backend runs them, and the ONNX export that the
TensorRT backend builds from exports them. FP8 here is ModelOpt's simulated quantization (fake
quant: quantize, then dequantize, then run the layer in the base precision): its numerics are the
recipe's; its speed is not FP8 kernel speed.
"""

from __future__ import annotations

import contextlib
import copy
from dataclasses import dataclass, field

import torch

from builders.fp8_layouts import select_convolutions
from sessions.captions import SIMULATED_FP8
from sessions.errors import InputError, MissingEnvironment
from sessions.model import Recipe
from sessions.plan import VariantPlan

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
MIN_AMAX = 1e-6


@dataclass
class VariantModule:
    module: torch.nn.Module
    dtype: torch.dtype
    quantized: set[str] = field(default_factory=set)  # module paths running in FP8
    recipe: Recipe | None = None
    notes: list[str] = field(default_factory=list)


def precision_name(dtype: torch.dtype) -> str:
    return {v: k for k, v in DTYPES.items()}[dtype]


def variant_module(reference: torch.nn.Module, variant: VariantPlan, calibration: torch.Tensor, batch: int,
                   fp8_base: torch.dtype) -> VariantModule:
    """`reference` (fp32, eval) as `variant`; FP8 calibrates on `calibration` in chunks of `batch`."""
    if variant.precision == "fp32":
        return VariantModule(reference, torch.float32)
    if variant.precision in DTYPES:
        dtype = DTYPES[variant.precision]
        return VariantModule(copy.deepcopy(reference).to(dtype=dtype), dtype)
    return _fp8_module(reference, variant, calibration, batch, fp8_base)


def _fp8_module(reference: torch.nn.Module, variant: VariantPlan, calibration: torch.Tensor, batch: int,
                dtype: torch.dtype) -> VariantModule:
    try:
        import modelopt.torch.quantization as mtq
    except ImportError as exc:
        raise MissingEnvironment(f"FP8 variants need nvidia-modelopt: {exc}") from None
    module = copy.deepcopy(reference).to(dtype=dtype)
    selection = select_convolutions(module, variant.recipe or "all", list(variant.exclude))
    if not selection.quantized:
        raise InputError(f"{variant.name}: the recipe and exclusions leave no convolution to quantize")
    device = next(module.parameters()).device
    calib = calibration.to(device=device, dtype=dtype)

    def forward_loop(m: torch.nn.Module) -> None:
        with torch.no_grad():
            for i in range(0, calib.shape[0], batch):
                m(calib[i : i + batch])

    with contextlib.redirect_stdout(None):  # ModelOpt prints a summary line per call
        module = mtq.quantize(module, copy.deepcopy(mtq.FP8_DEFAULT_CFG), forward_loop=forward_loop)
    keep = set(selection.quantized)
    _disable_quantizers_outside(module, keep)
    zero_amax = _clamp_zero_amax(module, keep)
    recipe = Recipe(
        method=f"ModelOpt {mtq.__name__} quantize(FP8_DEFAULT_CFG), then quantizers outside the recipe disabled",
        number_format="fp8 e4m3 (simulated)",
        layout=variant.recipe,
        exclude_patterns=list(variant.exclude),
        quantized=selection.quantized,
        excluded=selection.excluded,
        scales="activations: static per-tensor, max calibration; weights: per-tensor (FP8_DEFAULT_CFG)",
        calibration_source="",  # filled in by the study, which owns the images
        calibration_count=int(calib.shape[0]),
    )
    notes = [SIMULATED_FP8, f"base precision {precision_name(dtype)}"]
    if zero_amax:
        notes.append(f"{zero_amax} quantizers saw only zeros in calibration; their amax was raised to {MIN_AMAX:g}")
    return VariantModule(module, dtype, keep, recipe, notes)


def _disable_quantizers_outside(module: torch.nn.Module, keep: set[str]) -> None:
    for path, sub in module.named_modules():
        if path in keep:
            continue
        for attr in ("input_quantizer", "weight_quantizer", "output_quantizer"):
            quantizer = getattr(sub, attr, None)
            if quantizer is not None and hasattr(quantizer, "disable"):
                quantizer.disable()


def _clamp_zero_amax(module: torch.nn.Module, keep: set[str]) -> int:
    """Quantizers that saw only zeros get a tiny amax: a zero scale breaks ONNX export and TensorRT."""
    clamped = 0
    for path, sub in module.named_modules():
        if path not in keep:
            continue
        for attr in ("input_quantizer", "weight_quantizer"):
            amax = getattr(getattr(sub, attr, None), "amax", None)
            if torch.is_tensor(amax) and not bool(torch.all(torch.isfinite(amax) & (amax > 0))):
                amax.data = torch.where(torch.isfinite(amax) & (amax > 0), amax, torch.full_like(amax, MIN_AMAX))
                clamped += 1
    return clamped


def state_bytes(module: torch.nn.Module) -> int:
    return sum(t.numel() * t.element_size() for t in module.state_dict().values() if torch.is_tensor(t))
