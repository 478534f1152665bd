"""Importing the real TensorRT files of ../shared/fixtures, and every way such files can be off."""

import copy
import json

import orjson
import pytest

from profilers.trt_import.importer import ImportFiles, import_variant
from profilers.trt_import.layer_info import normalize_name, parse_layer_info
from profilers.trt_import.profile import pair_profile, parse_profile
from profilers.trt_import.times import parse_times
from sessions.analyses.groups import load_rules, role_of
from sessions.documents import storage
from sessions.documents.errors import InputError
from tests.conftest import fixture_dir, run_cli

CASES = {
    # folder: (layer file, profile file, layers, precision)
    "trt8-resnet-a100-fp16": ("resnet.onnx.engine.graph.json", "resnet.onnx.engine.profile.json", 36, "fp16"),
    "trt8-resnet-a100-int8-qat": ("resnet-qat.onnx.engine.graph.json", "resnet-qat.onnx.engine.profile.json", 37,
                                  "int8"),
    "trt8.4-mobilenetv2-int8-qat": ("mobilenet.qat.onnx.engine.graph.json", "mobilenet.qat.onnx.engine.profile.json",
                                    73, "int8"),
    "trt10-mobilenetv2-fp16-trtexec": ("mobilenet_v2_fp16.graph.json", "mobilenet_v2_fp16.profile.json", 57, "fp16"),
    "trt10-resnet18-fp16-api": ("trt_engine_info.json", None, 26, "fp16"),
}


@pytest.mark.parametrize("folder", CASES)
def test_every_fixture_imports(folder):
    layers_file, profile_file, count, precision = CASES[folder]
    base = fixture_dir(folder)
    files = ImportFiles.of(layers=base / layers_file, profile=base / profile_file if profile_file else None)
    imported = import_variant(files, folder)
    variant, dims = imported.variant, [imported.batch, *imported.input_shape]
    assert len(variant.layers) == count
    assert variant.precision == precision
    assert dims and dims[1] == 3
    if profile_file:
        assert all(layer.time_ms is not None for layer in variant.layers)
        assert any("paired by position" in note for note in variant.notes)
        total_pct = sum(layer.attrs.get("percentage", 0) for layer in variant.layers)
        assert total_pct == pytest.approx(100, abs=0.5)


def roles(folder):
    layers_file, _, _, _ = CASES[folder]
    info = parse_layer_info(json.loads((fixture_dir(folder) / layers_file).read_text()), folder)
    rules = load_rules()
    from collections import Counter

    return Counter(role_of(layer, rules) for layer in info.layers)


def test_group_counts_of_the_fixtures():
    mobilenet_qat = roles("trt8.4-mobilenetv2-int8-qat")
    assert mobilenet_qat["depthwise convolution"] == 17  # CudaDepthwiseConvolution layers
    assert mobilenet_qat["quantize / dequantize"] == 17  # Reformat layers of origin QDQ
    assert mobilenet_qat["reformat"] == 1
    resnet_qat = roles("trt8-resnet-a100-int8-qat")
    assert resnet_qat["quantize / dequantize"] == 10  # Reformat layers of origin QDQ
    assert resnet_qat["reformat"] == 2
    trt10 = roles("trt10-mobilenetv2-fp16-trtexec")
    assert trt10["depthwise convolution"] == 17
    assert trt10["synchronisation / no-op"] == 2  # the shape_call and a NoOp; the Myelin gemm is a GEMM
    assert trt10["GEMM / linear"] == 1


def test_times_give_latency_statistics():
    base = fixture_dir("trt10-mobilenetv2-fp16-trtexec")
    compute, latency = parse_times(json.loads((base / "mobilenet_v2_fp16.timing.json").read_text()), "t")
    assert len(compute) == len(latency) > 1000
    files = ImportFiles.of(layers=base / "mobilenet_v2_fp16.graph.json", times=base / "mobilenet_v2_fp16.timing.json")
    variant = import_variant(files, "mnv2").variant
    assert 0.2 < variant.latency.median_ms < 0.3


