"""What an import read but could not use as written is said in a note: layer names given to several layers, layers
listed by name alone among detailed records, and tensor `Dimensions` that are not a shape.

Each file is a public set's (TF ResNet-50 fp16, TensorRT 8.4: 86 layers, names unique, every record detailed, every
Dimensions a list of whole numbers) with one change made here; the expected figures are read from the changed files
with plain `json`.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from sessions.documents import storage
from tests.conftest import run_cli
from tests.trt_sets import SHARED

SET = SHARED / "trt" / "trt8.4-tf-resnet50-rtx3090-fp16"
GRAPH, PROFILE = "resnet.onnx.engine.graph.json", "resnet.onnx.engine.profile.json"
REPEATED, BARE, UNREAD = ("layer names given to more than one layer", "layers listed by name alone among detailed",
                          "tensors whose Dimensions are not a list of whole numbers")

pytestmark = pytest.mark.skipif(not SET.is_dir(), reason="needs ../shared/fixtures")


def _imported(tmp_path: Path, change: Callable[[dict, list], None], profiled: bool = True):
    """The session's variant of the set's graph (and profile) after `change(graph, profile)`, and the changed graph
    and profile records."""
    graph, profile = (json.loads((SET / name).read_text()) for name in (GRAPH, PROFILE))
    change(graph, profile)
    for name, doc in ((GRAPH, graph), (PROFILE, profile)):
        (tmp_path / name).write_text(json.dumps(doc))
    out = tmp_path / "s.json"
    given = ["--profile", str(tmp_path / PROFILE)] if profiled else []
    result = run_cli("import", "--layers", str(tmp_path / GRAPH), *given, "--out", str(out))
    assert result.returncode == 0, result.stderr
    return storage.load(out).variants[0], graph, [r for r in profile if "name" in r]


def _said(variant, words: str) -> list[str]:
    return [note for note in variant.notes if words in note]


def _tensors(record: dict):
    return [t for key in ("Inputs", "Outputs") for t in record.get(key) or []]


def test_the_set_as_published_gets_none_of_these_notes(tmp_path):
    variant, _, _ = _imported(tmp_path, lambda graph, profile: None)
    assert len(variant.layers) == 86
    assert [words for words in (REPEATED, BARE, UNREAD) if _said(variant, words)] == []


def _rename(graph, profile, swap: bool = True):
    """Layer 3 and its record take layer 2's name; with `swap`, two later records change places, so that the profile
    no longer pairs by position but by name."""
    layers, records = graph["Layers"], [r for r in profile if "name" in r]
    layers[3]["Name"] = records[3]["name"] = layers[2]["Name"]
    if swap:
        first, second = profile.index(records[10]), profile.index(records[11])
        profile[first], profile[second] = profile[second], profile[first]


def test_a_name_given_to_two_layers_is_said_and_its_records_pair_in_order(tmp_path):
    variant, graph, records = _imported(tmp_path, _rename)
    name = graph["Layers"][2]["Name"]
    assert _said(variant, "profile paired by name")  # the premise: the by-name pairing, not the positional one
    said = _said(variant, REPEATED)
    assert len(said) == 1 and ": 1 names, 2 layers: " in said[0] and "paired with them in order" in said[0]
    times = {r["name"]: r["averageMs"] for r in records if r["name"] != name}
    assert [layer.time_ms for layer in variant.layers if layer.name == name] == pytest.approx(
        [r["averageMs"] for r in records if r["name"] == name])  # in the files' order
    assert all(layer.time_ms == pytest.approx(times[layer.name]) for layer in variant.layers if layer.name != name)


def test_without_a_profile_the_repeated_names_note_says_nothing_of_pairing(tmp_path):
    variant, _, _ = _imported(tmp_path, lambda graph, profile: _rename(graph, profile, swap=False), profiled=False)
    said = _said(variant, REPEATED)
    assert len(said) == 1 and "paired" not in said[0]


def test_a_layer_listed_by_name_alone_among_detailed_records_is_said(tmp_path):
    def bare(graph, profile):
        graph["Layers"][5] = graph["Layers"][5]["Name"]
    variant, graph, _ = _imported(tmp_path, bare)
    assert [note.rpartition(": ")[2] for note in _said(variant, BARE)] == ["1 of 86"]
    assert variant.layers[5].name == graph["Layers"][5] and variant.layers[5].kind == "unknown"


@pytest.mark.parametrize("dimensions", ["32x224x224x3", [32, 224.0, 224, 3], None, [32, "224", 224, 3]])
def test_dimensions_that_are_not_a_shape_are_said_and_give_none(tmp_path, dimensions):
    def unreadable(graph, profile):
        graph["Layers"][0]["Inputs"][0]["Dimensions"] = dimensions
    variant, _, _ = _imported(tmp_path, unreadable)
    assert [note.rpartition(": ")[2] for note in _said(variant, UNREAD)] == ["1"]
    assert variant.layers[0].inputs[0].shape is None and variant.layers[0].outputs[0].shape is not None


def test_a_tensor_between_two_layers_counts_once(tmp_path):
    """A tensor is listed by the layer writing it and again by each layer reading it."""
    def unreadable(graph, profile):
        name = graph["Layers"][0]["Outputs"][0]["Name"]
        for layer in graph["Layers"]:
            for tensor in _tensors(layer):
                if tensor["Name"] == name:
                    tensor["Dimensions"] = "1x64x112x112"
    variant, graph, _ = _imported(tmp_path, unreadable)
    name = graph["Layers"][0]["Outputs"][0]["Name"]
    listed = [t for layer in graph["Layers"] for t in _tensors(layer) if t["Name"] == name]
    assert len(listed) >= 2  # the premise: written by one layer, read by another
    assert [note.rpartition(": ")[2] for note in _said(variant, UNREAD)] == ["1"]
    assert all(t.shape is None for layer in variant.layers for t in [*layer.inputs, *layer.outputs] if t.name == name)


VERBOSE = Path(__file__).resolve().parents[1] / "data" / "trt_text" / "trt8-verbose-bracketed-tensors.log"
LAYER_LINES = "Layer(...) lines naming a layer an earlier line named in"


def _verbose_layers(folder: Path, text: str):
    folder.mkdir()
    log = folder / "verbose.log"
    log.write_text(text)
    out = folder / "v.json"
    result = run_cli("import", "--layers", str(log), "--out", str(out))
    assert result.returncode == 0, result.stderr
    return storage.load(out).variants[0]


def test_a_verbose_logs_layer_line_repeated_is_left_out_and_said(tmp_path):
    """A verbose log's `Layer(...)` lines as the layers: a line naming a layer again is counted, the first kept."""
    text = VERBOSE.read_text()
    lines = text.splitlines(keepends=True)
    layer_lines = [i for i, line in enumerate(lines) if line.startswith("Layer(")]
    as_given = _verbose_layers(tmp_path / "as-given", text)
    assert len(as_given.layers) == len(layer_lines) and not _said(as_given, LAYER_LINES)
    second = lines[layer_lines[1]]
    repeated = "".join([*lines[:layer_lines[-1] + 1], second, *lines[layer_lines[-1] + 1:]])
    variant = _verbose_layers(tmp_path / "repeated", repeated)
    assert [note.rpartition(": ")[2] for note in _said(variant, LAYER_LINES)] == ["1"]
    assert [layer.name for layer in variant.layers] == [layer.name for layer in as_given.layers]


