"""What the tool says about TensorRT files must be right, not only parsed.

Real files: ../shared/fixtures/trtexec. Every other document here is CONSTRUCTED by hand for the
test, in the shape of TensorRT's files (names copied from the real sets described in the trt-data
branch's tests/data/trt/README.md); none is presented as real output.
"""

import json
import re

import orjson
import pytest

from profilers.trt_import.importer import ImportFiles, import_variant
from profilers.trt_import.layer_info import compute_precision, parse_layer_info
from profilers.trt_import.metadata import facts_from
from profilers.trt_import.profile import layers_from_profile, parse_profile
from sessions.analyses.captions import layer_precision
from sessions.analyses.diff import diff_sessions
from sessions.analyses.groups import load_rules, role_of, stage_of
from sessions.documents import storage
from sessions.documents.errors import InputError
from sessions.documents.model import Layer, Tensor
from tests.conftest import fixture_dir, run_cli
from tests.trt_sets import SHARED

RULES = load_rules()


def roles_of_names(names: list[str]) -> list[str]:
    info = parse_layer_info({"Layers": names}, "constructed")
    return [role_of(layer, RULES) for layer in info.layers]


def test_names_only_fused_layers_take_the_role_of_their_dominant_op():
    # constructed names-only layer information, spelled as the DETR and YOLO sets spell their layers
    names = [
        ("/model/backbone/layer1/0/conv1/Conv + onnx::Mul_4114 + /model/backbone/layer1/0/bn1/Mul + "
         "/model/backbone/layer1/0/act1/Relu"),
        "backbone.conv1.weight + /backbone/conv1/_weight_quantizer/QuantizeLinear + /backbone/conv1/Conv",
        "/backbone/layer1/conv/Conv + PWN(/backbone/layer1/act/LeakyRelu)",
        "/model/decoder/layers.0/self_attn/v_proj/MatMul + /model/decoder/layers.0/self_attn/v_proj/Add",
        "/model/decoder/layers.0/self_attn/MatMul",
        "/head/QuantizeLinear_clone_1",
        "[trainStation2]",
        "PWN(PWN(/Sub), PWN(/Div))",
        ("Reformatting CopyNode for Input Tensor 0 to /model/backbone/layer1/0/conv1/Conv + "
         "/model/backbone/layer1/0/act1/Relu"),
    ]
    assert roles_of_names(names) == [
        # names alone state no kernel: a convolution, of a shape the files do not give
        "unknown-kernel convolution", "unknown-kernel convolution", "unknown-kernel convolution", "GEMM / linear",
        "GEMM / linear",
        "quantize / dequantize", "synchronisation / no-op", "pooling / elementwise / activation", "reformat",
    ]


def test_tensorrt7_dla_names_are_the_dla_role_and_device():
    # constructed TensorRT 7 profile, shaped like the GoogLeNet Xavier DLA profiles
    doc = [{"count": 10}, {"name": "data to nvm", "timeMs": 1.0, "averageMs": 0.1, "percentage": 2.22},
           {"name": "{conv1/7x7_s2,pool1/3x3_s2,loss3/classifier}", "timeMs": 1.0, "averageMs": 0.1,
            "percentage": 2.22},
           {"name": "{conv1/7x7_s2,pool1/3x3_s2,loss3/classifier} output reformatter 0", "timeMs": 40, "averageMs": 4,
            "percentage": 88.69},
           {"name": "loss3/classifier finish", "timeMs": 0.1, "averageMs": 0.01, "percentage": 0.22},
           {"name": "prob input reformatter 0", "timeMs": 2, "averageMs": 0.2, "percentage": 4.43},
           {"name": "conv2/3x3 + conv2/relu_3x3", "timeMs": 1, "averageMs": 0.1, "percentage": 2.22}]
    layers = layers_from_profile(parse_profile(doc, "constructed"))
    assert [role_of(layer, RULES) for layer in layers] == ["DLA"] * 5 + ["unknown-kernel convolution"]
    assert all(layer.attrs["device"] == "dla" for layer in layers[:5]) and "device" not in layers[5].attrs
    assert layers[2].time_ms == 4


