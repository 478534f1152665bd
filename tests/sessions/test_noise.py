"""The noise rule (`sessions.analyses.noise`): bands from the stored statistics, and `judge` on two of them.

Expected values come from scipy's binomial distribution, from simulation, or from the data's own
minima and medians, never from `sessions.analyses.noise`.
"""

from __future__ import annotations

import copy
import random
import statistics

import pytest
from scipy.stats import binom

from profilers.attribution import assign_layer_times
from sessions.analyses.noise import (
    FACTOR_MIN_LAYERS,
    FASTER,
    SLOWER,
    WITHIN,
    Band,
    common_factor,
    group_band,
    judge,
    latency_band,
    layer_band,
    median_interval,
    without_factor,
)
from sessions.documents import storage
from sessions.documents.model import KernelTable, LatencyStats, Layer
from tests.conftest import H200

MAINJOB = H200 / "senet154-mainjob-warm.json"  # per-sample CoV 0.07 to 0.15 %, 5 rounds x 20


def latency(samples: list[float], per_round: int) -> LatencyStats:
    """LatencyStats as the study stores them, computed here with the statistics module."""
    rounds = [samples[i:i + per_round] for i in range(0, len(samples), per_round)]
    mean = statistics.fmean(samples)
    std = statistics.pstdev(samples)
    ordered = sorted(samples)
    return LatencyStats(samples_ms=samples, min_ms=ordered[0], median_ms=statistics.median(samples), mean_ms=mean,
                        p90_ms=ordered[-1], p99_ms=ordered[-1], max_ms=ordered[-1], std_ms=std, cov=std / mean,
                        round_medians_ms=[statistics.median(r) for r in rounds])


