"""How far apart two processes of unchanged code time a variant, and what `diff` calls it, over committed GPU sessions.

    python benchmarks/rerun_latency_verdicts.py > benchmarks/results/cpu/rerun-latency-verdicts.txt

Reads every `sessions.tar.gz` under `benchmarks/results/h100/` and `benchmarks/results/h200/` and pairs the sessions
one call made of the same study with nothing changed between them: the main job's runs (`senet154-cold`, `-warm`,
`-warm2`, or `-first`, `-second`, `-third`), the whole study repeated (`together-N`) and one variant alone repeated
(`alone-VARIANT-N`). A cold run builds its engines afresh and may choose another plan where two tie, so pairs with a
cold or first run are counted apart from the rest. For each variant both sessions timed, its latency median's change
B / A and the noise rule's verdict on it, once on each session's own band (`sessions.analyses.noise.latency_band`,
what one process's rounds hold) and once on the bands widened for another process
(`sessions.analyses.noise.across_processes`, what `diff` judges a latency on).
"""

from __future__ import annotations

import itertools
import re
import statistics
import sys
import tarfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sessions.analyses.noise import WITHIN, across_processes, judge, latency_band
from sessions.documents import storage
from sessions.documents.model import Session

RESULTS = Path(__file__).resolve().parent / "results"
REPEATS = (re.compile(r"(senet154)-(cold|warm|warm2|first|second|third)\.json$"),
           re.compile(r"(together)-\d+\.json$"), re.compile(r"(alone-.+)-\d+\.json$"))
COLD = ("cold", "first")  # a run that built its engines with empty caches


def sessions_of(archive: Path) -> dict[str, Session]:
    """The sessions in one archive, by file name (the readers' own checks apply: a file they refuse is left out)."""
    found: dict[str, Session] = {}
    with tarfile.open(archive) as tar:
        for member in tar.getmembers():
            name = Path(member.name).name
            extracted = tar.extractfile(member) if member.isfile() and name.endswith(".json") else None
            if extracted is None:
                continue
            path = Path("/tmp") / f"rerun-verdicts-{name}"
            path.write_bytes(extracted.read())
            try:
                found[name] = storage.load(path)
            finally:
                path.unlink()
    return found


def repeated(names: list[str]) -> dict[str, list[str]]:
    """The archive's file names grouped by the study they repeat."""
    groups: dict[str, list[str]] = {}
    for name in sorted(names):
        for pattern in REPEATS:
            match = pattern.match(name)
            if match:
                groups.setdefault(match.group(1), []).append(name)
                break
    return groups


def main() -> int:
    rows: list[tuple[str, str, str, str, float, str, str]] = []
    archives = sorted(p for kind in ("h100", "h200") for p in (RESULTS / kind).rglob("sessions.tar.gz"))
    for archive in archives:
        sessions = sessions_of(archive)
        for names in repeated(list(sessions)).values():
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
                    where = str(archive.parent.relative_to(RESULTS))
                    rows.append((where, f"{name_a} {name_b}", va.name, cold, change, judge(band_a, band_b),
                                 judge(across_processes(band_a), across_processes(band_b))))
    print("| folder | sessions | variant | pair | B / A - 1 | one process's bands | widened for another process |")
    print("|---|---|---|---|---:|---|---|")
    for where, pair, variant, cold, change, own, widened in rows:
        print(f"| {where} | {pair} | {variant} | {cold} | {change:+.3%} | {own} | {widened} |")
    print()
    for kind in ("warm", "cold"):
        chosen = [r for r in rows if r[3] == kind]
        if not chosen:
            continue
        sizes = [abs(r[4]) for r in chosen]
        called = sum(r[5] != WITHIN for r in chosen)
        widened = sum(r[6] != WITHIN for r in chosen)
        print(f"{kind} pairs: {len(chosen)} variant pairs from {len({r[0] for r in chosen})} folders; |B / A - 1| "
              f"median {statistics.median(sizes):.3%}, largest {max(sizes):.3%}; called faster or slower on one "
              f"process's bands: {called}, on bands widened for another process: {widened}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