def test_stages_of_keras_and_torch_tensorrt_names():
    info = parse_layer_info({"Layers": [
        "resnet50/quant_conv2_block1_1_conv/Conv2D",
        "[CONVOLUTION]-[aten_ops.convolution.default]-[/features/3/conv/0/0/convolution]",
    ]}, "constructed")
    assert [stage_of(layer, RULES) for layer in info.layers] == ["conv2", "features.3"]


@pytest.mark.parametrize("tactic, weights, inputs, outputs, expected", [
    ("sm80_xmma_fprop_implicit_gemm_interleaved_i8f16_i8i32_f32_nchw", None, ["int8"], ["fp16"], "int8"),
    ("turing_fp16_i8816cudnn_int8_128x128_ldg16_relu_small_nt_v1", None, ["fp16"], ["fp16"], "int8"),
    ("volta_fp32_icudnn_int8x4_128x32_relu_xregs_small_nn_v1", None, ["fp32"], ["fp32"], "int8"),
    ("sm90_xmma_gemm_e4m3e4m3_e4m3f32_f32_tn", None, ["fp16"], ["fp16"], "fp8"),
    ("", "int8", ["fp32"], ["fp32"], "int8"),
    ("sm80_xmma_fprop_implicit_gemm_f16f16_f16f16_f16_nhwckrsc", None, ["fp16"], ["fp32"], "fp16"),
    ("", None, ["int32"], ["int64"], "int32"),  # an index cast: no float dtype anywhere
    ("", None, [], ["fp16"], "fp16"),  # the output dtype only as a last resort
])
def test_compute_precision_comes_from_tactic_weights_and_inputs(tactic, weights, inputs, outputs, expected):
    def tensors(dtypes):
        return [Tensor("t", d) for d in dtypes]

    assert compute_precision(tensors(inputs), weights, tactic, tensors(outputs)) == expected


def test_int8_layers_with_a_float_output_are_int8_in_the_real_qat_fixture():
    base = fixture_dir("trt8-resnet-a100-int8-qat")
    info = parse_layer_info(orjson.loads((base / "resnet-qat.onnx.engine.graph.json").read_bytes()), "qat")
    classifier = next(layer for layer in info.layers if layer.name.startswith("fc.weight"))
    assert classifier.precision == "int8" and classifier.outputs[0].dtype != "int8"
    assert sum(layer.precision == "int8" for layer in info.layers) == 22


@pytest.mark.parametrize("flag, folder, file, expected", [
    ("--layers", "trt8-resnet-a100-fp16", "resnet.onnx.engine.profile.json", "this is a trtexec --exportProfile file"),
    ("--layers", "trt10-mobilenetv2-fp16-trtexec", "mobilenet_v2_fp16.timing.json",
     "this is a trtexec --exportTimes file"),
    ("--times", "trt8-resnet-a100-fp16", "resnet.onnx.engine.profile.json", "expected a trtexec --exportTimes file"),
    ("--profile", "trt8-resnet-a100-fp16", "resnet.onnx.engine.graph.json", "this is layer information"),
    ("--layers", "trt10-mobilenetv2-fp16-trtexec", "mobilenet_v2_fp16.profile.metadata.json", "profile metadata"),
])
def test_a_file_of_the_wrong_kind_is_named(tmp_path, flag, folder, file, expected):
    layers = str(fixture_dir("trt8-resnet-a100-fp16") / "resnet.onnx.engine.graph.json")
    args = ["import", "--layers", layers] if flag != "--layers" else ["import"]
    result = run_cli(*args, flag, str(fixture_dir(folder) / file), "--out", str(tmp_path / "s.json"))
    assert result.returncode == 2 and expected in result.stderr and "Traceback" not in result.stderr


def test_a_profile_alone_imports_with_names_and_times(tmp_path):
    base = fixture_dir("trt8-resnet-a100-fp16")
    out = tmp_path / "p.json"
    result = run_cli("import", "--profile", str(base / "resnet.onnx.engine.profile.json"), "--out", str(out))
    assert result.returncode == 0, result.stderr
    variant = storage.load(out).variants[0]
    assert len(variant.layers) == 36 and all(layer.time_ms is not None for layer in variant.layers)
    assert "sum of layer times" in result.stdout and any("profile alone" in n for n in variant.notes)


