"""Hostile inputs to the importer: impossible numbers, files that are not regular files, values the session
writer could not write back, and engines whose layers share node names. Each is refused with one line
(exit 2, no traceback) or handled in bounded time. The documents are CONSTRUCTED from the real files of
../shared/fixtures by changing one value, and say so.
"""

from __future__ import annotations

import json
import math
import os
import re
import time

import pytest

from profilers.trt_import.importer import ImportFiles, import_variant
from sessions.analyses.groups import kernel_class, load_rules
from sessions.analyses.layer_match import align_layers
from sessions.documents.errors import InputError
from sessions.documents.model import Layer
from tests.conftest import run_cli_process
from tests.trt_sets import SHARED

RULES = load_rules()


def fixture(name: str):
    path = SHARED / "trtexec" / "trt10-mobilenetv2-fp16-trtexec"
    if not path.is_dir():
        pytest.skip("shared fixtures are not beside the checkout")
    return path / name


def rewritten(tmp_path, name: str, change) -> str:
    doc = json.loads(fixture(name).read_text())
    change(doc)
    out = tmp_path / name
    out.write_text(json.dumps(doc))
    return str(out)


def refused(*args: str, expected: str):
    result = run_cli_process("import", *args, "--no-metadata-search", timeout=60)
    assert result.returncode == 2, result.stderr
    assert expected in result.stderr and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    return result


def negate_times(doc):
    for record in doc:
        record["computeMs"] = -record["computeMs"]


def zero_times(doc):
    for record in doc:
        record["computeMs"] = 0


def negative_average(doc):
    doc[3]["averageMs"] = -1


def negative_count(doc):
    doc[0]["count"] = -5


def big_percentage(doc):
    doc[3]["percentage"] = 150


@pytest.mark.parametrize("name, change, expected", [
    ("mobilenet_v2_fp16.timing.json", negate_times, "not a time a run measures"),
    ("mobilenet_v2_fp16.timing.json", zero_times, "above 0"),
    ("mobilenet_v2_fp16.profile.json", negative_average, "averageMs = -1 ms"),
    ("mobilenet_v2_fp16.profile.json", negative_count, "not a count"),
    ("mobilenet_v2_fp16.profile.json", big_percentage, "not a share of a run"),
])
def test_negative_zero_and_impossible_numbers_are_refused(tmp_path, name, change, expected):
    kind = "--times" if "timing" in name else "--profile"
    refused("--layers", str(fixture("mobilenet_v2_fp16.graph.json")), kind, rewritten(tmp_path, name, change),
            "--out", str(tmp_path / "s.json"), expected=expected)
    assert not (tmp_path / "s.json").exists()


def test_an_infinite_time_is_refused(tmp_path):
    times = tmp_path / "mobilenet_v2_fp16.timing.json"
    text, replaced = re.subn(r'("computeMs"\s*:\s*)[0-9.e+-]+', r"\g<1>1e999", fixture(times.name).read_text(), count=1)
    assert replaced == 1
    times.write_text(text)
    refused("--layers", str(fixture("mobilenet_v2_fp16.graph.json")), "--times", str(times),
            "--out", str(tmp_path / "s.json"), expected="not valid JSON")


@pytest.mark.parametrize("flag", ["--layers", "--profile", "--times", "--metadata"])
def test_devices_are_refused_before_any_read(tmp_path, flag):
    args = [] if flag in ("--layers", "--profile") else ["--layers", str(fixture("mobilenet_v2_fp16.graph.json"))]
    started = time.monotonic()
    refused(*args, flag, "/dev/zero", "--out", str(tmp_path / "s.json"), expected="not a regular file")
    assert time.monotonic() - started < 30


@pytest.mark.parametrize("flag", ["--layers", "--times", "--metadata"])
def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path, flag):
    fifo = tmp_path / "f.json"
    os.mkfifo(fifo)
    args = [] if flag == "--layers" else ["--layers", str(fixture("mobilenet_v2_fp16.graph.json"))]
    refused(*args, flag, str(fifo), "--out", str(tmp_path / "s.json"), expected="not a regular file")


def test_integers_past_64_bits_in_a_log_are_refused_at_import(tmp_path):
    log = tmp_path / "run.log"
    log.write_text("&&&& RUNNING TensorRT.trtexec\n[11/01/2024-10:00:00] [I] === Model Options ===\n"
                   "[11/01/2024-10:00:00] [I] Iterations: 99999999999999999999999\n")
    refused("--layers", str(fixture("mobilenet_v2_fp16.graph.json")), "--metadata", str(log),
            "--out", str(tmp_path / "s.json"), expected="Iterations = 1e+23, not a count")


