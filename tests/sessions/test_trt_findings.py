"""What the tool concludes about the real sets of ../shared/fixtures/trt: each finding of the review on its own set.

Expected values are computed here from the raw files with plain json and regular expressions.
"""

from __future__ import annotations

import json
import re
import shutil
import statistics
from pathlib import Path

import pytest

from profilers.trt_import.importer import ImportFiles, import_variant, new_session
from sessions.analyses.diff import diff_sessions
from sessions.analyses.groups import compare_groups, load_rules, role_of, stages_of
from sessions.documents import storage
from sessions.documents.model import Layer, Session
from sessions.reports.export import export_markdown
from tests.conftest import run_cli
from tests.trt_sets import SHARED

RULES = load_rules()
TRT = SHARED / "trt"


def folder(name: str) -> Path:
    path = TRT / name
    if not path.is_dir():
        pytest.skip(f"shared set {name} is not beside the checkout")
    return path


def session(files: ImportFiles, name: str, model: str = "model") -> Session:
    imported = import_variant(files, name, model)
    result = new_session(imported, ["trt-inspect", "import"])
    result.variants.append(imported.variant)
    return result


def engine_files(name: str, stem: str, times: bool = False) -> ImportFiles:
    base = folder(name)
    return ImportFiles.of(layers=base / f"{stem}.graph.json", profile=base / f"{stem}.profile.json",
                          times=base / f"{stem}.timing.json" if times else None)


def test_diff_flags_the_slower_dla_build_by_its_summed_layer_time(tmp_path):
    base = folder("trt7.1-googlenet-xavier-dla-gpu-profiles")
    gpu, dla = base / "googlenet_gpu_transition_at_-1.profile", base / "googlenet_dla_mark_at_-1.profile"
    sums = [sum(r["averageMs"] for r in json.loads(p.read_text()) if "name" in r) for p in (gpu, dla)]
    assert sums[1] / sums[0] > 1.8  # the files: the DLA build takes 83 % longer
    paths = []
    for path, name in ((gpu, "gpu"), (dla, "dla")):
        out = tmp_path / f"{name}.json"
        storage.save(session(ImportFiles.of(profile=path), name, "googlenet"), out)
        paths.append(str(out))
    result = run_cli("diff", *paths, "--threshold", "1%", "--format", "json")
    document = json.loads(result.stdout)
    total = next(c for c in document["changes"] if c["what"] == "summed layer time")
    assert result.returncode == 1 and total["regression"]
    assert (total["a"], total["b"]) == (pytest.approx(sums[0]), pytest.approx(sums[1]))
    assert any(c["what"] == "group time" and c["item"] == "DLA" and c["regression"] for c in document["changes"])


def test_reformat_holds_only_what_tensorrt_calls_a_reformat_in_the_tf_qat_build():
    base = folder("trt8.4-tf-resnet50-rtx3090-int8-qat")
    raw = json.loads((base / "resnet-qat.onnx.engine.graph.json").read_text())["Layers"]
    times = [r["averageMs"] for r in json.loads((base / "resnet-qat.onnx.engine.profile.json").read_text())
             if "name" in r]
    reformat_ms = sum(t for layer, t in zip(raw, times, strict=False)
                      if layer["LayerType"] == "Reformat" and layer.get("Origin") != "QDQ"
                      and "QuantLinearNode" not in layer["Name"])
    imported = session(engine_files("trt8.4-tf-resnet50-rtx3090-int8-qat", "resnet-qat.onnx.engine"), "qat")
    row = next(c for c in compare_groups(imported, "role", RULES) if c.group == "reformat").rows["qat"]
    assert row.time_ms == pytest.approx(reformat_ms) and row.share < 0.01  # 0.2 %, not 10 %
    moved = next(c for c in compare_groups(imported, "role", RULES)
                 if c.group == "shuffle / slice / padding").rows["qat"]
    assert moved.layers == sum(layer["LayerType"] in ("Shuffle", "Slice", "Padding") for layer in raw)


def test_detr_reformats_are_its_copy_nodes_and_its_gemms_are_its_matmuls():
    base = folder("trt8-detr-r50-int8-namesonly")
    names = json.loads((base / "detr-layer-info.json").read_text())["Layers"]
    copies = sum(name.startswith("Reformatting CopyNode") for name in names)
    inserted = re.compile(r"^(reshape|squeeze|unsqueeze|copied_squeeze|transpose)_(before|after)_")
    matmuls = sum(1 for name in names if not name.startswith("Reformatting CopyNode")
                  and any(re.search(r"(^|/)(MatMul|Gemm)(_\d+)?$", p) and not inserted.match(p)
                          for p in name.split(" + "))
                  and not any(re.search(r"(^|/)Conv(_\d+)?$", p) for p in name.split(" + ")))
    variant = import_variant(ImportFiles.of(layers=base / "detr-layer-info.json",
                                            profile=base / "detr-profile.json")).variant
    roles = [role_of(layer, RULES) for layer in variant.layers]
    assert (copies, matmuls) == (247, 107)
    assert roles.count("reformat") == copies and roles.count("GEMM / linear") == matmuls