def scaled(stats: LatencyStats, factor: float) -> LatencyStats:
    return latency([s * factor for s in stats.samples_ms], len(stats.samples_ms) // len(stats.round_medians_ms))


@pytest.mark.parametrize("n", [2, 3, 5, 6, 9, 15, 20, 37, 100, 250])
def test_the_median_interval_uses_the_binomial_ranks(n):
    values = [float(i) for i in range(1, n + 1)]  # x_(k) = k
    low, high = median_interval(values)
    safe = [k for k in range(1, n // 2 + 1) if binom.cdf(k - 1, n, 0.5) <= 0.025]
    k = max(safe) if safe else 1
    assert (low, high) == (k, n + 1 - k)


def test_the_median_interval_holds_the_median_as_often_as_it_claims():
    rng = random.Random(7)
    for n in (5, 15, 100):
        hits = 0
        for _ in range(2000):
            values = [rng.lognormvariate(0, 1) for _ in range(n)]  # skewed, as CPU timings are; true median 1
            low, high = median_interval(values)
            hits += low <= 1.0 <= high
        assert hits / 2000 >= 0.92  # 93.75 % for n = 5, at least 95 % from n = 6


def test_h200_two_percent_is_real_and_a_rerun_of_itself_is_not():
    session = storage.load(MAINJOB)
    fp16 = session.variant("fp16").latency
    band = latency_band(fp16)
    assert band is not None and band.low_ms <= fp16.median_ms <= band.high_ms
    assert judge(band, latency_band(scaled(fp16, 1.02))) == SLOWER
    assert judge(band, latency_band(scaled(fp16, 0.98))) == FASTER
    assert judge(band, latency_band(copy.deepcopy(fp16))) == WITHIN
    fp32 = latency_band(session.variant("fp32").latency)  # 4.185 against 4.885 ms in the same session
    assert judge(band, fp32) == FASTER and judge(fp32, band) == SLOWER


def heavy_tailed(rng: random.Random, floor: float, n: int) -> list[float]:
    """Host timings on a loaded CPU: a floor, and now and then a long stall (CoV above 100 %)."""
    return [floor * (1 + rng.expovariate(1.0)) * (8 if rng.random() < 0.2 else 1) for _ in range(n)]


def test_a_median_that_the_minima_contradict_is_within_noise():
    # The CPU case: the medians say the variant is faster, the minima say it is about 1.9x slower, and
    # the samples' CoV is above 100 %. A rule that calls this "faster" states what a rerun would not repeat.
    rng = random.Random(3)
    checked = 0
    for _ in range(300):
        base = latency(heavy_tailed(rng, 100.0, 15), 5)
        variant = latency(heavy_tailed(rng, 190.0, 15), 5)
        medians_say_faster = variant.median_ms < base.median_ms
        minima_say_slower = variant.min_ms > base.min_ms * 1.5
        if medians_say_faster and minima_say_slower and max(base.cov, variant.cov) > 1.0:
            checked += 1
            assert judge(latency_band(base), latency_band(variant)) == WITHIN
    assert checked >= 3  # the case occurs in the simulation, so the assertion above ran


def test_without_a_spread_nothing_is_judged():
    one = latency([5.0], 1)
    assert latency_band(one) is None
    assert layer_band(Layer(name="a", kind="Conv2d", time_ms=1.0)) is None
    assert layer_band(Layer(name="a", kind="Conv2d", time_ms=1.0, call_times_ms=[1.0])) is None
    timed = Layer(name="b", kind="Conv2d", time_ms=1.0, call_times_ms=[1.0, 1.1, 0.9])
    assert group_band([timed, Layer(name="c", kind="ReLU", time_ms=0.2)]) is None  # one timed layer has no spread
    assert group_band([timed, Layer(name="d", kind="ReLU")]) is not None  # an untimed layer adds nothing


def test_per_call_times_come_from_the_call_column():
    rng = random.Random(5)
    calls, layers = 4, 3
    rows = [(rng.randrange(-1, layers), rng.randrange(-1, calls), rng.randrange(1, 10_000)) for _ in range(400)]
    table = KernelTable(names=["k"], name=[0] * len(rows), layer=[r[0] for r in rows], call=[r[1] for r in rows],
                        start_ns=[0] * len(rows), duration_ns=[r[2] for r in rows], stream=[0] * len(rows),
                        grid=[[1, 1, 1]] * len(rows), block=[[1, 1, 1]] * len(rows))
    found = [Layer(name=f"l{i}", kind="Conv2d") for i in range(layers)]
    assign_layer_times(table, found, calls)
    for i, layer in enumerate(found):
        expected = [sum(d for lay, c, d in rows if lay == i and c == call) / 1e6 for call in range(calls)]
        assert layer.call_times_ms == pytest.approx(expected)
    single = [Layer(name="x", kind="Conv2d")]
    assign_layer_times(KernelTable(names=["k"], name=[0], layer=[0], call=[0], start_ns=[0], duration_ns=[5],
                                   stream=[0], grid=[[1, 1, 1]], block=[[1, 1, 1]]), single, 1)
    assert single[0].call_times_ms == []  # one call: no spread, not judged


def test_a_group_band_sums_its_layers_call_by_call():
    a = Layer(name="a", kind="Conv2d", time_ms=2.0, call_times_ms=[1.0, 3.0, 2.0])
    b = Layer(name="b", kind="Conv2d", time_ms=2.0, call_times_ms=[3.0, 1.0, 2.0])
    band = group_band([a, b])
    assert (band.low_ms, band.center_ms, band.high_ms) == (4.0, 4.0, 4.0)  # per-call sums 4, 4, 4: no spread


def test_a_layer_band_widens_with_its_variants_drift():
    layer = Layer(name="a", kind="Conv2d", time_ms=1.0, call_times_ms=[1.0, 1.0, 1.0, 1.0, 1.0])
    steady = layer_band(layer)
    assert (steady.low_ms, steady.high_ms) == (1.0, 1.0)
    drifting = latency([10.0, 10.0, 10.0, 8.0, 8.0, 8.0, 12.0, 12.0, 12.0], 3)  # round medians 8, 10, 12
    widened = layer_band(layer, latency_band(drifting))
    assert widened.low_ms == pytest.approx(0.8) and widened.high_ms == pytest.approx(1.2)


def test_the_common_factor_is_the_median_ratio_and_needs_enough_layers():
    smallest = min(n for n in range(2, 50) if binom.cdf(1, n, 0.5) <= 0.025)  # rank 2 safe: the extremes left out
    assert FACTOR_MIN_LAYERS == smallest
    rng = random.Random(11)
    times = [(a, a * 2.4 * rng.lognormvariate(0, 0.2)) for a in (rng.uniform(0.1, 5.0) for _ in range(40))]
    times.append((1.0, 30.0))  # one layer slowed on its own: it cannot carry the factor
    times.append((0.0, 1.0))  # a layer without time in A carries no ratio
    factor = common_factor(times)
    ratios = sorted(b / a for a, b in times if a > 0)
    assert factor is not None and factor.layers == 41
    assert factor.ratio == pytest.approx(statistics.median(ratios))
    assert ratios[0] < factor.low <= factor.ratio <= factor.high < ratios[-1]
    assert common_factor(times[:smallest - 1]) is None
    band = without_factor(Band(4.8, 2.4, 7.2, "s"), factor)
    assert (band.low_ms, band.center_ms, band.high_ms) == pytest.approx(
        (2.4 / statistics.median(ratios), 4.8 / statistics.median(ratios), 7.2 / statistics.median(ratios)))
    assert "median of 41 paired layers' time ratios" in band.statistic