def test_trtexec_metadata_fills_the_method_and_gpu_and_export_says_unknown_without_it(tmp_path):
    base = fixture_dir("trt10-mobilenetv2-fp16-trtexec")
    out = tmp_path / "m.json"
    assert run_cli("import", "--layers", str(base / "mobilenet_v2_fp16.graph.json"), "--out", str(out)).returncode == 0
    session = storage.load(out)
    assert session.environment.gpu.name == "NVIDIA GeForce RTX 3060 Laptop GPU"  # from the metadata beside the file
    assert session.study.model == "mobilenet_v2_fp16" and session.method.cuda_graph is True
    bare = tmp_path / "bare.json"
    assert run_cli("import", "--layers", str(base / "mobilenet_v2_fp16.graph.json"), "--no-metadata-search",
                   "--out", str(bare)).returncode == 0
    text = run_cli("export", str(bare)).stdout
    assert "CUDA graph unknown" in text and "unknown rounds x unknown iterations" in text
    rerun = text.split("## Rerun")[1]
    assert "trt-inspect import --layers" in rerun and "rerun" not in rerun.split("```")[1]
    facts = facts_from([base / "mobilenet_v2_fp16.profile.metadata.json"])
    assert facts.cuda_graph is True and facts.iterations and facts.warmup_s is not None


def test_into_refuses_another_model_or_batch_unless_forced(tmp_path):
    fp16, qat = fixture_dir("trt8-resnet-a100-fp16"), fixture_dir("trt8.4-mobilenetv2-int8-qat")
    out = tmp_path / "s.json"
    assert run_cli("import", "--layers", str(fp16 / "resnet.onnx.engine.graph.json"), "--out", str(out)).returncode == 0
    other = ["import", "--layers", str(qat / "mobilenet.qat.onnx.engine.graph.json"), "--into", str(out),
             "--model", "resnet"]
    refused = run_cli(*other)
    assert refused.returncode == 2 and "batch 1, the session's is 32" in refused.stderr
    forced = run_cli(*other, "--force")
    assert forced.returncode == 0 and "joined with --force" in forced.stdout


def test_a_times_file_of_another_engine_is_refused(tmp_path):
    # the real layer file with a CONSTRUCTED copy of another engine's times, named as trtexec names them
    base = fixture_dir("trt10-mobilenetv2-fp16-trtexec")
    other = tmp_path / "other_engine.timing.json"
    other.write_bytes((base / "mobilenet_v2_fp16.timing.json").read_bytes())
    result = run_cli("import", "--layers", str(base / "mobilenet_v2_fp16.graph.json"), "--times", str(other),
                     "--out", str(tmp_path / "x.json"))
    assert result.returncode == 2 and "written for engine 'other_engine'" in result.stderr


def import_session(tmp_path, folder, layers, profile, name):
    out = tmp_path / f"{name}.json"
    base = fixture_dir(folder)
    assert run_cli("import", "--layers", str(base / layers), "--profile", str(base / profile), "--out", str(out),
                   "--model", "resnet18").returncode == 0
    return out


def test_diff_of_fp16_against_qat_pairs_the_single_variants_and_compares_layer_times(tmp_path):
    a = import_session(tmp_path, "trt8-resnet-a100-fp16", "resnet.onnx.engine.graph.json",
                       "resnet.onnx.engine.profile.json", "fp16")
    b = import_session(tmp_path, "trt8-resnet-a100-int8-qat", "resnet-qat.onnx.engine.graph.json",
                       "resnet-qat.onnx.engine.profile.json", "qat")
    diff = diff_sessions(storage.load(a), storage.load(b), RULES)
    assert [p.how for p in diff.pairs] == ["single variants"]
    # copies never by signature
    assert any("24 layers paired (23 by nodes, 1 by signature)" in note for note in diff.notes)
    times = {c.item: c for c in diff.changes if c.what == "layer time"}
    first = times["Conv_0 + Relu_1 -> conv1.weight + QuantizeLinear_7 + Conv_9"]  # matched by nodes across exports
    # a profile's average: no spread, the threshold (5 %) decides, and says which way
    assert first.b > first.a * 1.05 and first.verdict == "slower"
    assert first.note == "threshold only: no per-call spread stored"
    assert any("24 not judged (no per-call spread stored)" in note for note in diff.notes)  # the 24 pairs
    assert any(item.startswith("Conv_43 + Add_44 + Relu_45 -> layer4.1.conv2.weight + ") for item in times)
    precision = {c.item for c in diff.changes if c.what == "precision" and c.b == "int8"}
    assert any(item.startswith("Gemm_48 -> fc.weight") for item in precision)  # the classifier turns INT8
    new = [c.item for c in diff.changes if c.what == "new layer"]
    assert sum(item.startswith("QuantizeLinear_") for item in new) == 10  # all 10 Q/DQ layers; none paired with a copy
    text = run_cli("diff", str(a), str(b))
    assert "layer time" in text.stdout and "not judged" in text.stdout and "unmatched and fused layers" in text.stdout


