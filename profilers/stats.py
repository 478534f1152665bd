"""Latency statistics, as trtexec reports them (nearest-rank percentiles, CoV = std / mean)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from sessions.model import LatencyStats


def percentile(ordered: Sequence[float], q: float) -> float:
    """Nearest-rank percentile of already sorted values."""
    if not ordered:
        raise ValueError("no samples")
    rank = max(1, math.ceil(q / 100.0 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


def latency_stats(samples_ms: Sequence[float]) -> LatencyStats:
    if not samples_ms:
        raise ValueError("no latency samples")
    ordered = sorted(float(s) for s in samples_ms)
    n = len(ordered)
    mean = sum(ordered) / n
    std = math.sqrt(sum((s - mean) ** 2 for s in ordered) / n)
    mid = n // 2
    median = ordered[mid] if n % 2 else (ordered[mid - 1] + ordered[mid]) / 2
    return LatencyStats(
        samples_ms=[float(s) for s in samples_ms],
        min_ms=ordered[0],
        median_ms=median,
        mean_ms=mean,
        p90_ms=percentile(ordered, 90),
        p99_ms=percentile(ordered, 99),
        max_ms=ordered[-1],
        std_ms=std,
        cov=std / mean if mean else 0.0,
    )