def test_yolo_constants_are_constants_and_its_stem_is_where_the_network_starts():
    base = folder("trt8.5-yolo-int8-qat-orin-namesonly")
    names = json.loads((base / "layer_info.json").read_text())["Layers"]
    constants = [n for n in names if re.search(r"\.running_(var|mean) \+ ", n)]
    names_only = ImportFiles.of(layers=base / "layer_info.json", profile=base / "profile.json")
    variant = import_variant(names_only).variant
    roles = {layer.name: role_of(layer, RULES) for layer in variant.layers}
    assert len(constants) == 6 and {roles[n] for n in constants} == {"synchronisation / no-op"}
    first_stage = next(i for i, n in enumerate(names) if "/layer1/" in n)
    stages = stages_of(variant.layers, RULES)
    assert all(stage != "stem" for stage in stages[first_stage:])  # no neck layer named conv1 in the stem
    assert [layer.name for layer, stage in zip(variant.layers, stages, strict=False) if stage == "stem"] == [
        n for n in names[:first_stage] if re.search(r"/backbone/(conv1|maxpool)/", n)]


def test_a_concatenations_copies_are_concat_copy_whether_the_file_calls_them_reformat_or_gives_no_kind():
    """TensorRT names the copy of a concatenation's input into its output `<input> copy`: TensorRT 8.5's layer
    information (YOLO) gives it the kind Reformat, TensorRT 7's profile (GoogLeNet) no kind; a `Reformatting CopyNode`
    stays a reformat."""
    yolo = folder("trt8.5-yolo-int8-qat-orin-namesonly")
    raw = json.loads((yolo / "layer_info.json").read_text())["Layers"]
    googlenet = folder("trt7.1-googlenet-xavier-dla-gpu-profiles") / "googlenet_gpu_transition_at_-1.profile"
    with_log = ImportFiles.of(layers=yolo / "layer_info.json", profile=yolo / "profile.json",
                              metadata=[yolo / "trt.out"])  # the log's layer listing gives the kinds
    assert re.search(r"Layer\(Reformat\): \S+ copy", (yolo / "trt.out").read_text())
    for files, names in ((with_log, raw), (ImportFiles.of(layers=yolo / "layer_info.json"), raw),
                         (ImportFiles.of(profile=googlenet), [r.get("name", "") for r in json.loads(
                             googlenet.read_text()) if isinstance(r, dict)])):
        copies = {n for n in names if n.endswith(" copy") and not n.startswith("Reformatting CopyNode")}
        reformats = {n for n in names if n.startswith("Reformatting CopyNode")}
        roles = {layer.name: role_of(layer, RULES) for layer in import_variant(files).variant.layers}
        assert copies and {roles[n] for n in copies} == {"concat / copy"}
        assert {roles[n] for n in reformats} <= {"reformat"}
    # a reformat of such a copy's output is named after it, and stays a reformat
    reformat_of_copy = Layer(name="Reformatting CopyNode for Output Tensor 0 to inception_3a/1x1 copy", kind="unknown")
    assert role_of(reformat_of_copy, RULES) == "reformat"


def test_googlenet_pool_projections_are_convolutions():
    base = folder("trt7.1-googlenet-xavier-dla-gpu-profiles")
    path = base / "googlenet_gpu_transition_at_-1.profile"
    projections = [r["name"] for r in json.loads(path.read_text())
                   if re.search(r"/pool_proj \+ .*/relu_pool_proj$", r.get("name", ""))]
    variant = import_variant(ImportFiles.of(profile=path)).variant
    roles = {layer.name: role_of(layer, RULES) for layer in variant.layers}
    assert len(projections) == 9 and all(roles[n].endswith("convolution") for n in projections)


def test_the_fused_conv_and_pool_stem_is_a_convolution_and_its_pool_is_fused_not_removed():
    fp32 = session(engine_files("trt8.4-resnet-a100-fp32", "resnet.onnx.engine"), "fp32", "resnet18")
    qat = session(engine_files("trt8.4-resnet-a100-int8-qat-residual", "resnet-qat-residual.onnx.engine"), "qat",
                  "resnet18")
    stem = next(layer for layer in qat.variants[0].layers if layer.kind == "ConvActPool")
    assert role_of(stem, RULES) == "other convolution" and stem.kernel_shape == [7, 7]
    changes = diff_sessions(fp32, qat, RULES).changes
    pool = next(c for c in changes if c.item == "MaxPool_2")
    assert pool.what == "fused layer" and stem.name in pool.note
    assert not any(c.what == "removed layer" and re.search(r"(^|\+ )MaxPool_\d+$", c.item) for c in changes)


