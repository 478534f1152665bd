"""TensorRT file kinds read from text: `--dumpLayerInfo` and verbose layer blocks, `--dumpProfile` tables
(7.x, 8.x and 8.6+/10.x layouts), the performance summary; profiles that do not pair one-to-one.

Expected figures come from plain regular expressions over the files (or are written out by hand for the
hand-written fixtures of tests/data/trt_text), never from the importer's code. Real files are read from
../shared/fixtures and skipped, with the reason, only where ../shared is not beside the checkout.
"""

from __future__ import annotations

import json
import re
import shutil
from collections import Counter
from pathlib import Path

import pytest

from profilers.trt_import.folder import files_of_folder
from profilers.trt_import.importer import ImportFiles, import_variant, new_session
from profilers.trt_import.summary import summary_of_log
from profilers.trt_import.text_layers import read_text_layers
from profilers.trt_import.text_profile import parse_text_profile
from sessions.documents.errors import InputError
from tests.conftest import TESTS
from tests.trt_sets import SHARED

TEXT = TESTS / "data" / "trt_text"
TRT10 = TEXT / "trt10-dumplayerinfo-dumpprofile.log"
TRT7 = TEXT / "trt7-dumpprofile.log"
MNIST = [SHARED / "trt" / name / "result-04.log"
         for name in ("trt10.16-mnist-cnn-fp32-h100", "trt10.14-mnist-cnn-fp32-rtx6000ada")]
YOLO = SHARED / "trt" / "trt8.5-yolo-int8-qat-orin-namesonly"


def _shared(path: Path) -> Path:
    if not path.exists():
        pytest.skip(f"{path} is missing: ../shared/fixtures is not beside the checkout")
    return path


@pytest.mark.parametrize("log", MNIST, ids=lambda p: p.parent.name)
def test_dumplayerinfo_text_gives_each_layer_its_type_tactic_and_kernel(log: Path) -> None:
    text = _shared(log).read_text()
    rows = re.findall(r"^Name: (.*?), LayerType: (\w+),", text, re.MULTILINE)
    tactics = re.findall(r"TacticName: ([^,]+),", text)
    kernels = [json.loads(k) for k in re.findall(r"Kernel: (\[[\d,]+\])", text)]
    info = read_text_layers(log)
    assert [(layer.name, layer.kind) for layer in info.layers] == rows and len(rows) == 9
    assert [layer.tactic for layer in info.layers if layer.tactic and not layer.tactic.startswith("0x")] == tactics
    assert [layer.kernel_shape for layer in info.layers if layer.kernel_shape] == kernels
    assert info.io_tensors == ["x", "y", "z"] and {layer.precision for layer in info.layers} <= {"fp32", "int32"}
    assert info.layers[0].onnx_nodes == ["node_conv2d", "node_relu"]  # Metadata joined by U+001E, not two lines


def test_verbose_layer_lines_give_the_types_the_source_lists() -> None:
    info = read_text_layers(_shared(YOLO / "trt.out"))
    types = Counter(layer.kind for layer in info.layers)
    # SOURCE.md of the set: 43 CaskConvolution, 18 Reformat, 9 Constant, 3 Scale, 3 TrainStation, 2 Myelin
    assert (types["CaskConvolution"], types["Reformat"], types["Constant"], types["Scale"], types["TrainStation"],
            types["Myelin"]) == (43, 18, 9, 3, 3, 2) and len(info.layers) == 86
    assert info.io_tensors[0] == "input" and info.layers[1].inputs[0].shape == [1, 3, 2208, 3872]


def test_the_8x_table_agrees_with_the_total_row_and_with_export_profile() -> None:
    log = _shared(YOLO / "trt.out")
    text = log.read_text()
    total_row = re.search(r"\] +Total +([\d.]+) ", text)
    assert total_row is not None
    total = float(total_row.group(1))
    exported = {r["name"]: r["averageMs"] for r in json.loads((YOLO / "profile.json").read_text()) if "name" in r}
    found = parse_text_profile(text, str(log))
    assert found.profile.count == 11 and found.total_ms == total
    assert abs(sum(r.total_ms for r in found.profile.records) - total) < 0.1
    assert len(found.profile.records) == sum(1 for v in exported.values() if v > 0) == 77
    # the table rounds to 4 places
    assert all(abs(r.average_ms - exported[r.name]) < 2e-4 for r in found.profile.records)


def test_a_layer_the_table_leaves_out_is_zero_and_listed_never_a_refusal() -> None:
    imported = import_variant(ImportFiles.of(layers=_shared(YOLO / "layer_info.json"), profile=YOLO / "trt.out",
                                             find_metadata=False))
    variant = imported.variant
    logged = re.findall(r"^Layer\(Constant\): (.*?), Tactic", (YOLO / "trt.out").read_text(), re.MULTILINE)
    assert len(logged) == 9
    assert [layer.name for layer in variant.layers if layer.time_ms == 0.0] == logged
    assert abs(sum(layer.time_ms or 0 for layer in variant.layers) - 4441.97 / 11) < 0.01
    assert any(note.startswith("9 layers have no row") for note in variant.notes)
    assert variant.precision == "int8"  # the log given as the profile also gives its Layer(...) types


