"""Each timed variant's samples in the sessions given, split into their rounds, for the benchmarks that read where in
a round something happens (`round_start_spikes.py`, `round_steps.py`, `round_medians.py`); the sessions of a file or
of a `.tar.gz` of them, as the device's result folders keep them (`sessions_at`)."""

from __future__ import annotations

import sys
import tarfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's session reader

from sessions.documents.model import Session
from sessions.documents.storage import decode, load


@dataclass(frozen=True)
class TimedRounds:
    """One variant of one session: its samples (ms per inference) by round, each sample's inference count."""

    session: Path
    variant: str
    rounds: list[list[float]]
    inferences_per_sample: int


def sessions_at(source: Path) -> Iterator[tuple[Path, Session]]:
    """(path, session) for a session file, or for every `.json` member of a `.tar.gz` archive (the member's path inside
    it), in name order; read by the project's session reader."""
    if not source.name.endswith(".tar.gz"):
        yield source, load(source)
        return
    with tarfile.open(source) as archive:
        for member in sorted(archive.getmembers(), key=lambda m: m.name):
            handle = archive.extractfile(member) if member.name.endswith(".json") else None
            if handle is not None:
                yield Path(member.name), decode(handle.read(), f"{source}:{member.name}")


def timed_rounds(paths: Iterable[Path]) -> Iterator[TimedRounds]:
    """Every variant of the sessions at `paths` (`sessions_at`) that has samples and round medians, its samples split
    into as many equal rounds as it has round medians (the rounds hold the same count of samples), in the sessions'
    order."""
    for path, session in (found for source in paths for found in sessions_at(source)):
        for variant in session.variants:
            latency = variant.latency
            if latency is None or not latency.round_medians_ms or not latency.samples_ms:
                continue
            per_round = len(latency.samples_ms) // len(latency.round_medians_ms)
            rounds = [latency.samples_ms[start:start + per_round]
                      for start in range(0, per_round * len(latency.round_medians_ms), per_round)]
            yield TimedRounds(path, variant.name, rounds, latency.inferences_per_sample)
