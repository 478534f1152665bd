"""How far apart two processes of unchanged code time a variant, and what `diff` calls it, over committed GPU sessions.

    python benchmarks/rerun_latency_verdicts.py > benchmarks/results/cpu/rerun-latency-verdicts.txt

Reads the session files under `benchmarks/results/h100/` and `benchmarks/results/h200/`, loose or in a folder's
`sessions.tar.gz`, and pairs the sessions of one folder (one call) that repeat the same study with nothing changed
between them: the main job's runs (`senet154-cold`, `-warm`,
`-warm2`, or `-first`, `-second`, `-third`), the whole study repeated (`together-N`) and one variant alone repeated
(`alone-VARIANT-N`). A cold run builds its engines afresh and may choose another plan where two tie, so pairs with a
cold or first run are counted apart from the rest. For each variant both sessions timed, its latency median's change
B / A and the noise rule's verdict on it, once on each session's own band (`sessions.analyses.noise.latency_band`,
what one process's rounds hold) and once on the bands widened for another process
(`sessions.analyses.noise.across_processes`, what `diff` judges a latency on). Folders in `EXCLUDED` are listed with
their pairs but left out of the counts, for the reason given there.
"""

from __future__ import annotations

import itertools
import re
import statistics
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import NamedTuple

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sessions.analyses.noise import WITHIN, Band, across_processes, judge, latency_band
from sessions.documents import storage
from sessions.documents.model import Session

RESULTS = Path(__file__).resolve().parent / "results"
REPEATS = (re.compile(r"(senet154)-(cold|warm|warm2|first|second|third)\.json$"),
           re.compile(r"(together)-\d+\.json$"), re.compile(r"(alone-.+)-\d+\.json$"))
COLD = ("cold", "first")  # a run that built its engines with empty caches
EXCLUDED = {  # folder: why its pairs do not count
    "h200/final/main": "timed before the GPU-state settle (profilers/gpu_contexts.py): a cold run's graphs replayed "
                       "faster than a warm run's, a fixed defect",
    "h200/final/rows": "timed before the GPU-state settle (profilers/gpu_contexts.py), as h200/final/main",
}


class Pair(NamedTuple):
    """One variant timed in two sessions of one folder, and what the noise rule says of it."""

    folder: str  # under benchmarks/results/
    sessions: str  # the two file names
    variant: str
    kind: str  # "cold" where either session is a cold run, else "warm"
    change: float  # B / A - 1 of the medians
    own: str  # the verdict on each session's own band
    widened: str  # the verdict on the bands widened for another process
    reach: float  # the least widening at which the two bands meet (`reach_needed`)


def sessions_of(folder: Path) -> dict[str, Session]:
    """The repeated sessions of one folder, loose or in its `sessions.tar.gz`, by file name (an archive's members
    are its files' names at its top level); read by the tool's own reader, whose error on a file it refuses ends the
    replay."""
    found = {path.name: storage.load(path) for path in sorted(folder.glob("*.json")) if _repeats(path.name)}
    archive = folder / "sessions.tar.gz"
    if not archive.exists():
        return found
    with tarfile.open(archive) as tar, tempfile.TemporaryDirectory() as scratch:
        for member in tar.getmembers():
            name = Path(member.name).name
            extracted = tar.extractfile(member) if member.isfile() and _repeats(name) else None
            if extracted is not None and name not in found:
                path = Path(scratch) / name
                path.write_bytes(extracted.read())
                found[name] = storage.load(path)
    return found


def _repeats(name: str) -> bool:
    return any(pattern.match(name) for pattern in REPEATS)


def reach_needed(a: Band, b: Band) -> float:
    """The least share of its median by which each band must be widened at each end for the two to meet (0 where
    they meet already): the gap between them over the sum of their medians."""
    gap = max(b.low_ms - a.high_ms, a.low_ms - b.high_ms, 0.0)
    return gap / (a.center_ms + b.center_ms)


def repeated(names: list[str]) -> dict[str, list[str]]:
    """A folder's session file names grouped by the study they repeat."""
    groups: dict[str, list[str]] = {}
    for name in sorted(names):
        for pattern in REPEATS:
            match = pattern.match(name)
            if match:
                groups.setdefault(match.group(1), []).append(name)
                break
    return groups


def main() -> int:
    rows: list[Pair] = []
    folders = sorted({path.parent for kind in ("h100", "h200") for path in (RESULTS / kind).rglob("*")
                      if path.name == "sessions.tar.gz" or (path.suffix == ".json" and _repeats(path.name))})
    used: dict[str, int] = {}
    for folder in folders:
        where = str(folder.relative_to(RESULTS))
        sessions = sessions_of(folder)
        for names in repeated(list(sessions)).values():
            if len(names) > 1 and where not in EXCLUDED:
                used[where] = used.get(where, 0) + len(names)
            for name_a, name_b in itertools.combinations(names, 2):
                a, b = sessions[name_a], sessions[name_b]
                cold = "cold" if any(f"-{c}." in n for c in COLD for n in (name_a, name_b)) else "warm"
                for va in a.variants:
                    vb = b.variant(va.name)
                    if vb is None or va.latency is None or vb.latency is None:
                        continue
                    band_a, band_b = latency_band(va.latency), latency_band(vb.latency)
                    if band_a is None or band_b is None:
                        continue
                    change = vb.latency.median_ms / va.latency.median_ms - 1
                    rows.append(Pair(where, f"{name_a} {name_b}", va.name, cold, change, judge(band_a, band_b),
                                     judge(across_processes(band_a), across_processes(band_b)),
                                     reach_needed(band_a, band_b)))
    print("| folder | sessions | variant | pair | B / A - 1 | one process's bands | widened for another process |")
    print("|---|---|---|---|---:|---|---|")
    for r in rows:
        print(f"| {r.folder} | {r.sessions} | {r.variant} | {r.kind} | {r.change:+.3%} | {r.own} | {r.widened} |")
    print()
    for where, why in EXCLUDED.items():
        print(f"excluded: {where}: {why}")
    print(f"counted: {sum(used.values())} sessions in {len(used)} folders")
    for kind in ("warm", "cold"):
        chosen = [r for r in rows if r.kind == kind and r.folder not in EXCLUDED]
        if not chosen:
            continue
        sizes = [abs(r.change) for r in chosen]
        called = sum(r.own != WITHIN for r in chosen)
        widened = sum(r.widened != WITHIN for r in chosen)
        print(f"{kind} pairs: {len(chosen)} variant pairs from {len({r.folder for r in chosen})} folders; |B / A - 1| "
              f"median {statistics.median(sizes):.3%}, largest {max(sizes):.3%}; called faster or slower on one "
              f"process's bands: {called}, on bands widened for another process: {widened}; the least widening that "
              f"calls none: {max(r.reach for r in chosen):.3%} of the median at each end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