def test_an_unsigned_64_bit_iteration_count_in_metadata_json_is_refused(tmp_path):
    def huge(doc):
        doc["inference_options"]["Iterations"] = 18446744073709551615
    refused("--layers", str(fixture("mobilenet_v2_fp16.graph.json")), "--metadata",
            rewritten(tmp_path, "mobilenet_v2_fp16.profile.metadata.json", huge), "--out", str(tmp_path / "s.json"),
            expected="not a count")


def test_nesting_deeper_than_the_writer_allows_is_refused_at_import(tmp_path):
    def deep(doc):
        value: object = 0
        for _ in range(300):
            value = [value]
        doc["Layers"][0]["StreamId"] = value
    refused("--layers", rewritten(tmp_path, "mobilenet_v2_fp16.graph.json", deep), "--out", str(tmp_path / "s.json"),
            expected="Recursion limit reached")


def test_the_same_values_in_process_raise_input_error(tmp_path):
    path = rewritten(tmp_path, "mobilenet_v2_fp16.profile.json", negative_count)
    with pytest.raises(InputError, match="not a count"):
        import_variant(ImportFiles.of(profile=tmp_path / os.path.basename(path), find_metadata=False))


def test_layers_that_share_node_names_match_in_far_less_than_quadratic_time():
    # CONSTRUCTED: 20,000 layers per engine, every one holding the same two nodes (a repeated block
    # exported with one name); quadratic matching would compare 4e8 pairs
    def engine(n: int) -> list[Layer]:
        return [Layer(name=f"block/Conv + block/Relu #{i}", kind="CaskConvolution", op="conv",
                      onnx_nodes=["block/Conv", "block/Relu"]) for i in range(n)]
    a, b = engine(20_000), engine(20_000)
    started = time.monotonic()
    alignment = align_layers(a, b)
    elapsed = time.monotonic() - started
    assert len(alignment.pairs) == 20_000 and not alignment.only_a and not alignment.only_b
    assert sum(i == j for i, j in alignment.pairs) == 20_000  # each pairs with the one at its own position
    assert elapsed < 20, f"{elapsed:.1f} s for 20,000 layers"


@pytest.mark.parametrize("name, expected", [
    ("ScaledE4M3Function", "quantize / dequantize"),  # ModelOpt's FP8 fake quant on the CPU
    ("void at::native::fake_e4m3fy_kernel<float>(...)", "quantize / dequantize"),
    ("aten::quantize_per_tensor", "quantize / dequantize"),
    ("QuantizeLinear", "quantize / dequantize"),
    ("sm90_xmma_gemm_e4m3e4m3_e4m3f32_f32_tn_n_tilesize128x128x64", "convolution / GEMM"),  # an FP8 GEMM is a GEMM
    ("cutlass3x_sm90_tensorop_s64x128x32gemm_e4m3_e4m3_f32", "convolution / GEMM"),
])
def test_a_quantize_is_a_quantize_however_spelled(name, expected):
    assert kernel_class(name, RULES) == expected


@pytest.mark.parametrize("value",
                         [0.0, 0.25, 1e9, 1e9 + 1, -0.0, -1e-9, float("nan"), float("inf"), 3, True, "1.0", None])
def test_the_quick_time_check_passes_only_what_the_full_one_returns_unchanged(value):
    from profilers.trt_import import documents
    from sessions.documents.errors import InputError

    quick = documents.plain_time_ms(value)
    try:
        full = documents.time_ms(value, "a record's timeMs")
    except InputError:
        full = None
    if quick is not None:
        assert full == quick and type(full) is float
    expected_quick = type(value) is float and not math.isnan(value) and 0.0 <= value <= 1e9  # floats in range
    assert (quick is not None) is expected_quick


def test_batch_given_where_the_layer_file_states_another_is_refused_and_the_same_one_taken(tmp_path):
    """--batch fills a gap; it never overrides the batch the files say ran (the graph's input, read here by hand)."""
    folder = SHARED / "trt" / "trt10-alexnet-fp16-trtexec-rtx3060"
    if not folder.is_dir():
        pytest.skip("shared fixtures are not beside the checkout")
    layers = folder / "alexnet_fp16.graph.json"
    stated = json.loads(layers.read_text())["Layers"][0]["Inputs"][0]["Dimensions"][0]
    files = ImportFiles.of(layers=layers, profile=folder / "alexnet_fp16.profile.json")
    with pytest.raises(InputError, match=rf"--batch {stated * 8}: the files give batch {stated}"):
        import_variant(files, batch=stated * 8)
    assert import_variant(files, batch=stated).batch == stated
