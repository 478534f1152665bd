"""`diff` flags a layer or group only outside both sessions' bands, and counts what it could not judge.

The sessions are the H200 session's layers with per-call times drawn here: two draws of the same noise
stand for a rerun (nothing may be flagged), one layer drawn 60 % slower for a lowering regression (it
must be flagged). Which layer is slower is known by construction, not computed by the code under test.
"""

from __future__ import annotations

import copy
import random

import pytest

from sessions import storage
from sessions.diff import diff_sessions
from sessions.diff_report import diff_text
from sessions.groups import load_rules, role_of
from tests.conftest import H200

MAINJOB = H200 / "senet154-mainjob-warm.json"  # schema 2, one traced call: no per-call times stored


@pytest.fixture(scope="module")
def session():
    """fp16's 20 slowest layers (each some % of the total, as a small CNN's are), without the kernel table."""
    loaded = storage.load(MAINJOB)
    fp16 = loaded.variant("fp16")
    fp16.layers = sorted(fp16.layers, key=lambda layer: -(layer.time_ms or 0.0))[:20]
    fp16.kernels = fp16.trace = None
    loaded.variants = [fp16]
    return loaded


def drawn(session, seed: int, slowed: dict[str, float] | None = None, calls: int = 7, spread: float = 0.3):
    """A copy whose layers have `calls` per-call times: the stored time x lognormal noise (30 %, as on a loaded CPU)."""
    rng = random.Random(seed)
    copied = copy.deepcopy(session)
    for layer in copied.variants[0].layers:
        if layer.time_ms is None:
            continue
        factor = (slowed or {}).get(layer.name, 1.0)
        layer.call_times_ms = [layer.time_ms * factor * rng.lognormvariate(0, spread) for _ in range(calls)]
        layer.time_ms = sum(layer.call_times_ms) / calls
    return copied


def time_regressions(diff) -> set[tuple[str, str]]:
    return {(c.what, c.item) for c in diff.regressions if c.what in ("layer time", "group time")}


def test_reruns_of_noisy_layers_flag_nothing(session):
    for seed in range(3):
        a, b = drawn(session, 2 * seed), drawn(session, 2 * seed + 1)
        diff = diff_sessions(a, b, load_rules())
        assert time_regressions(diff) == set()
        changed = [c for c in diff.changes if c.what == "layer time" and abs(c.relative or 0) > diff.threshold]
        assert changed  # the noise alone moves layers past the threshold: the bands, not the threshold, hold them


def test_a_slowed_layer_and_its_group_are_flagged(session):
    rules = load_rules()
    layers = session.variants[0].layers
    slowed = max(layers, key=lambda layer: layer.time_ms or 0.0)  # tripled, it passes the 1 % floor of the total
    assert 2 * slowed.time_ms > 0.01 * sum(layer.time_ms or 0.0 for layer in layers)
    diff = diff_sessions(drawn(session, 10), drawn(session, 11, {slowed.name: 3.0}), rules)
    assert {item for what, item in time_regressions(diff) if what == "layer time"} == {slowed.name}
    assert ("group time", role_of(slowed, rules)) in time_regressions(diff)


def test_layers_without_a_spread_are_counted_not_judged_and_left_to_the_threshold(session):
    diff = diff_sessions(session, copy.deepcopy(session), load_rules())  # a stored session of one traced call
    timed = sum(1 for layer in session.variants[0].layers if layer.time_ms is not None)
    assert f"fp16: layer times outside both sessions' bands flagged; 0 judged, {timed} not judged" in " ".join(diff.notes)
    half = drawn(session, 1)
    diff = diff_sessions(session, half, load_rules())  # one side with a spread is not enough
    assert f"0 judged, {timed} not judged" in " ".join(diff.notes)
    assert all(c.verdict is None for c in diff.changes if c.what == "layer time")
    shown = [line for line in diff_text(diff).splitlines() if " layer time " in line]
    assert shown and all("threshold only: no per-call spread stored" in line for line in shown)
    for change in (c for c in diff.changes if c.what == "layer time"):  # unjudged: the threshold alone decides
        assert change.regression == (change.b > change.a * (1 + diff.threshold) and change.b - change.a >= 0.01 * sum(
            layer.time_ms or 0.0 for layer in session.variants[0].layers))
    judged = diff_text(diff_sessions(drawn(session, 2), drawn(session, 3), load_rules())).splitlines()
    assert any(" layer time " in line and "within noise" in line for line in judged)