def test_a_doctored_layer_slowdown_is_a_regression_and_the_pair_option_works(tmp_path):
    imported = import_session(tmp_path, "trt8-resnet-a100-fp16", "resnet.onnx.engine.graph.json",
                              "resnet.onnx.engine.profile.json", "fp16")
    base = storage.load(imported)
    for layer in base.variants[0].layers:  # constructed: each layer's time in 5 calls, within ±2 % of the profile's
        if layer.time_ms is not None:
            layer.call_times_ms = [layer.time_ms * f for f in (0.98, 0.99, 1.0, 1.01, 1.02)]
    a = tmp_path / "spread.json"
    storage.save(base, a)
    slow = storage.load(a)
    slow.variants[0].name = "slower"
    target = max(slow.variants[0].layers, key=lambda layer: layer.time_ms or 0.0)
    target.time_ms *= 2.9  # constructed: one layer 190 % slower
    target.call_times_ms = [t * 2.9 for t in target.call_times_ms]
    slow_path = tmp_path / "slow.json"
    storage.save(slow, slow_path)
    result = run_cli("diff", str(a), str(slow_path), "--pair", "resnet=slower", "--format", "json")
    document = orjson.loads(result.stdout)
    assert result.returncode == 1 and document["regressions"] >= 1
    assert any(c["what"] == "layer time" and c["item"] == target.name and c["regression"] for c in document["changes"])
    bad = run_cli("diff", str(a), str(slow_path), "--pair", "resnet=nothing")
    assert bad.returncode == 2 and "no variant 'nothing'" in bad.stderr


def test_nothing_comparable_exits_2(tmp_path):
    a = import_session(tmp_path, "trt8-resnet-a100-fp16", "resnet.onnx.engine.graph.json",
                       "resnet.onnx.engine.profile.json", "fp16")
    two = storage.load(a)
    extra = storage.load(a).variants[0]
    two.variants[0].name, extra.name = "x", "y"
    two.variants.append(extra)
    two_path = tmp_path / "two.json"
    storage.save(two, two_path)
    result = run_cli("diff", str(a), str(two_path))
    assert result.returncode == 2 and "nothing to compare" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("threshold, ok", [("5%", True), ("0.05", True), ("10", False), ("nan", False), ("inf", False),
                                           ("-1%", False), ("nan%", False)])
def test_threshold_forms(tmp_path, threshold, ok):
    a = import_session(tmp_path, "trt8-resnet-a100-fp16", "resnet.onnx.engine.graph.json",
                       "resnet.onnx.engine.profile.json", "fp16")
    result = run_cli("diff", str(a), str(a), "--threshold", threshold)
    assert (result.returncode == 0) == ok, result.stderr
    if not ok:
        assert result.returncode == 2 and "--threshold" in result.stderr


def test_groups_by_kernel_uses_tactic_names(tmp_path):
    a = import_session(tmp_path, "trt8-resnet-a100-fp16", "resnet.onnx.engine.graph.json",
                       "resnet.onnx.engine.profile.json", "fp16")
    result = run_cli("groups", str(a), "--by", "kernel")
    assert result.returncode == 0 and "convolution / GEMM" in result.stdout