def test_tf_fp16_against_qat_pairs_the_renamed_stem_and_no_copy_by_signature():
    fp16 = session(engine_files("trt8.4-tf-resnet50-rtx3090-fp16", "resnet.onnx.engine"), "fp16", "resnet50")
    qat = session(engine_files("trt8.4-tf-resnet50-rtx3090-int8-qat", "resnet-qat.onnx.engine"), "qat", "resnet50")
    diff = diff_sessions(fp16, qat, RULES)
    unmatched = [c.item for c in diff.changes if c.what in ("removed layer", "new layer")]
    assert not any(re.search(r"conv1_conv/(Conv2D|BiasAdd)$|^Conv__\d+ \+ resnet50/conv1_relu", item)
                   for item in unmatched)
    assert not any("Reformatting CopyNode" in c.item and "->" in c.item and c.what == "layer time" and not c.a
                   for c in diff.changes)
    assert "by signature" not in " ".join(diff.notes) or all(
        "CopyNode" not in c.item for c in diff.changes if c.what == "precision")


@pytest.mark.parametrize("name, stem", [("trt10-alexnet-fp16-trtexec-rtx3060", "alexnet_fp16"),
                                        ("trt10-resnet18-fp16-trtexec-rtx3060", "resnet18_fp16")])
def test_the_method_states_the_inferences_the_times_file_holds(name, stem):
    base = folder(name)
    samples = json.loads((base / f"{stem}.timing.json").read_text())
    imported = import_variant(ImportFiles.of(layers=base / f"{stem}.graph.json", profile=base / f"{stem}.profile.json",
                                             times=base / f"{stem}.timing.json"))
    result = new_session(imported, [])
    result.variants.append(imported.variant)
    text = export_markdown(result, RULES, ["method", "environment"])
    assert f"1 round x {len(samples)} iterations" in text  # the count in the number it takes
    assert imported.variant.latency.median_ms == pytest.approx(statistics.median(r["computeMs"] for r in samples))
    clock = json.loads((base / f"{stem}.profile.metadata.json").read_text())["device_information"][
        "Application Compute Clock Rate"]
    assert f"SM {round(float(clock.split()[0]) * 1000)} MHz" in text
    assert "None" not in text and "0 cores" not in text


def test_the_method_says_what_the_run_did_with_transfers_and_what_was_imported():
    base = folder("trt8.5-yolo-int8-qat-orin-namesonly")
    log = (base / "trt.out").read_text()
    assert "Data transfers: Enabled" in log
    yolo = session(ImportFiles.of(layers=base / "layer_info.json", profile=base / "profile.json",
                                  metadata=[base / "trt.out"]), "yolo")
    assert "data transfers enabled" in yolo.method.timed_region
    inspector = folder("trt10-mobilenetv2-tf32-onnxapi-rtx3060")
    engine = session(ImportFiles.of(layers=inspector / "trt_engine_info.json"), "tf32")
    assert "--exportProfile" not in engine.method.per_layer and engine.study.backend != "trtexec"


def test_a_verbose_log_gives_names_only_layers_their_types_and_the_input_shape():
    base = folder("trt8.5-yolo-int8-qat-orin-namesonly")
    log = (base / "trt.out").read_text()
    typed = {name: kind for kind, name in re.findall(r"Layer\((\w+)\): (.*?), Tactic: ", log)}
    shape = re.search(r"input \((\w+)\[([\d,]+)\]\)", log).group(2).split(",")
    imported = import_variant(ImportFiles.of(layers=base / "layer_info.json", profile=base / "profile.json",
                                             metadata=[base / "trt.out"]))
    layers = imported.variant.layers
    assert len(typed) == len(layers) == 86 and all(layer.kind == typed[layer.name] for layer in layers)
    assert [imported.batch, *imported.input_shape] == [int(d) for d in shape]
    assert imported.variant.precision == "int8"
    assert not any(note.startswith(("names-only", "batch unknown")) for note in imported.variant.notes)


def test_iprofiler_samples_give_each_layer_its_median_and_spread():
    base = folder("trt10-mobilenetv2-fp16-torchtrt-api")
    samples = json.loads((base / "trt_layer_latency.json").read_text())
    imported = import_variant(ImportFiles.of(layers=base / "trt_engine_info.json",
                                             profile=base / "trt_layer_latency.json"))
    layers = imported.variant.layers
    assert [layer.name for layer in layers] == list(samples)  # paired by position, every layer timed
    for layer in layers:
        values = sorted(samples[layer.name])
        assert layer.time_ms == pytest.approx(statistics.median(values))
        assert values[0] <= layer.attrs["p10_ms"] <= layer.time_ms <= layer.attrs["p90_ms"] <= values[-1]
        assert layer.attrs["samples"] == len(values)
    assert "median, with p10 and p90" in imported.per_layer and imported.variant.backend == "tensorrt"