def test_separators_and_profile_suffixes_are_normalised():
    assert normalize_name("a\x1eb\x1fc [profile 0]") == "a + b + c"
    doc = {"Layers": ["conv", "conv [profile 1]", "relu"], "Bindings": ["in", "out"]}
    info = parse_layer_info(doc, "x")
    assert [layer.name for layer in info.layers] == ["conv", "relu"]
    assert info.other_profiles == 1 and not info.detailed and info.io_tensors == ["in", "out"]


def test_trt11_io_tensors_and_split_format_keys():
    doc = {
        "Layers": [{"Name": "c", "LayerType": "CaskConvolution",
                    "Outputs": [{"Name": "o", "Format": "kLINEAR", "Datatype": "FP8"}],
                    "Metadata": "[ONNX Layer: /layer1/conv]\x1f[ONNX Layer: /layer1/q]"}],
        "I/O Tensors": [{"Name": "input", "IOMode": "INPUT"}, {"Name": "logits", "IOMode": "OUTPUT"}],
    }
    info = parse_layer_info(doc, "x")
    assert info.io_tensors == ["input", "logits"]
    assert info.layers[0].precision == "fp8"
    assert info.layers[0].onnx_nodes == ["/layer1/conv", "/layer1/q"]


def test_profile_without_count_header_or_median():
    profile = parse_profile([{"name": "a", "timeMs": 2.0, "averageMs": 1.0, "percentage": 100}], "p")
    assert profile.count is None and profile.records[0].median_ms is None


def test_pairing_by_name_when_the_order_differs_and_refusal_when_nothing_fits():
    # constructed documents, not TensorRT output
    names = [f"l{i}" for i in range(20)]
    info = parse_layer_info({"Layers": names}, "l")
    records = ([{"name": n, "timeMs": 2, "averageMs": 1} for n in reversed(names[1:])]
               + [{"name": "zz", "timeMs": 1, "averageMs": 0.5}])
    pairing = pair_profile(info.layers, parse_profile([{"count": 2}, *records], "p"), "p")
    assert not pairing.by_position and pairing.matched == 19
    assert pairing.unmatched_layers == ["l0"] and pairing.unmatched_records == ["zz"]
    two_of_three = parse_profile([{"name": "b", "timeMs": 2, "averageMs": 1},
                                  {"name": "a", "timeMs": 4, "averageMs": 2},
                                  {"name": "zz", "timeMs": 1, "averageMs": 0.5}], "p")
    with pytest.raises(InputError, match="2 of 3 layers .* below 90%"):
        pair_profile(parse_layer_info({"Layers": ["a", "b", "c"]}, "l").layers, two_of_three, "p")
    other = parse_profile([{"name": "x", "timeMs": 1, "averageMs": 1}], "p")
    with pytest.raises(InputError, match="does not pair"):
        pair_profile(parse_layer_info({"Layers": ["a", "b"]}, "l").layers, other, "p")


@pytest.mark.parametrize("doc, message", [
    ({"nothing": []}, "no 'Layers' list"),
    ({"Layers": []}, "lists no layers"),
    ({"Layers": [{"LayerType": "x"}]}, "has no name"),
])
def test_bad_layer_files(doc, message):
    with pytest.raises(InputError, match=message):
        parse_layer_info(doc, "f")


