"""benchmarks/row_independence.py judges a variant alone against the whole study by the hull of each side's runs'
bands, counts the pairs of runs `diff` would call apart, and finds a variant's alone runs by its exact name: on
hand-made bands and file names."""

from __future__ import annotations

import copy

import pytest

from benchmarks.row_independence import alone_runs, apart_as_diff, hull, judged
from sessions.analyses.noise import SLOWER, WITHIN, Band, judge
from sessions.documents import storage
from tests.conftest import H200
from tests.sessions.latency_edits import moved


def band(center: float, low: float, high: float) -> Band:
    return Band(center, low, high, "hand-made")


def test_the_hull_spans_every_run_and_centres_on_the_median_of_their_medians():
    together = hull([band(1.04, 1.03, 1.05), band(1.00, 0.99, 1.01)])
    assert (together.center_ms, together.low_ms, together.high_ms) == pytest.approx((1.02, 0.99, 1.05))
    assert hull([band(2.0, 1.9, 2.1), band(3.0, 2.95, 3.2), band(2.5, 2.4, 2.6)]).center_ms == 2.5


def test_alone_runs_that_meet_the_spread_of_the_together_runs_are_within_and_beyond_it_slower():
    together = hull([band(1.00, 0.99, 1.01), band(1.04, 1.03, 1.05)])
    assert judge(together, hull([band(1.045, 1.044, 1.046), band(1.02, 1.019, 1.021)])) == WITHIN
    assert judge(together, hull([band(1.06, 1.055, 1.065), band(1.07, 1.06, 1.08)])) == SLOWER


def test_diff_calls_a_pair_apart_only_past_what_two_processes_differ_by():
    together = [band(2.000, 1.999, 2.001), band(2.0005, 1.9995, 2.0015)]
    near = [band(2.008, 2.007, 2.009), band(2.0085, 2.0075, 2.0095)]  # 0.4 %: beyond the hulls, not the widening
    far = [band(2.030, 2.029, 2.031), band(2.0005, 1.9995, 2.0015)]  # one run 1.5 % off, one not
    assert judge(hull(together), hull(near)) == SLOWER
    assert apart_as_diff(together, near) == 0
    assert apart_as_diff(together, far) == 2  # the far run against each run together


def test_a_variants_alone_runs_are_found_by_its_exact_name_in_run_order(tmp_path):
    for name in ("alone-cudnn-fp8-2.json", "alone-cudnn-fp8-all-1.json", "alone-cudnn-fp8-10.json",
                 "alone-cudnn-fp8-1.json", "together-1.json"):
        (tmp_path / name).write_text("{}")
    assert [p.name for p in alone_runs(tmp_path, "cudnn-fp8")] == ["alone-cudnn-fp8-1.json", "alone-cudnn-fp8-2.json",
                                                                   "alone-cudnn-fp8-10.json"]


def test_the_table_counts_the_rows_apart_on_the_hulls_and_the_pairs_diff_would_call_apart(tmp_path, capsys):
    """The committed H200 main job as the study together; each variant alone is a copy of that variant moved by a known
    factor: fp16 by 0.4 % (apart on one process's bands, not on bands widened for the other process),
    the simulated FP8 `all` by 3 % (apart both ways), the rest unmoved (within noise both ways)."""
    session = storage.load(H200 / "senet154-mainjob-warm.json")
    storage.save(session, tmp_path / "together-1.json")
    factors = {"fp16": 1.004, "fp8-all": 1.03}
    for variant in session.variants:
        if variant.latency is None:
            continue
        alone = copy.deepcopy(session)
        alone.variants = [v for v in alone.variants if v.name == variant.name]
        moved(alone.variants[0].latency, factors.get(variant.name, 1.0))
        storage.save(alone, tmp_path / f"alone-{variant.name}-1.json")
    assert {"fp16", "fp8-all"} <= {v.name for v in session.variants}  # the premise: both are in the study
    moved_rows = judged(tmp_path)
    out = capsys.readouterr().out.splitlines()
    rows = {line.split(" | ")[0].strip("| "): line.split(" | ") for line in out
            if line.startswith("| ") and not line.startswith("| variant")}
    assert rows["fp16"][-2:] == ["slower", "0 of 1 |"]
    assert rows["fp8-all"][-2:] == ["slower", "1 of 1 |"]
    assert all(row[-2:] == ["within noise", "0 of 1 |"] for name, row in rows.items() if name not in factors)
    assert moved_rows == 2
    assert out[-1].endswith(f"; 1 of {len(rows)} with a pair of sessions diff calls apart")

