"""Tests that catch a lying measurement: each fails when the measurement path is broken on purpose.

A fake clock (time.perf_counter) moves only when a fake step spends time, so every figure is known
exactly; fake engines, a fake tracer and a fake CUPTI stand in for the GPU. `benchmarks/mutations.py`
breaks the real code one way at a time and checks that one of these tests fails.
"""

from __future__ import annotations

import math
import time
from dataclasses import replace

import numpy as np
import pytest

import profilers.timing
from inspector import study
from profilers import kernel_trace
from profilers.attribution import LayerIndex, summarize
from profilers.quality import compare
from profilers.stats import latency_stats
from profilers.tracers import get_tracer
from sessions.documents import storage
from sessions.documents.plan import TimingPlan, parse_variants
from sessions.documents.storage import SessionWriter
from tests import fake_backend
from tests.fake_backend import TimedWorld
from tests.fake_cupti import FakeCupti
from tests.inspector.test_study_fake import fake_plan


def timed_study(tmp_path, monkeypatch, world: TimedWorld, rounds=4, iters=5, warmup_s=0.0, variants="fp32,fp16",
                tracer="fake"):
    monkeypatch.setattr(fake_backend, "WORLD", world)
    monkeypatch.setattr(time, "perf_counter", world.clock)
    plan = fake_plan(tmp_path, backend="fake-timed", variants=parse_variants(variants, [], []), tracer=tracer,
                     timing=TimingPlan(warmup_s, rounds, iters))
    _, path = study.run_study(plan, [], lambda progress: None)
    return storage.load(path)


def constant(ms):
    return lambda n: ms


# --- timing ------------------------------------------------------------------------------------------------------


def test_each_variant_is_timed_at_what_its_step_costs(tmp_path, monkeypatch):
    session = timed_study(tmp_path, monkeypatch, TimedWorld({"fp32": constant(2.0), "fp16": constant(5.0)}))
    for name, cost in (("fp32", 2.0), ("fp16", 5.0)):
        latency = session.variant(name).latency
        assert len(latency.samples_ms) == 4 * 5
        assert latency.samples_ms == pytest.approx([cost] * 20, rel=1e-6)
        assert latency.median_ms == pytest.approx(cost, rel=1e-6)


def test_cold_calls_are_warmed_away_for_the_warm_up_time(tmp_path, monkeypatch):
    def cold_then_warm(n):
        return 50.0 if n < 3 else 1.0  # lazy set-up: the first calls are slow

    world = TimedWorld({"fp32": cold_then_warm, "fp16": cold_then_warm})
    session = timed_study(tmp_path, monkeypatch, world, warmup_s=0.5)
    for name in ("fp32", "fp16"):
        latency = session.variant(name).latency
        assert latency.max_ms == pytest.approx(1.0, rel=1e-6), "a cold call was timed"
        spent_ms = 3 * 50.0 + (world.calls[name] - 3) * 1.0
        assert spent_ms - sum(latency.samples_ms) >= 500.0 - 1e-6, "warm-up shorter than --warmup"


def test_rounds_interleave_the_variants_so_drift_spreads_over_all(tmp_path, monkeypatch):
    world = TimedWorld(shared_cost_ms=lambda k: 1.0 + 0.02 * k)  # the GPU slows down as it heats
    session = timed_study(tmp_path, monkeypatch, world, rounds=10, iters=5)
    a, b = (session.variant(name).latency.median_ms for name in ("fp32", "fp16"))
    assert abs(a - b) / min(a, b) < 0.2, (a, b)
    runs = 1 + sum(1 for x, y in zip(world.order, world.order[1:], strict=False) if x != y)
    assert runs >= 10 * (2 - 1) + 1, world.order  # A B, B A, A B ...: every round switches once at least


def test_the_median_is_the_middle_sample_not_the_mean(tmp_path, monkeypatch):
    def one_hiccup_in_ten(n):
        return 100.0 if n % 10 == 9 else 1.0

    session = timed_study(tmp_path, monkeypatch, TimedWorld({"fp32": one_hiccup_in_ten, "fp16": one_hiccup_in_ten}))
    latency = session.variant("fp32").latency
    assert latency.median_ms == pytest.approx(1.0, rel=1e-6)
    assert latency.mean_ms > 5 and latency.max_ms == pytest.approx(100.0)
    assert latency_stats([1.0, 1.0, 1.0, 1.0, 10.0]).median_ms == 1.0
    assert latency_stats([1.0, 2.0, 3.0, 10.0]).median_ms == 2.5


# --- what the session says about the timed region -----------------------------------------------------------------


class GraphEngine:
    def __init__(self, graphed: bool):
        self.graphed = graphed

    def timing_step(self):
        return fake_backend.TimingStep(lambda: None, graphed=self.graphed)


def fake_measure(steps, plan, device, on_round=None, *args, **kwargs):
    """A timer for a GPU this machine does not have: every step runs once and takes 1 ms."""
    samples = {name: [] for name in steps}
    for name, run in steps.items():
        run()
        samples[name].append(1.0)
    if on_round is not None:
        on_round(0, samples)
    return samples