NAMES_ONLY = SHARED / "trt" / "trt8.5-yolo-int8-qat-orin-namesonly"  # names-only layers, typed from trt.out's lines


@pytest.mark.skipif(not NAMES_ONLY.is_dir(), reason="needs ../shared/fixtures")
def test_a_repeated_layer_line_of_the_log_that_types_names_only_layers_is_said(tmp_path):
    """The log's `Layer(...)` lines give a names-only file's layers their types: a line naming a layer again is not
    read (the first is), and the note counts it."""
    def imported(folder: Path, log: str):
        shutil.copytree(NAMES_ONLY, folder)
        (folder / "trt.out").write_text(log)
        out = folder / "s.json"
        result = run_cli("import", str(folder), "--out", str(out))
        assert result.returncode == 0, result.stderr
        return storage.load(out).variants[0]
    text = (NAMES_ONLY / "trt.out").read_text()
    lines = text.splitlines(keepends=True)
    layer_lines = [i for i, line in enumerate(lines) if line.lstrip().startswith("Layer(")]
    as_given = imported(tmp_path / "as-given", text)
    assert _said(as_given, "86 of 86 layers from the log trt.out") and not _said(as_given, "an earlier line named")
    again = re.sub(r"Layer\(\w+\)", "Layer(Shuffle)", lines[layer_lines[0]], count=1)  # another type, not read
    assert again != lines[layer_lines[0]]
    repeated = "".join([*lines[:layer_lines[-1] + 1], again, *lines[layer_lines[-1] + 1:]])
    variant = imported(tmp_path / "repeated", repeated)
    assert [note.rpartition(": ")[2] for note in _said(variant, "an earlier line named in trt.out")] == ["1"]
    assert [(layer.name, layer.kind) for layer in variant.layers] == [(layer.name, layer.kind)
                                                                     for layer in as_given.layers]