def test_the_10x_layout_and_its_summary_read_as_written_by_hand() -> None:
    imported = import_variant(ImportFiles.of(layers=TRT10, profile=TRT10))
    session = new_session(imported, ["import"])
    layers = imported.variant.layers
    assert [(layer.op, layer.precision, layer.time_ms, layer.attrs["median_ms"]) for layer in layers] == [
        ("reformat", "fp32", 0.01, 0.0098), ("conv", "fp16", 0.025, 0.0248), ("pooling", "fp16", 0.008, 0.0079),
        ("linear", "fp16", 0.007, 0.0069)]
    assert imported.variant.precision == "fp16" and imported.batch == 2
    assert imported.facts.gpu_compute_median_ms == 0.041
    gpu = session.environment.gpu
    assert session.environment.versions == {"tensorrt": "10.16.0"} and gpu is not None and gpu.sm_clock_mhz == 1980
    assert session.study.engine_options == {"Precision": "FP32+FP16"} and "--dumpProfile" in session.method.per_layer
    latency = imported.variant.latency
    assert latency is not None and latency.median_ms == 0.041 and latency.samples_ms == []
    assert "performance summary" in session.method.timed_region


def test_the_7x_layout_and_its_summary_read_as_written_by_hand() -> None:
    text = TRT7.read_text()
    found = parse_text_profile(text, str(TRT7))
    assert [(r.name, r.total_ms, r.average_ms, r.median_ms, r.percentage) for r in found.profile.records] == [
        ("conv1 + relu1", 300.0, 0.6, None, 60.0), ("pool1", 100.0, 0.2, None, 20.0), ("fc1", 100.0, 0.2, None, 20.0)]
    summary = summary_of_log(text, TRT7.name)
    assert summary is not None and summary.host_latency is not None
    assert summary.gpu_compute.median_ms == 1.09 and summary.gpu_compute.percentiles_ms == {"99": 1.7}
    assert summary.host_latency.min_ms == 1.2 and summary.throughput_qps == 740.0


def test_a_table_whose_rows_miss_its_total_is_refused(tmp_path: Path) -> None:
    cut = tmp_path / "cut.log"
    cut.write_text(re.sub(r"^.*\] +50\.00 .*\n", "", TRT10.read_text(), flags=re.MULTILINE))
    with pytest.raises(InputError, match="Total row says 100.00 ms"):
        parse_text_profile(cut.read_text(), str(cut))


def _engine(tmp_path: Path, layers: list[str], records: list[str]) -> ImportFiles:
    (tmp_path / "e.graph.json").write_text(json.dumps({"Layers": layers}))
    profile = [{"count": 10}, *({"name": n, "timeMs": 10.0, "averageMs": 1.0} for n in records)]
    (tmp_path / "e.profile.json").write_text(json.dumps(profile))
    return ImportFiles.of(layers=tmp_path / "e.graph.json", profile=tmp_path / "e.profile.json", find_metadata=False)


def test_myelin_regions_split_at_run_time_are_listed_not_joined(tmp_path: Path) -> None:
    layers = [f"/block{i}/Conv" for i in range(20)] + ["{ForeignNode[/head/MatMul.../head/Softmax]}"]
    records = [f"/block{i}/Conv" for i in range(20)] + ["__myl_MatMulAdd_myl3_0", "__myl_Softmax_myl3_1"]
    variant = import_variant(_engine(tmp_path, layers, records)).variant
    assert variant.layers[-1].time_ms is None and sum(layer.time_ms or 0 for layer in variant.layers) == 20.0
    notes = " | ".join(variant.notes)
    assert "'{ForeignNode[/head/MatMul.../head/Softmax]}'" in notes
    assert "2 ms per inference left out" in notes and "'__myl_MatMulAdd_myl3_0', '__myl_Softmax_myl3_1'" in notes


def test_a_profile_mostly_of_other_names_is_refused(tmp_path: Path) -> None:
    layers = [f"/block{i}/Conv" for i in range(10)]
    records = layers[:5] + [f"__myl_region_{i}" for i in range(10)]
    with pytest.raises(InputError, match="does not pair"):
        import_variant(_engine(tmp_path, layers, records))


def test_a_folder_of_one_log_imports_its_layers_and_table(tmp_path: Path) -> None:
    shutil.copy(TRT10, tmp_path / "tiny.log")
    (tmp_path / "notes.txt").write_text("not a TensorRT file\n")
    found = files_of_folder(tmp_path)
    (engine,) = found.engines
    assert engine.files.one("layers") == engine.files.one("profile") == tmp_path / "tiny.log"
    assert engine.taken == ["tiny.log (layers; profile; run facts and performance summary)"]
    assert found.left == ["notes.txt (not a TensorRT file this tool reads)"]


def test_a_log_beside_json_files_gives_only_its_facts() -> None:
    (engine,) = files_of_folder(_shared(YOLO)).engines
    assert (engine.files.one("layers"), engine.files.one("profile"), engine.files.every("metadata")) == (
        YOLO / "layer_info.json", YOLO / "profile.json", [YOLO / "trt.out"])
