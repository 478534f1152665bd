"""Group times of two variants whose traces ran at different paces (a CPU under a changing load) are not judged."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from sessions.analyses.noise import PACE_SPREAD, paces_apart, trace_pace
from sessions.analyses.verdict import ungrouped_words
from sessions.documents import storage
from sessions.documents.errors import InputError
from sessions.documents.model import Session, Variant
from tests.conftest import run_cli

# a CPU study whose fp8-all trace ran about twice as slow, against its timed median, as its fp32 trace
LOADED = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "cpu" / "run-2.json"


def _by_hand(variant: Variant) -> float:
    """The pace, from the session's figures, sharing nothing with the code under test."""
    return sum(layer.time_ms or 0.0 for layer in variant.layers) / variant.latency.median_ms


def _rescaled(session: Session, name: str, factor: float) -> Session:
    """`session` with variant `name`'s layer times (and per-call times) multiplied by `factor`."""
    variants = []
    for variant in session.variants:
        if variant.name == name:
            layers = [dataclasses.replace(layer, time_ms=None if layer.time_ms is None else layer.time_ms * factor,
                                          call_times_ms=[t * factor for t in layer.call_times_ms])
                      for layer in variant.layers]
            variant = dataclasses.replace(variant, layers=layers)
        variants.append(variant)
    return dataclasses.replace(session, variants=variants)


def test_the_loaded_study_s_traces_ran_at_paces_more_than_the_spread_apart():
    session = storage.load(LOADED)
    fp32, fp8 = session.variant("fp32"), session.variant("fp8-all")
    assert (trace_pace(fp32), trace_pace(fp8)) == (pytest.approx(_by_hand(fp32)), pytest.approx(_by_hand(fp8)))
    assert _by_hand(fp8) > PACE_SPREAD * _by_hand(fp32)  # the premise
    assert paces_apart(fp32, fp8) == (pytest.approx(_by_hand(fp32)), pytest.approx(_by_hand(fp8)))
    # the same traces brought to one pace agree
    brought = _rescaled(session, "fp8-all", _by_hand(fp32) / _by_hand(fp8))
    assert paces_apart(brought.variant("fp32"), brought.variant("fp8-all")) is None


def test_groups_judge_no_group_between_traces_at_different_paces_and_say_why(tmp_path):
    session = storage.load(LOADED)
    brought = tmp_path / "brought.json"
    factor = _by_hand(session.variant("fp32")) / _by_hand(session.variant("fp8-all"))
    storage.save(_rescaled(session, "fp8-all", factor), brought)
    text_apart, text_brought = run_cli("groups", str(LOADED)).stdout, run_cli("groups", str(brought)).stdout
    assert "fp8-all: no group speed-up over fp32 judged" in text_apart
    assert "their traces ran at different paces" in text_apart and "within noise, whatever" not in text_apart
    assert "no group speed-up" not in text_brought


def test_a_verdict_names_no_group_where_the_traces_ran_at_different_paces():
    session = storage.load(LOADED)
    fp32, fp8 = session.variant("fp32"), session.variant("fp8-all")
    words = ungrouped_words(fp32, fp8)
    assert words is not None and "different paces" in words
    brought = _rescaled(session, "fp8-all", _by_hand(fp32) / _by_hand(fp8))
    assert "different paces" not in (ungrouped_words(brought.variant("fp32"), brought.variant("fp8-all")) or "")


def test_every_committed_gpu_study_keeps_its_variants_paces_together():
    """On a GPU a trace's kernels run at the GPU's speed whatever the host does: no committed GPU session's variants
    lie apart, so no GPU study loses a group judgement to the rule."""
    found = 0
    for path in sorted((LOADED.parents[1]).glob("h*/**/*.json")):
        try:
            session = storage.load(path)
        except InputError:  # result folders hold other JSON too
            continue
        variants = [v for v in session.variants if v.device == "cuda" and trace_pace(v) is not None]
        found += len(variants)
        assert not [(a.name, b.name) for a in variants for b in variants if paces_apart(a, b)], path
    assert found > 100