def test_pairing_notes_are_kept_and_shown(tmp_path):
    base = fixture_dir("trt8-resnet-a100-fp16")
    profile = orjson.loads((base / "resnet.onnx.engine.profile.json").read_bytes())
    del profile[3]  # constructed: one record missing
    path = tmp_path / "p.json"
    path.write_bytes(orjson.dumps(profile))
    out = tmp_path / "s.json"
    assert run_cli("import", "--layers", str(base / "resnet.onnx.engine.graph.json"), "--profile", str(path),
                   "--out", str(out)).returncode == 0
    shown = run_cli("show", str(out)).stdout
    assert "partial pairing: 1 layers without a record" in shown
    assert "partial pairing" in run_cli("export", str(out)).stdout


def test_diff_does_not_call_layers_a_profile_lacks_a_saving(tmp_path):
    """The same engine twice, once with its four longest profile records removed: the sums over each side's layers
    differ only by what one side lacks, so neither the summed layer time nor a group holding an untimed layer is
    judged, either way round, and diff finds no regression."""
    base, stem = fixture_dir("trt8.4-mobilenetv2-int8-qat"), "mobilenet.qat.onnx.engine"
    profile = orjson.loads((base / f"{stem}.profile.json").read_bytes())
    records = [r for r in profile if "name" in r]
    longest = {r["name"] for r in sorted(records, key=lambda r: r["averageMs"])[-4:]}
    paths = []
    for name, kept in (("whole", profile), ("lacking", [r for r in profile if r.get("name") not in longest])):
        path = tmp_path / f"{name}.profile.json"
        path.write_bytes(orjson.dumps(kept))
        out = tmp_path / f"{name}.json"
        assert run_cli("import", "--layers", str(base / f"{stem}.graph.json"), "--profile", str(path),
                       "--out", str(out)).returncode == 0
        paths.append(out)
    lacking = storage.load(paths[1]).variants[0]
    untimed = [layer for layer in lacking.layers if layer.time_ms is None]
    assert len(untimed) == 4  # the premise: the import keeps the layers, without a time
    untimed_roles = {role_of(layer, RULES) for layer in untimed}
    for a, b in (paths, paths[::-1]):
        result = run_cli("diff", str(a), str(b), "--format", "json")
        assert result.returncode == 0, result.stdout
        changes = json.loads(result.stdout)["changes"]
        (summed,) = [c for c in changes if c["what"] == "summed layer time"]
        assert summed["verdict"] is None and not summed["regression"]
        assert "layers without a time: 4 in" in summed["note"]
        groups = [c for c in changes if c["what"] == "group time" and c["item"] in untimed_roles]
        assert groups and all(c["verdict"] is None and not c["regression"] for c in groups)
    # both sides lacking the same layers: their sums leave out the same, and are compared
    same = json.loads(run_cli("diff", str(paths[1]), str(paths[1]), "--format", "json").stdout)["changes"]
    assert not [c for c in same if "without a time" in (c.get("note") or "")]


def _mobilenet_profile() -> tuple[list, int]:
    """trtexec's profile of the MobileNetV2 QAT engine (count header first), and its records' position of the
    longest."""
    profile = orjson.loads((fixture_dir("trt8.4-mobilenetv2-int8-qat") / "mobilenet.qat.onnx.engine.profile.json")
                           .read_bytes())
    longest = max(range(1, len(profile)), key=lambda i: profile[i]["timeMs"])
    return profile, longest


def _scale_average(profile: list, at: int) -> None:
    profile[at]["averageMs"] *= 50


def _other_count(profile: list, at: int) -> None:
    profile[0]["count"] = 10


def _half_each(profile: list, at: int) -> None:
    for record in profile[1:]:
        record["percentage"] = 50.0


def _no_share(profile: list, at: int) -> None:
    for record in profile[1:]:
        record["percentage"] = 0.0


def _moved_share(profile: list, at: int) -> None:
    profile[at]["percentage"] -= 2.0
    profile[at + 1]["percentage"] += 2.0  # the sum still 100


