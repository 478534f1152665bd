"""Quantized / total layers of every FP8 recipe on a zoo of models (CPU, random weights, no downloads).

    python benchmarks/recipe_zoo.py > tests/data/recipe_zoo.txt

A cell reads quantized/total (total: the model's layers of the recipe's op kinds); "refused" where
`trt-inspect run` refuses the recipe before any work, beside `all` (no such role, nothing, or the same
layers as `all`). tests/test_recipe_zoo.py holds the same figures as expectations.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from builders.fp8_recipes import (
    ROLES,
    check_selections,
    recipe_names,
    select,
)
from builders.model_structure import model_structure
from sessions.errors import InputError

ZOO = {
    "ResNet": "resnet18",
    "SE-ResNeXt": "seresnext26d_32x4d",
    "RegNetY": "regnety_002",
    "EfficientNet": "efficientnet_b0",
    "MobileNetV3": "mobilenetv3_small_050",
    "ConvNeXt": "convnext_atto",
    "ViT": "vit_tiny_patch16_224",
    "SENet": "senet154",
    "SegFormer-B0": "hf:segformer-b0",
    "SegFormer-B5": "hf:segformer-b5",
}


def zoo_row(model_name: str) -> tuple[dict[str, str], dict[str, int]]:
    """recipe -> "q/t" or "q/t refused", and role -> layers with that role."""
    import torch

    from builders.models import load_model

    torch.manual_seed(0)
    model = load_model(model_name)
    structure = model_structure(model.module, torch.zeros(1, *model.input_size))
    base = select(structure, "all", [])
    cells = {}
    for recipe in recipe_names():
        selection = select(structure, recipe, [])
        named = {"fp8-all": base} if recipe != "all" else {}
        try:
            check_selections(model_name, structure, {**named, f"fp8-{recipe}": selection})
            verdict = ""
        except InputError:
            verdict = " refused"
        cells[recipe] = f"{len(selection.quantized)}/{selection.total}{verdict}"
    return cells, {role: len(structure.paths(role=role)) for role in ROLES}


def main() -> None:
    recipes = recipe_names()
    header = ["family", "model", *recipes, *(f"#{role}" for role in ROLES)]
    rows = []
    for family, name in ZOO.items():
        cells, roles = zoo_row(name)
        rows.append([family, name, *(cells[r] for r in recipes), *(str(roles[r]) for r in ROLES)])
    widths = [max(len(str(row[i])) for row in [header, *rows]) for i in range(len(header))]
    for row in [header, ["-" * w for w in widths], *rows]:
        print("  ".join(str(cell).ljust(w) for cell, w in zip(row, widths)).rstrip())


if __name__ == "__main__":
    main()
