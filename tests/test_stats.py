import math
import random

import pytest

from profilers.stats import latency_stats, percentile


def test_nearest_rank_percentiles_and_cov():
    samples = [float(x) for x in range(1, 101)]  # 1..100
    random.Random(0).shuffle(samples)
    stats = latency_stats(samples)
    assert stats.min_ms == 1 and stats.max_ms == 100
    assert stats.median_ms == 50.5
    assert stats.p90_ms == 90 and stats.p99_ms == 99
    assert stats.mean_ms == pytest.approx(50.5)
    assert stats.std_ms == pytest.approx(math.sqrt((100**2 - 1) / 12))
    assert stats.cov == pytest.approx(stats.std_ms / 50.5)
    assert stats.samples_ms == samples  # order kept: rounds stay readable


def test_odd_count_median_and_single_sample():
    assert latency_stats([3.0, 1.0, 2.0]).median_ms == 2.0
    one = latency_stats([4.0])
    assert (one.p99_ms, one.cov) == (4.0, 0.0)


def test_empty_is_an_error():
    with pytest.raises(ValueError):
        latency_stats([])
    with pytest.raises(ValueError):
        percentile([], 50)
