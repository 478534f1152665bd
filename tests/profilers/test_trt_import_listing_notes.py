"""What an import read but could not use as written is said in a note: layer names given to several layers, layers
listed by name alone among detailed records, and tensor `Dimensions` that are not a shape.

Each file is a public set's (TF ResNet-50 fp16, TensorRT 8.4: 86 layers, names unique, every record detailed, every
Dimensions a list of whole numbers) with one change made here; the expected figures are read from the changed files
with plain `json`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from sessions.documents import storage
from tests.conftest import run_cli
from tests.trt_sets import SHARED

SET = SHARED / "trt" / "trt8.4-tf-resnet50-rtx3090-fp16"
GRAPH, PROFILE = "resnet.onnx.engine.graph.json", "resnet.onnx.engine.profile.json"
NOTES = ("layer names are each given to more than one layer", "listed by name alone among detailed records",
         "Dimensions are not a list of whole numbers")

pytestmark = pytest.mark.skipif(not SET.is_dir(), reason="needs ../shared/fixtures")


def _imported(tmp_path: Path, change: Callable[[dict, list], None]):
    """The session of the set's graph and profile after `change(graph, profile)`, and the changed graph."""
    graph, profile = (json.loads((SET / name).read_text()) for name in (GRAPH, PROFILE))
    change(graph, profile)
    for name, doc in ((GRAPH, graph), (PROFILE, profile)):
        (tmp_path / name).write_text(json.dumps(doc))
    out = tmp_path / "s.json"
    result = run_cli("import", "--layers", str(tmp_path / GRAPH), "--profile", str(tmp_path / PROFILE),
                     "--out", str(out))
    assert result.returncode == 0, result.stderr
    return storage.load(out).variants[0], graph


def _said(variant, words: str) -> list[str]:
    return [note for note in variant.notes if words in note]


def test_the_set_as_published_gets_none_of_these_notes(tmp_path):
    variant, _ = _imported(tmp_path, lambda graph, profile: None)
    assert len(variant.layers) == 86
    assert [words for words in NOTES if _said(variant, words)] == []


def test_a_name_given_to_two_layers_is_said_and_each_keeps_its_own_time(tmp_path):
    def rename(graph, profile):
        layers, records = graph["Layers"], [r for r in profile if "name" in r]
        layers[3]["Name"] = records[3]["name"] = layers[2]["Name"]
    variant, graph = _imported(tmp_path, rename)
    name = graph["Layers"][2]["Name"]
    assert _said(variant, NOTES[0]) and all(f"1 {NOTES[0]} (2 layers;" in n and name[:80] in n
                                            for n in _said(variant, NOTES[0]))
    records = [r for r in json.loads((tmp_path / PROFILE).read_text()) if r.get("name") == name]
    assert [layer.time_ms for layer in variant.layers if layer.name == name] == pytest.approx(
        [r["averageMs"] for r in records])


def test_a_layer_listed_by_name_alone_among_detailed_records_is_said(tmp_path):
    def bare(graph, profile):
        graph["Layers"][5] = graph["Layers"][5]["Name"]
    variant, graph = _imported(tmp_path, bare)
    assert _said(variant, f"1 of 86 layers are {NOTES[1]}")
    assert variant.layers[5].name == graph["Layers"][5] and variant.layers[5].kind == "unknown"


@pytest.mark.parametrize("dimensions", ["32x224x224x3", [32, 224.0, 224, 3], None, [32, "224", 224, 3]])
def test_dimensions_that_are_not_a_shape_are_said_and_give_none(tmp_path, dimensions):
    def unreadable(graph, profile):
        graph["Layers"][0]["Inputs"][0]["Dimensions"] = dimensions
    variant, _ = _imported(tmp_path, unreadable)
    assert _said(variant, f"1 tensors' {NOTES[2]}")
    assert variant.layers[0].inputs[0].shape is None and variant.layers[0].outputs[0].shape is not None
