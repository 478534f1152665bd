"""Stem, stages, head, roles and FP8 recipe counts on a zoo of model families (meta device, no weights, no downloads).

    python benchmarks/recipe_zoo.py > tests/data/recipe_zoo.txt

Per model: layers (convolutions and linears) in the stem, in each stage and in the head; layers with the
squeeze-excitation and attention-output roles; each recipe's quantized/total layers of its op kinds
("refused" where `trt-inspect run` refuses it beside `all`: no such role, nothing selected, or the layers
of `all`). "checked" says whether an independent reading of the same model (tests/structure_reference.py:
the autograd graph, not the tool's code) finds the same layers in every stem, stage, head and role; "CI"
marks the families tests/builders/test_recipe_zoo.py checks on every run.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from builders.models.structure import ModelStructure, model_structure
from builders.recipes.fp8 import check_selections, recipe_names, select
from sessions.documents.errors import InputError

# family -> (model, checked in CI)
ZOO: dict[str, tuple[str, bool]] = {
    "ResNet": ("resnet18", True),
    "SENet": ("legacy_seresnet18", True),
    "RegNetY": ("regnety_002", True),
    "MobileNetV3": ("mobilenetv3_small_050", True),
    "EfficientNet": ("efficientnet_b0", True),
    "MixNet": ("mixnet_s", True),
    "DenseNet": ("densenet121", True),
    "DPN": ("dpn68", True),
    "Inception": ("inception_v3", True),
    "DLA": ("dla34", True),
    "ConvNeXt": ("convnext_atto", True),
    "ViT": ("vit_tiny_patch16_224", True),
    "Swin": ("swin_tiny_patch4_window7_224", True),
    "PVT-v2": ("pvt_v2_b0", True),
    "VGG": ("vgg11", True),
    "CaiT": ("cait_xxs24_224", True),
    "GhostNetV2": ("ghostnetv2_100", True),
    "EfficientViT-MIT": ("efficientvit_b0", True),
    "RepVGG": ("repvgg_a0", True),
    "SKNet": ("skresnet18", True),
    "ECA-ResNet": ("ecaresnet26t", True),
    "CoaT": ("coat_lite_tiny", True),
    "SelecSLS": ("selecsls42b", True),
    "Visformer": ("visformer_tiny", True),
    "CoAtNet": ("coatnet_nano_rw_224", True),
    "SE-ResNeXt": ("seresnext26d_32x4d", False),
    "SENet-154": ("senet154", False),
    "SegFormer-B0": ("hf:segformer-b0", False),
    "SegFormer-B5": ("hf:segformer-b5", False),
}
COLUMNS = ["family", "model", "stem / stages / head", "SE", "attn-out", *recipe_names(), "checked", "CI"]


@dataclass
class ZooRow:
    shape: str  # "stem / layers per stage / head"
    squeeze_excitation: int
    attention_output: int
    recipes: dict[str, str]  # recipe -> "quantized/total", with " refused" where run refuses it


def describe(stages: dict[str, list[str]]) -> str:
    """'1 / 4+5+5+5 / 1': layers in the stem, in each stage in order, in the head."""
    inner = [len(v) for k, v in stages.items() if k not in ("stem", "head")]
    return f"{len(stages.get('stem', []))} / {'+'.join(map(str, inner)) or '0'} / {len(stages.get('head', []))}"


def tool_row(model_name: str, structure: ModelStructure) -> ZooRow:
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
    return ZooRow(describe(structure.stage_layers()), len(structure.paths(role="squeeze-excitation")),
                  len(structure.paths(role="attention-output")), cells)


def load_meta(model_name: str):
    """The model on the meta device, as the study loads it, and its input size."""
    import torch

    from builders.models.catalog import load_model

    with torch.device("meta"):
        model = load_model(model_name)
    return model.module, tuple(model.input_size)


def agrees(module, input_size: tuple[int, ...], structure: ModelStructure) -> bool:
    """Whether the independent reading finds the tool's stem, stages, head and roles, layer by layer."""
    from tests.structure_reference import hf_head_roots, read_at_input_size

    reading = read_at_input_size(module, input_size, hf_head_roots(module))
    return (reading.stages == structure.stage_layers()
            and sorted(reading.squeeze_excitation) == sorted(structure.paths(role="squeeze-excitation"))
            and sorted(reading.attention_output) == sorted(structure.paths(role="attention-output")))


def main() -> None:
    import torch

    rows = []
    for family, (name, in_ci) in ZOO.items():
        module, input_size = load_meta(name)
        structure = model_structure(module, torch.zeros(1, *input_size))
        row = tool_row(name, structure)
        checked = "same" if agrees(module, input_size, structure) else "DIFFERS"
        rows.append([family, name, row.shape, str(row.squeeze_excitation), str(row.attention_output),
                     *row.recipes.values(), checked, "yes" if in_ci else "no"])
    print("| " + " | ".join(COLUMNS) + " |")
    print("|" + "---|" * len(COLUMNS))
    for row in rows:
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
