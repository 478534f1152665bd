"""Latencies edited the way tests make slower or busier reruns: every figure moved with the samples, so the edited
latency is still one its samples could give (a session file is refused a median outside its samples)."""

from __future__ import annotations

from sessions.documents.model import LatencyStats


def moved(latency: LatencyStats, factor: float, added_ms: float = 0.0) -> None:
    """Each sample, round median and figure x `factor` + `added_ms` (`factor` > 0: order kept, so every figure stays
    the same one of the samples); the spread x `factor`."""
    def move(ms: float) -> float:
        return ms * factor + added_ms

    latency.samples_ms = [move(s) for s in latency.samples_ms]
    latency.round_medians_ms = [move(s) for s in latency.round_medians_ms]
    latency.min_ms, latency.median_ms, latency.mean_ms, latency.max_ms = (
        move(latency.min_ms), move(latency.median_ms), move(latency.mean_ms), move(latency.max_ms))
    latency.p90_ms = move(latency.p90_ms) if latency.p90_ms is not None else None
    latency.p99_ms = move(latency.p99_ms) if latency.p99_ms is not None else None
    latency.std_ms = latency.std_ms * factor if latency.std_ms is not None else None
    latency.cov = latency.std_ms / latency.mean_ms if latency.std_ms is not None and latency.mean_ms else latency.cov
