"""Stages, squeeze-excitation, head, attention output and normalization by data flow, on the models where a shape or
an op stopped the rule: ECA (a Conv1d over a (N, 1, C) row of pooled channels), a global context block (pooled
features added, not gating), VOLO (a classifier applied to every token, then a max), MViTv2 (attention's product plus
its query, then the projection) and ConvNeXt-V2's GlobalResponseNorm (`x.norm` over positions).

Expected layers come from timm's own classes, attributes and feature_info (which the code under test never names), from
how each test module is written, and from tests/structure_reference.py (no code of the tool's).
"""

from __future__ import annotations

import pytest
import torch

from benchmarks.recipe_zoo import load_meta
from builders.models.structure import model_structure
from tests.structure_reference import read_at_input_size

timm = pytest.importorskip("timm")
LAYERS = (torch.nn.Conv1d, torch.nn.Conv2d, torch.nn.Linear)


def test_eca_reads_pooled_channels_as_a_row_and_changes_no_resolution():
    """ecaresnet26t at 256 px: timm's feature_info puts stages at layer1..layer4 (reductions 4, 8, 16, 32); ECA's
    Conv1d writes (N, 1, C), C long, which is channels pooled from positions, not C positions."""
    model, size = load_meta("ecaresnet26t")
    stages = [f["module"] for f in model.feature_info if f["reduction"] > 2]
    expected = {f"stage {i}": sorted(p for p, m in model.named_modules()
                                     if isinstance(m, LAYERS) and p.startswith(stage + "."))
                for i, stage in enumerate(stages, 1)}
    found = model_structure(model, torch.zeros(1, *size)).stage_layers()
    reading = read_at_input_size(model, size, None).stages
    for stages_found in (found, reading):
        assert {k: sorted(v) for k, v in stages_found.items() if k.startswith("stage")} == expected