@pytest.mark.parametrize(("lie", "words"), [
    (_scale_average, "states averageMs"), (_other_count, "over the header's 10 inferences"),
    (_half_each, "add up to"), (_no_share, "add up to 0 %"), (_moved_share, "% of the run where its timeMs makes"),
])
def test_a_profile_whose_records_contradict_themselves_is_refused_in_one_line(tmp_path, lie, words):
    """The fixture's records agree (averageMs = timeMs / count, percentage = timeMs' share: the premise, checked
    here by hand); each edit breaks one of those and the import refuses it, where it read the edited figure before."""
    profile, longest = _mobilenet_profile()
    count, records = profile[0]["count"], profile[1:]
    summed = sum(r["timeMs"] for r in records)
    assert all(r["averageMs"] == pytest.approx(r["timeMs"] / count, rel=1e-4) for r in records)
    assert all(r["percentage"] == pytest.approx(100 * r["timeMs"] / summed, abs=1e-3) for r in records)
    lie(profile, longest)
    path = tmp_path / "mobilenet.qat.onnx.engine.profile.json"
    path.write_bytes(orjson.dumps(profile))
    result = run_cli("import", "--profile", str(path), "--out", str(tmp_path / "s.json"))
    assert result.returncode == 2 and words in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_a_profile_that_lacks_records_still_agrees_with_itself(tmp_path):
    """Records removed (their share leaves the percentages' sum under 100): what is left still agrees, and imports."""
    profile, longest = _mobilenet_profile()
    del profile[longest]
    path = tmp_path / "mobilenet.qat.onnx.engine.profile.json"
    path.write_bytes(orjson.dumps(profile))
    assert run_cli("import", "--profile", str(path), "--out", str(tmp_path / "s.json")).returncode == 0


def test_import_names_refuse_bad_batches():
    with pytest.raises(InputError, match="give --layers, --profile or both"):
        import_variant(ImportFiles.of())


def test_latencies_timed_by_different_clocks_are_not_compared_and_the_layer_sums_stand_in(tmp_path):
    """A script's own clock around each run (transfers and all) against trtexec's GPU compute time: the latencies
    are not compared (the 5x the two latencies make is not a speed-up), the summed layer times are, both ways."""
    sessions = []
    for folder in ("trt10-resnet18-tf32-onnxapi-rtx3060", "trt10-resnet18-fp16-trtexec-rtx3060"):
        out = tmp_path / f"{folder}.json"
        assert run_cli("import", str(SHARED / "trt" / folder), "--out", str(out)).returncode == 0
        sessions.append(storage.load(out))
    timers = {session.method.timer for session in sessions}
    assert len(timers) == 2  # what the files say timed each: the premise of the test
    for a, b in (sessions, sessions[::-1]):
        diff = diff_sessions(a, b, RULES)
        assert any(w.startswith("latencies timed differently") for w in diff.warnings)
        assert not [c for c in diff.changes if c.what == "latency"]
        (summed,) = [c for c in diff.changes if c.what == "summed layer time"]
        sums = [sum(layer.time_ms or 0.0 for layer in s.variants[0].layers) for s in (a, b)]
        assert (summed.a, summed.b) == pytest.approx(sums)
        assert summed.verdict == ("slower" if sums[1] > sums[0] * 1.05 else "faster" if sums[1] < sums[0] * 0.95
                                  else None)
        assert summed.regression == (summed.verdict == "slower")


def test_a_build_that_allowed_fp16_is_fp16_and_its_layers_that_kept_fp32_say_so(tmp_path):
    """trtexec --fp16 on a GTX 1070 (no fast fp16): every layer kept fp32. The variant is what the build asked for
    (the log's `Precision:` line, read here by hand), each layer what it ran."""
    folder = SHARED / "trt" / "trt8.4.1-mnist-cnn-fp16-gtx1070-build-profile"
    log = (folder / "result-FP16.txt").read_text()
    asked = re.search(r"\] Precision: (\S+)", log).group(1).lower()
    assert "fp16" in asked.split("+")  # the premise
    out = tmp_path / "s.json"
    assert run_cli("import", str(folder), "--out", str(out)).returncode == 0
    variant = storage.load(out).variants[0]
    assert variant.precision == "fp16"
    computing = [layer for layer in variant.layers if layer.precision == "fp32"]
    assert computing
    shown = run_cli("show", str(out), "--layers").stdout
    conv = next(line for line in shown.splitlines() if line.startswith(computing[0].name))
    assert re.search(r"\sfp32\s+fp16\s", conv)  # ran fp32, asked fp16


