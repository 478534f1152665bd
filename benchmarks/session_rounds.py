"""Each timed variant's samples in the sessions given, split into their rounds, for the benchmarks that read where in
a round something happens (`round_start_spikes.py`, `round_steps.py`)."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's session reader

from sessions.documents.storage import load


@dataclass(frozen=True)
class TimedRounds:
    """One variant of one session: its samples (ms per inference) by round, each sample's inference count."""

    session: Path
    variant: str
    rounds: list[list[float]]
    inferences_per_sample: int


def timed_rounds(paths: Iterable[Path]) -> Iterator[TimedRounds]:
    """Every variant of the sessions at `paths` that has samples and round medians, its samples split into as many
    equal rounds as it has round medians (the rounds hold the same count of samples), in the sessions' order."""
    for path in paths:
        for variant in load(path).variants:
            latency = variant.latency
            if latency is None or not latency.round_medians_ms or not latency.samples_ms:
                continue
            per_round = len(latency.samples_ms) // len(latency.round_medians_ms)
            rounds = [latency.samples_ms[start:start + per_round]
                      for start in range(0, per_round * len(latency.round_medians_ms), per_round)]
            yield TimedRounds(path, variant.name, rounds, latency.inferences_per_sample)
