"""The source step of the TensorRT backend: one ONNX file per variant, never a PyTorch engine.

A PyTorch model becomes its variant module (builders.pytorch.variant_modules) exported to ONNX; an `.onnx`
model is used as it is.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from builders.pytorch.variant_modules import variant_module
from builders.tensorrt.onnx_export import export
from sessions.documents.errors import InputError
from sessions.documents.model import Recipe
from sessions.documents.plan import VariantPlan


@dataclass
class VariantOnnx:
    path: Path
    recipe: Recipe | None
    notes: list[str]


def variant_onnx(model, variant: VariantPlan, calibration: torch.Tensor, static_input: torch.Tensor,
                 folder: Path) -> VariantOnnx:
    if model.source == "onnx":
        if variant.precision == "fp8":
            raise InputError(f"{variant.name}: an .onnx model is built as it is; quantize it before (Q/DQ in the file)")
        return VariantOnnx(model.onnx_path, None, [f"built from {model.onnx_path}"])
    reference = model.module.float().eval()
    built = variant_module(reference, variant, calibration, torch.float16)
    example = static_input.to(device=next(built.module.parameters()).device, dtype=built.dtype)
    path = export(built.module, example, folder / f"{model.name}-{variant.name}.onnx")
    return VariantOnnx(path, built.recipe, built.notes)
