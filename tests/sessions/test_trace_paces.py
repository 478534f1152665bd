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
# a CPU study run beside another: fp32 traced at 4.53x its median, fp8-all at 3.71x, fp8-no-se at 0.80x
GHOSTNET = LOADED.parent / "trace-paces" / "ghostnet_100.json"


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


def test_the_ghostnet_study_judges_fp8_all_and_not_fp8_no_se():
    session = storage.load(GHOSTNET)
    fp32, fp8_all, no_se = (session.variant(name) for name in ("fp32", "fp8-all", "fp8-no-se"))
    assert _by_hand(fp8_all) < PACE_SPREAD * _by_hand(fp32) and _by_hand(fp32) > PACE_SPREAD * _by_hand(no_se)
    assert paces_apart(fp32, fp8_all) is None and paces_apart(fp32, no_se) is not None
    text = run_cli("groups", str(GHOSTNET)).stdout
    assert "fp8-no-se: no group speed-up over fp32 judged" in text and "fp8-all: no group speed-up" not in text


def test_imported_files_hold_no_trace_and_keep_their_group_judgements(tmp_path):
    """TensorRT's per-layer profiles carry the profiler's overhead (their sums 0.84x and 1.31x the latency in these
    two resnet18 builds): no trace ran, so no pace is asked of them and the verdict still names its group."""
    shared = Path(__file__).resolve().parents[3] / "shared" / "fixtures" / "trt"
    folders = [shared / f"trt10-resnet18-{build}-rtx3060" for build in ("tf32-onnxapi", "fp16-trtexec")]
    if not all(folder.is_dir() for folder in folders):
        pytest.skip("the shared resnet18 sets are not beside the checkout")
    out = tmp_path / "pair.json"
    assert run_cli("import", str(folders[0]), "--out", str(out)).returncode == 0
    assert run_cli("import", str(folders[1]), "--into", str(out), "--force").returncode == 0
    session = storage.load(out)
    variants = session.variants
    assert len(variants) == 2 and all(v.trace is None for v in variants)
    assert max(map(_by_hand, variants)) > PACE_SPREAD * min(map(_by_hand, variants))  # the premise: sums apart
    assert paces_apart(*variants) is None
    assert "different paces" not in run_cli("show", str(out)).stdout + run_cli("groups", str(out)).stdout