@pytest.mark.parametrize("name", ["trt10-mobilenetv2-tf32-onnxapi-rtx3060", "trt10-resnet18-tf32-onnxapi-rtx3060"])
def test_an_fp16_input_reformat_does_not_make_a_tf32_engine_fp16(name):
    base = folder(name)
    raw = json.loads((base / "trt_engine_info.json").read_text())["Layers"]
    convolutions = [layer for layer in raw if layer.get("ParameterType") == "Convolution"]
    assert convolutions and all(re.search(r"FP32|Float", str(t)) and not re.search(r"FP16|Half", str(t))
                                for c in convolutions for t in c["Inputs"])
    assert any(re.search(r"FP16|Half", str(layer["Inputs"])) for layer in raw if layer["LayerType"] == "Reformat")
    assert import_variant(ImportFiles.of(layers=base / "trt_engine_info.json")).variant.precision == "fp32"


def _resnet50_import(tmp_path, timed_by: str) -> str:
    """Notes of the import of a folder holding the TF ResNet-50 fp16 engine's layers and profile with `timed_by`'s
    (fp16 or fp32) per-inference times and trtexec metadata."""
    stem = "resnet.onnx.engine"
    files = tmp_path / timed_by
    files.mkdir()
    for source, suffixes in (("fp16", ("graph", "profile")), (timed_by, ("timing", "profile.metadata",
                                                                          "build.metadata"))):
        for suffix in suffixes:
            name = f"{stem}.{suffix}.json"
            shutil.copy(folder(f"trt8.4-tf-resnet50-rtx3090-{source}") / name, files / name)
    out = tmp_path / f"{timed_by}.json"
    result = run_cli("import", str(files), "--out", str(out))
    assert result.returncode == 0, result.stderr
    return " ".join(storage.load(out).variants[0].notes)


def test_a_latency_far_over_the_summed_layer_times_is_said_to_be_maybe_another_engines(tmp_path):
    """The fp16 engine's layers with the fp32 engine's times: the layers' sum is 0.35x its median, where per-layer
    times add up to more than the latency of their own run (the fp16 files' own: 1.06x), and the import says so,
    stating the ratio one way in both of its notes."""
    def ratio(timed_by: str) -> float:  # the files' own figures, read by hand: summed averageMs over the times' median
        records = json.loads((folder("trt8.4-tf-resnet50-rtx3090-fp16") / "resnet.onnx.engine.profile.json")
                             .read_text())
        times = json.loads((folder(f"trt8.4-tf-resnet50-rtx3090-{timed_by}") / "resnet.onnx.engine.timing.json")
                           .read_text())
        return sum(r["averageMs"] for r in records if "name" in r) / statistics.median(t["computeMs"] for t in times)
    assert ratio("fp32") < 0.5 and ratio("fp16") > 1  # the premise
    notes = _resnet50_import(tmp_path, "fp32")
    assert "may not be these layers' engine's" in notes
    stated = re.findall(r"(\d+\.\d+)x (?:the latency's median|the GPU compute median)", notes)
    assert stated == [f"{ratio('fp32'):.2f}"] * 2, notes  # the summed-times note and the warning: one ratio, one way
    assert "may not be these layers' engine's" not in _resnet50_import(tmp_path, "fp16")


def test_one_runs_summary_given_twice_is_said_to_repeat_not_to_be_another_run(tmp_path):
    """The profile's trtexec summary beside the layers and a copy of it given with --metadata: one run written twice
    (trex writes a log's summary out as JSON), not a second run; a second run's summary still is one."""
    base, stem = folder("trt8.4-tf-resnet50-rtx3090-fp16"), "resnet.onnx.engine"
    copy = tmp_path / "copy.profile.metadata.json"
    shutil.copy(base / f"{stem}.profile.metadata.json", copy)
    other = tmp_path / "other.profile.metadata.json"
    summary = json.loads(copy.read_text())
    times = summary["performance_summary"]["GPU Compute Time"]  # [min, max, mean, median, p99]
    summary["performance_summary"]["GPU Compute Time"] = [t * 1.01 for t in times]  # another run, 1 % slower
    other.write_text(json.dumps(summary))
    for given, words in ((copy, "repeats copy.profile.metadata.json's (the same run)"), (other, "is another run")):
        out = tmp_path / f"session-of-{given.stem}.json"
        assert run_cli("import", "--layers", str(base / f"{stem}.graph.json"), "--profile",
                       str(base / f"{stem}.profile.json"), "--metadata", str(given), "--out", str(out)).returncode == 0
        assert words in " ".join(storage.load(out).variants[0].notes)