def test_fp32_layers_on_tf32_kernels_say_so_and_the_others_do_not(tmp_path):
    """The A100 fp32 ResNet: convolutions whose tactic multiplies in TF32 (`..._tf32f32_...`, read from the raw
    layer file here) show as fp32 with TF32 math, every other layer as plain fp32."""
    folder = SHARED / "trt" / "trt8.4-resnet-a100-fp32"
    raw = json.loads((folder / "resnet.onnx.engine.graph.json").read_text())["Layers"]
    tf32 = {layer["Name"] for layer in raw if "tf32" in str(layer.get("TacticName", "")).lower()}
    assert tf32 and len(tf32) < len(raw)  # the premise: some layers, not all
    out = tmp_path / "s.json"
    assert run_cli("import", str(folder), "--out", str(out)).returncode == 0
    variant = storage.load(out).variants[0]
    shown = {layer.name: layer_precision(layer, variant) for layer in variant.layers}
    assert {name for name, words in shown.items() if words == "fp32 (tf32 math)"} == tf32
    assert all(words != "fp32 (tf32 math)" for name, words in shown.items() if name not in tf32)


@pytest.mark.parametrize("tactic, math", [
    ("sm80_xmma_fprop_implicit_gemm_f32f32_tf32f32_f32_nhwckrsc_nhwc_tilesize256x64x32", "tf32"),  # the A100 set's
    ("sm80_xmma_fprop_implicit_gemm_f32f32_f32f32_f32_nhwckrsc_nhwc_tilesize128x128x8", None),  # CONSTRUCTED: full fp32
    ("ampere_scudnn_128x64_relu_xregs_large_nn_v1", None), (None, None)])
def test_only_a_tactic_that_names_tf32_is_tf32_math(tactic, math):
    from sessions.documents.trt_names import tactic_math

    assert tactic_math(tactic) == math


@pytest.mark.parametrize("ran, option, expected", [
    (["fp32", "fp32"], "FP32+FP16", "fp16"),  # asked fp16, every layer kept fp32
    (["fp16", "fp32"], "FP32+FP16+INT8", "fp16"),  # --best: int8 allowed, none ran
    (["int8", "fp16"], "FP32+FP16+INT8", "int8"),
    (["fp16"], "FP32+FP16+FP8", "fp16"),
    (["fp32"], None, "fp32"),
    (["fp16", "fp32"], "FP32+FP16+BF16+INT8", "fp16"),  # --best on sm80+: bf16 allowed, fp16 ran
    (["fp32"], "FP32+FP16+BF16", "fp16"),
    ([None, None], "FP32+INT8", "int8"),  # names-only layers: the option is all there is
    ([None], None, "unknown"),
])
def test_a_variants_precision_is_what_ran_or_the_float_precision_its_build_asked_for(ran, option, expected):
    from profilers.trt_import.importer import dominant_precision

    layers = [Layer(name=f"l{k}", kind="CaskConvolution", op="conv", precision=p) for k, p in enumerate(ran)]
    assert dominant_precision(layers, option) == expected


def test_the_record_whose_share_was_edited_is_the_one_named(tmp_path):
    """One record's percentage set far under its time's share in a profile of few, long records: the share the other
    records state is the expectation, so the refusal names that record, not one whose share the edit moved (against
    the sum of the edited percentages, the largest record would be 1.2 points off)."""
    folder = SHARED / "trt" / "trt8.4-resnet-a100-fp32"
    if not folder.is_dir():
        pytest.skip(f"shared set {folder.name} is not beside the checkout")
    profile = orjson.loads((folder / "resnet.onnx.engine.profile.json").read_bytes())
    assert profile[5]["percentage"] > 5  # the premise: a share far over 1 %
    profile[5]["percentage"] = 1.0
    path = tmp_path / "resnet.onnx.engine.profile.json"
    path.write_bytes(orjson.dumps(profile))
    result = run_cli("import", "--profile", str(path), "--out", str(tmp_path / "s.json"))
    assert result.returncode == 2 and "record 5 states 1 % of the run" in result.stderr
