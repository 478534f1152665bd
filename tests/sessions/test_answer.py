"""The FP8 answer, imported layers in full and the layer-time verdict (sessions/analyses/answer.py, layer_detail.py,
layer_verdict.py)."""

import copy
import csv
import io

import orjson
import pytest

from sessions.analyses.answer import answers
from sessions.analyses.groups import load_rules
from sessions.analyses.layer_verdict import LAYER_SUM_BASIS, layer_time_verdicts
from sessions.analyses.verdict import verdicts
from sessions.documents import storage
from sessions.reports import views
from sessions.reports.layer_detail import layer_facts, layers_csv, reformats_of
from tests.conftest import H200, fixture_dir, run_cli

MAINJOB = H200 / "senet154-mainjob-warm.json"


@pytest.fixture(scope="module")
def mainjob():
    return storage.load(MAINJOB)


@pytest.fixture(scope="module")
def qat_pair(tmp_path_factory):
    """The TREx A100 ResNet pair, fp16 and INT8 QAT, imported into one session as a user does."""
    fp16, qat = fixture_dir("trt8-resnet-a100-fp16"), fixture_dir("trt8-resnet-a100-int8-qat")
    path = tmp_path_factory.mktemp("qat") / "pair.json"
    first = run_cli("import", "--layers", str(fp16 / "resnet.onnx.engine.graph.json"), "--profile",
                    str(fp16 / "resnet.onnx.engine.profile.json"), "--name", "fp16", "--model", "resnet",
                    "--out", str(path))
    assert first.returncode == 0, first.stderr
    second = run_cli("import", "--layers", str(qat / "resnet-qat.onnx.engine.graph.json"), "--profile",
                     str(qat / "resnet-qat.onnx.engine.profile.json"), "--name", "int8-qat", "--model", "resnet",
                     "--into", str(path))
    assert second.returncode == 0, second.stderr
    return path


def test_the_answer_covers_each_fp8_variant_with_its_group_and_notes(mainjob):
    found = answers(mainjob, load_rules())
    assert [a.verdict.variant for a in found] == ["fp8-all (simulated)", "fp8-no-se (simulated)"]  # not fp32
    first = found[0]
    assert first.headline.startswith("fp8-all (simulated) is 3.81x slower than fp16; quantize / dequantize adds 11.87")
    assert first.tone == "bad" and first.basis is None
    notes = " | ".join(first.notes)
    assert "simulated fp8" in notes and "NaN/Inf on 1 of 15 stress inputs (fp16: 1)" in notes
    assert "143 quantizer scales raised to the 2^-14 floor" in notes and "noise: CoV fp8-all 0.01 %" in notes


def test_fp8_is_asked_of_the_precision_never_the_name(mainjob):
    renamed = copy.deepcopy(mainjob)
    renamed.variant("fp8-all").name = "candidate"  # an FP8 variant by any name
    renamed.variant("fp32").precision = "fp8"  # and a name that says nothing: fp32 now claims FP8
    labels = [a.verdict.variant for a in answers(renamed, load_rules())]
    assert labels == ["fp32", "candidate (simulated)", "fp8-no-se (simulated)"]


def test_noisy_timing_is_called_noisy():
    session = storage.load(H200 / "senet154-h200.json")  # one round: CoV of samples 4.0 % and 2.9 %
    (first, _) = answers(session, load_rules())
    assert any("above 2.5 %: rerun before trusting it" in note for note in first.notes)


def test_groups_of_one_variant_beside_its_baseline_sorted_by_its_delta(mainjob):
    pair = views.pair_of(mainjob, "fp8-all")
    table = views.group_pair_table(mainjob, load_rules(), "role", *pair)
    assert pair == ("fp16", "fp8-all") and table.labels[1:3] == ["fp8-all ms", "fp16 ms"]
    assert not any("fp32" in label or "no-se" in label for label in table.labels)  # two variants, not all
    deltas = [row[3] for row in table.rows]
    assert table.keys[0] == "quantize / dequantize" and deltas == sorted(deltas, reverse=True)
    assert views.pair_of(mainjob, "fp16") == ("fp16", "fp8-all")  # the baseline leads to the default pair


