"""CPU verdicts say what a CPU can answer (sessions/analyses/verdict.py, answer.py): a simulated FP8 variant timed on
a CPU gets no "slower" / "faster"; its line says FP8 speed needs an FP8 GPU or TensorRT files, then what the run
measured. Expected figures are read from the session's raw JSON, not through the model the code reads."""

from __future__ import annotations

import copy
import re

import orjson
import pytest

from sessions.analyses.answer import answers
from sessions.analyses.groups import load_rules
from sessions.analyses.verdict import CPU_NO_SPEED, verdict_lines, verdicts
from sessions.documents import storage
from sessions.documents.model import Session
from tests.conftest import H200, ROOT

CPU_RUN = ROOT / "benchmarks/results/cpu/run-1.json"  # resnet18, fp32 and simulated fp8-all on a 2-core CPU
SPEED_WORDS = re.compile(r"\b(slower|faster)\b")


@pytest.fixture(scope="module")
def cpu_session() -> Session:
    return storage.load(CPU_RUN)


@pytest.fixture(scope="module")
def raw() -> dict:
    return orjson.loads(CPU_RUN.read_bytes())


def test_the_first_cpu_verdict_line_says_what_a_cpu_cannot_answer_and_what_it_measured(cpu_session, raw):
    lines = verdict_lines(cpu_session, load_rules())
    first = lines[0]
    assert first.startswith("fp8-all (simulated) ran on a CPU: " + CPU_NO_SPEED)
    assert not SPEED_WORDS.search(first)
    fp8 = next(v for v in raw["variants"] if v["precision"] == "fp8")
    base = next(v for v in raw["variants"] if v["precision"] == "fp32")
    recipe, quality = fp8["recipe"], fp8["quality"]
    total = len(recipe["quantized"]) + len(recipe["excluded"])
    assert f"on {len(recipe['quantized'])} of {total} layers" in first
    assert f"top-1 agreement {quality['top1_agreement'] * 100:.1f} %" in first
    assert f"mean KL {quality['mean_kl']:.2g}" in first
    assert f"NaN/Inf on {quality['stress_nonfinite']} of {quality['stress_inputs']} stress inputs" in first
    simulating = sum(1 for layer in fp8["layers"] if "simulates" in layer["attrs"])
    per_call = fp8["trace"]["records"] / fp8["trace"]["calls"]
    base_per_call = base["trace"]["records"] / base["trace"]["calls"]
    assert f"{simulating} layers simulate fp8; {per_call:.0f} ops per call, fp32 {base_per_call:.0f}" in first


def test_the_cpu_verdict_keeps_its_figures_for_a_caller_that_asks_and_the_answer_is_uncoloured(cpu_session, raw):
    found = verdicts(cpu_session, load_rules())
    by_name = {v["name"]: v for v in raw["variants"]}
    expected = by_name["fp32"]["latency"]["median_ms"] / by_name["fp8-all"]["latency"]["median_ms"]
    assert found[0].speedup == pytest.approx(expected) and found[0].judgement is not None
    answer = answers(cpu_session, load_rules())[0]
    assert answer.headline == found[0].text and answer.tone == ""


def test_only_simulated_variants_timed_on_a_cpu_lose_their_speed_words(cpu_session):
    rules = load_rules()
    real = copy.deepcopy(cpu_session)  # a CPU variant that is not simulated (a real int8 kernel, say) keeps speed
    real.variant("fp8-all").simulated = False
    assert SPEED_WORDS.search(verdict_lines(real, rules)[0])
    gpu = storage.load(H200 / "senet154-mainjob-warm.json")  # simulated on a GPU: the verdict as before
    assert all(CPU_NO_SPEED not in line for line in verdict_lines(gpu, rules))
    assert SPEED_WORDS.search(verdict_lines(gpu, rules)[0])


def test_the_cpu_line_comes_first_whatever_the_variant_order(cpu_session):
    reordered = copy.deepcopy(cpu_session)
    extra = copy.deepcopy(reordered.variant("fp32"))  # a second, real variant timed before the simulated one
    extra.name, extra.precision = "bf16", "bf16"
    reordered.variants.insert(1, extra)
    lines = verdict_lines(reordered, load_rules())
    assert len(lines) == 2 and lines[0].startswith("fp8-all (simulated) ran on a CPU")
    assert lines[1].startswith("bf16 ")
