"""Interim stand-in for the noise rule (replaced by the noise module on merge)."""

from __future__ import annotations

from dataclasses import dataclass

from sessions.model import LatencyStats


@dataclass(frozen=True)
class Band:
    center_ms: float
    low_ms: float
    high_ms: float
    statistic: str


def latency_band(latency: LatencyStats) -> Band | None:
    rounds = latency.round_medians_ms
    if len(rounds) >= 2:
        return Band(latency.median_ms, min(rounds), max(rounds), "median; band: min-max of the round medians")
    if latency.samples_ms:
        spread = latency.std_ms
        return Band(latency.median_ms, latency.median_ms - spread, latency.median_ms + spread, "median; band: ±1 std")
    return None


def judge(baseline: Band, variant: Band) -> str:
    if variant.high_ms < baseline.low_ms:
        return "faster"
    if variant.low_ms > baseline.high_ms:
        return "slower"
    return "within noise"


def delta_within_noise(delta_ms: float, base_ms: float | None) -> bool:
    return abs(delta_ms) <= max(0.001, 0.05 * (base_ms or 0.0))