def test_imported_layers_in_full(qat_pair):
    variant = storage.load(qat_pair).variant("int8-qat")
    pool = next(layer for layer in variant.layers if layer.name == "MaxPool_12")
    facts = dict(layer_facts(variant, pool))
    assert facts["precision"] == "fp32 (the engine chose fp32; the build allowed int8)"  # no recipe: TensorRT chose
    assert facts["tactic"] == "0x0000000000270101"
    assert facts["input 0"] == "onnx::MaxPool_136 fp32 32x64x112x112 [Row major linear FP32]"
    assert [r.name for r in reformats_of(variant, pool)] == ["Reformatting CopyNode for Output Tensor 0 to MaxPool_12"]
    assert facts["reformats"].startswith("1 costing 0.037 ms / call")


def test_show_layers_and_the_layer_exports(qat_pair):
    text = run_cli("show", str(qat_pair), "--layers", "--variant", "int8-qat")
    assert text.returncode == 0 and "ampere_fp32_icudnn_int8x4_128x64_relu_medium_nn_v1" in text.stdout
    as_json = orjson.loads(run_cli("show", str(qat_pair), "--layers", "--json").stdout)
    conv = as_json["variants"]["int8-qat"][1]
    assert conv["precision"] == "int8" and conv["reformats"] == 1 and "Int8 format" in conv["inputs"]
    rows = list(csv.DictReader(io.StringIO(layers_csv(storage.load(qat_pair)))))
    assert len(rows) == 36 + 37 and rows[0]["variant"] == "fp16" and rows[0]["tactic"] == "0x0000000000000000"
    bad = run_cli("show", str(qat_pair), "--layers", "--variant", "nope")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "Traceback" not in bad.stderr


def test_two_imported_variants_get_a_labelled_layer_time_verdict(qat_pair):
    session, rules = storage.load(qat_pair), load_rules()
    assert verdicts(session, rules) == []  # no end-to-end time: the timed verdict has nothing to say
    (verdict,) = layer_time_verdicts(session, rules)
    assert (verdict.variant == "int8-qat" and verdict.baseline == "fp16"
            and verdict.speedup == pytest.approx(1.017 / 1.096, rel=1e-2))
    (answer,) = answers(session, rules)
    assert answer.basis == LAYER_SUM_BASIS and answer.headline.endswith(f"({LAYER_SUM_BASIS})")
    shown = run_cli("show", str(qat_pair)).stdout
    assert "int8-qat is 1.08x slower than fp16" in shown and LAYER_SUM_BASIS in shown


def test_layer_sums_are_never_set_against_medians(mainjob):
    assert layer_time_verdicts(mainjob, load_rules()) == []


def test_the_variant_table_gives_throughput_and_sizes_where_recorded(mainjob, qat_pair):
    table = views.session_variant_table(mainjob)
    rows = dict(zip(table.keys, table.rows, strict=False))
    images, engine, fp8 = (table.labels.index(label) for label in ("images/s", "MiB", "FP8 weights MiB"))
    assert rows["fp16"][images] == pytest.approx(1 / 4.884720087051392 * 1e3)  # batch 1 / median
    assert rows["fp8-all"][fp8] == pytest.approx(117301168 / (1 << 20)) and rows["fp16"][fp8] is None
    assert rows["fp32"][engine] == pytest.approx(461347400 / (1 << 20))
    imported = views.session_variant_table(storage.load(qat_pair))
    assert all(row[images] is None for row in imported.rows)  # no end-to-end time: no throughput invented
    assert "fp16: no latency measured; 1.017 ms (sum of layer times)" in imported.notes