@pytest.mark.parametrize("device, graphed, claimed", [
    ("cuda", (True, True), True), ("cuda", (True, False), False), ("cuda", (False, False), False),
    ("cpu", (True, True), False),
])
def test_cuda_graph_is_claimed_only_when_every_timed_step_replays_one(tmp_path, monkeypatch, device, graphed, claimed):
    session = timed_study(tmp_path, monkeypatch, TimedWorld({"fp32": constant(1.0), "fp16": constant(1.0)}))
    monkeypatch.setattr(profilers.timing, "measure", fake_measure)
    plan = replace(session.study.plan, device=device)
    engines = {"fp32": GraphEngine(graphed[0]), "fp16": GraphEngine(graphed[1])}
    study.time_variants(session, engines, plan,
                        study.Recorder(session, SessionWriter(tmp_path / "t.json", False), lambda p: None),
                        lambda every: study.timing_method(plan, fake_backend.FakeTimedBackend, get_tracer("fake"),
                                                          graphed=every))
    assert session.method.cuda_graph is claimed
    region = session.method.timed_region
    if device == "cuda":
        assert ("CUDA-graph replay" in region) is claimed and ("eager" in region) is not claimed, region
    else:
        assert "CUDA" not in region, region


@pytest.mark.parametrize("tracer, detach, said", [
    ("cupti", True, ("; CUPTI, which traced each variant's eager calls before the rounds, detached from the process "
                     "after each trace")),
    ("cupti", False, "; CUPTI, which traced each variant's eager calls before the rounds, kept attached through them"),
    ("torch", True, None), ("none", True, None),
])
def test_the_timing_method_says_what_the_tracer_left_attached_through_the_rounds(tmp_path, monkeypatch, tracer,
                                                                                 detach, said):
    from profilers import kernel_trace

    monkeypatch.setattr(kernel_trace, "DETACH_AFTER_TRACE", detach)
    session = timed_study(tmp_path, monkeypatch, TimedWorld({"fp32": constant(1.0)}))
    plan = replace(session.study.plan, device="cuda")
    region = study.timing_method(plan, fake_backend.FakeTimedBackend, get_tracer(tracer), graphed=True).timed_region
    if said is None:
        assert "CUPTI" not in region, region
    else:
        assert said in region and region.index(said) > region.index("CUDA events"), region


# --- tracing and attribution --------------------------------------------------------------------------------------


def test_cupti_dropped_records_reach_the_trace_summary(monkeypatch):
    fake = FakeCupti(dropped=7)
    fake.install(monkeypatch)
    records = get_tracer("cupti").trace(fake.run_once, 2, "cuda", lambda: None)
    assert records.dropped == 7
    assert [k.name for k in records.kernels] == ["conv1_kernel", "fc_kernel"] * 2
    table, summary = summarize(records, LayerIndex())
    assert (summary.dropped, summary.records, summary.unattributed, summary.calls) == (7, 4, 0, 2)
    assert table.call == [0, 0, 1, 1]


def test_no_dropped_records_reads_as_zero(monkeypatch):
    fake = FakeCupti(dropped=0)
    fake.install(monkeypatch)
    assert kernel_trace.trace(fake.run_once, 1, lambda: None).dropped == 0


def test_kernels_outside_every_layer_are_counted_as_unattributed(tmp_path, monkeypatch):
    world = TimedWorld({"fp32": constant(1.0), "fp16": constant(1.0)})
    session = timed_study(tmp_path, monkeypatch, world, tracer="fake-orphans")
    for variant in session.variants:
        assert variant.trace.unattributed == 2  # one per traced call
        assert variant.trace.records == 2 * 3 + 2
        assert list(variant.kernels.layer).count(-1) == 2


# --- quality ------------------------------------------------------------------------------------------------------


def test_quality_measures_the_disagreement_it_is_shown():
    reference = np.array([[2.0, 0.0, 0.0], [0.0, 2.0, 0.0]])
    candidate = np.array([[2.0, 0.0, 0.0], [0.0, 0.0, 2.0]])
    quality = compare(reference, candidate, "fp32", "test rows", 2)
    assert quality.top1_agreement == 0.5
    assert quality.max_abs_logit_error == 2.0
    p = np.exp([0.0, 2.0, 0.0]) / np.exp([0.0, 2.0, 0.0]).sum()
    q = np.exp([0.0, 0.0, 2.0]) / np.exp([0.0, 0.0, 2.0]).sum()
    assert quality.mean_kl == pytest.approx(float((p * np.log(p / q)).sum()) / 2)
    assert quality.nonfinite == 0


def test_quality_counts_nonfinite_outputs():
    reference = np.zeros((2, 3))
    candidate = np.array([[math.nan, 0.0, 0.0], [math.inf, 0.0, -math.inf]])
    quality = compare(reference, candidate, "fp32", "test rows", 2)
    assert quality.nonfinite == 3


def test_identical_outputs_are_perfect():
    reference = np.random.default_rng(0).normal(size=(4, 10))
    quality = compare(reference, reference.copy(), "fp32", "test rows", 4)
    assert ((quality.top1_agreement, quality.mean_kl, quality.max_abs_logit_error, quality.nonfinite)
            == (1.0, 0.0, 0.0, 0))
