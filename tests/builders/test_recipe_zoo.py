"""Stem, stages, head, roles and recipe counts on the zoo's CI families (meta device, no weights), against an
independent reading of each model (tests/structure_reference.py: the autograd graph and module outputs,
none of the tool's code), and the committed table (tests/data/recipe_zoo.txt, which docs/recipes.md quotes)
against what the tool finds now.
"""

from __future__ import annotations

import pytest
import torch

from benchmarks.recipe_zoo import COLUMNS, ZOO, describe, load_meta, tool_row
from builders.models.structure import model_structure
from builders.recipes.fp8 import select
from tests.conftest import TESTS
from tests.structure_reference import Reading, hf_head_roots, read_at_input_size

TABLE = TESTS / "data" / "recipe_zoo.txt"
CI_MODELS = [name for name, in_ci in ZOO.values() if in_ci]


def _expected_counts(reading: Reading, module: torch.nn.Module) -> dict[str, int]:
    """Quantized layers per recipe, from the independent reading, kernel sizes and the recipes' definitions."""
    stem, head = set(reading.stages.get("stem", [])), set(reading.stages.get("head", []))
    first = set(reading.stages.get("stage 1", []))
    layers = [p for paths in reading.stages.values() for p in paths]
    body = [p for p in layers if p not in stem and p not in head]
    no_se = [p for p in body if p not in reading.squeeze_excitation]
    linears = [p for p in body if p in reading.linears and p not in reading.attention_output]
    one_by_one = [p for p in body if getattr(module.get_submodule(p), "kernel_size", None) in ((1, 1), (1,))]
    return {"all": len(body), "no-se": len(no_se), "no-se-no-first-stage": len([p for p in no_se if p not in first]),
            "pointwise": len(one_by_one), "encoder-linears": len(linears)}


def _table_rows() -> dict[str, list[str]]:
    rows = {}
    for line in TABLE.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == len(COLUMNS) and cells[1] != "model" and not set(cells[1]) <= {"-"}:
            rows[cells[1]] = cells
    return rows


def test_the_zoo_covers_the_families_the_structure_rules_must_hold_on():
    families = {family for family, (_, in_ci) in ZOO.items() if in_ci}
    assert len(families) >= 12
    assert {"DenseNet", "DPN", "Inception", "MixNet", "DLA", "SENet", "RegNetY", "MobileNetV3", "EfficientNet",
            "ViT", "Swin", "ResNet"} <= families


@pytest.mark.parametrize("name", CI_MODELS)
def test_structure_matches_an_independent_reading(name):
    module, input_size = load_meta(name)
    reading = read_at_input_size(module, input_size, hf_head_roots(module))
    structure = model_structure(module, torch.zeros(1, *input_size))

    assert structure.stage_layers() == reading.stages
    assert sorted(structure.paths(role="squeeze-excitation")) == sorted(reading.squeeze_excitation)
    assert sorted(structure.paths(role="attention-output")) == sorted(reading.attention_output)
    assert structure.paths(role="first-stage") == reading.stages.get("stage 1", [])
    expected = _expected_counts(reading, module)
    assert {recipe: len(select(structure, recipe, []).quantized) for recipe in expected} == expected

    row = tool_row(name, structure)  # the committed table says what the tool finds now
    saved = _table_rows()[name]
    assert saved[2:5] == [describe(reading.stages), str(len(reading.squeeze_excitation)),
                          str(len(reading.attention_output))]
    assert saved[5:5 + len(row.recipes)] == list(row.recipes.values())
    assert saved[-2:] == ["same", "yes"]
