"""Latency statistics, as trtexec reports them (nearest-rank percentiles, CoV = std / mean)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from sessions.documents.model import LatencyStats


def percentile(ordered: Sequence[float], q: float) -> float:
    """Nearest-rank percentile of already sorted values."""
    if not ordered:
        raise ValueError("no samples")
    rank = max(1, math.ceil(q / 100.0 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


def median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def _mean_std(values: Sequence[float]) -> tuple[float, float]:
    mean = sum(values) / len(values)
    return mean, math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))


def _cov(values: Sequence[float]) -> float:
    mean, std = _mean_std(values)
    return std / mean if mean else 0.0


def latency_stats(samples_ms: Sequence[float], per_round: int | None = None) -> LatencyStats:
    """Per-sample statistics; with `per_round` (samples of one variant in one round) also the medians of
    the rounds and their CoV: how far the result moves from round to round, the noise that matters."""
    if not samples_ms:
        raise ValueError("no latency samples")
    ordered = sorted(float(s) for s in samples_ms)
    mean, std = _mean_std(ordered)
    rounds = [list(samples_ms[i : i + per_round]) for i in range(0, len(ordered), per_round)] if per_round else []
    round_medians = [median(r) for r in rounds]
    return LatencyStats(
        samples_ms=[float(s) for s in samples_ms],
        min_ms=ordered[0],
        median_ms=median(ordered),
        mean_ms=mean,
        p90_ms=percentile(ordered, 90),
        p99_ms=percentile(ordered, 99),
        max_ms=ordered[-1],
        std_ms=std,
        cov=std / mean if mean else 0.0,
        round_medians_ms=round_medians,
        round_cov=_cov(round_medians) if len(round_medians) > 1 else None,
    )