def test_import_command_writes_a_session_and_refuses_mismatched_files(tmp_path):
    base = fixture_dir("trt8-resnet-a100-fp16")
    out = tmp_path / "imp.json"
    ok = run_cli("import", "--layers", str(base / "resnet.onnx.engine.graph.json"),
                 "--profile", str(base / "resnet.onnx.engine.profile.json"), "--name", "fp16", "--out", str(out))
    assert ok.returncode == 0, ok.stderr
    assert storage.load(out).study.model == "resnet"  # from the engine's file name: no metadata in this set
    ok = run_cli("import", "--layers", str(base / "resnet.onnx.engine.graph.json"), "--model", "resnet18",
                 "--profile", str(base / "resnet.onnx.engine.profile.json"), "--name", "fp16", "--out", str(out),
                 "--force")
    assert ok.returncode == 0, ok.stderr  # replacing a session takes --force
    session = storage.load(out)
    assert session.study.batch == 32 and session.variants[0].kernels is None
    qat = fixture_dir("trt8-resnet-a100-int8-qat")
    refused = run_cli("import", "--layers", str(qat / "resnet-qat.onnx.engine.graph.json"), "--name", "int8",
                      "--into", str(out))
    assert refused.returncode == 2 and "model 'resnet-qat', the session's is 'resnet18'" in refused.stderr
    added = run_cli("import", "--layers", str(qat / "resnet-qat.onnx.engine.graph.json"), "--name", "int8",
                    "--into", str(out), "--model", "resnet18")
    assert added.returncode == 0, added.stderr
    assert [v.name for v in storage.load(out).variants] == ["fp16", "int8"]
    other = fixture_dir("trt8.4-mobilenetv2-int8-qat")
    bad = run_cli("import", "--layers", str(base / "resnet.onnx.engine.graph.json"),
                  "--profile", str(other / "mobilenet.qat.onnx.engine.profile.json"), "--out", str(tmp_path / "x.json"))
    assert bad.returncode == 2 and "does not pair" in bad.stderr and "Traceback" not in bad.stderr
    assert not (tmp_path / "x.json").exists()


def test_doctored_fixture_with_a_missing_profile_record_warns(tmp_path):
    base = fixture_dir("trt8-resnet-a100-fp16")
    profile = orjson.loads((base / "resnet.onnx.engine.profile.json").read_bytes())
    doctored = copy.deepcopy(profile)
    del doctored[3]
    path = tmp_path / "p.json"
    path.write_bytes(orjson.dumps(doctored))
    variant = import_variant(ImportFiles.of(layers=base / "resnet.onnx.engine.graph.json", profile=path), "x").variant
    assert any("partial pairing: 1 layers without a record" in note for note in variant.notes)


@pytest.mark.parametrize(("file_name", "expected"), [
    ("trt10.16.0-mnist.log", "trt10.16.0-mnist"),  # a dot inside the name stays
    ("resnet.onnx.engine.graph.json", "resnet"),
    ("mobilenet_v2_fp16.profile.json", "mobilenet_v2_fp16"),
    ("yolo.v5.plan.profile.json", "yolo.v5"),
    ("result-05.log", "result-05"),
])
def test_an_imported_file_names_its_variant_and_model_by_its_whole_engine_name(tmp_path, file_name, expected):
    source = fixture_dir("trt8-resnet-a100-fp16") / "resnet.onnx.engine.profile.json"
    path = tmp_path / file_name
    path.write_bytes(source.read_bytes())
    imported = import_variant(ImportFiles.of(profile=path, find_metadata=False))
    assert (imported.variant.name, imported.model) == (expected, expected)


def test_a_summary_whose_mean_lies_outside_its_min_and_max_is_refused_naming_the_file(tmp_path):
    """trtexec's GPU Compute Time is [min, max, mean, median, p90, p95, p99]: a mean above the max is a file that
    lies; the one line names the metadata file, not the session the import would write."""
    from tests.trt_sets import SHARED

    source = SHARED / "trt/trt10-resnet18-fp16-trtexec-rtx3060"
    if not source.is_dir():
        pytest.skip("the shared set is not beside the checkout")
    folder = tmp_path / "set"
    folder.mkdir()
    for name in ("resnet18_fp16.graph.json", "resnet18_fp16.profile.json", "resnet18_fp16.profile.metadata.json"):
        (folder / name).write_bytes((source / name).read_bytes())
    metadata = folder / "resnet18_fp16.profile.metadata.json"
    doc = json.loads(metadata.read_text())
    summary = next(v for v in doc.values() if isinstance(v, dict) and "GPU Compute Time" in v)
    stated = summary["GPU Compute Time"]
    stated[2] = stated[1] * 1.01  # the mean above the max
    metadata.write_text(json.dumps(doc))
    result = run_cli("import", str(folder), "--out", str(tmp_path / "s.json"))
    assert result.returncode == 2
    line = result.stderr.strip().splitlines()[-1]
    assert "resnet18_fp16.profile.metadata.json: GPU Compute Time: latency.mean_ms" in line and "s.json" not in line
