"""What `diff`'s moved-time rule costs on a large session: N made-up layers, one in ten regressed, each regression
looking for a neighbour whose loss it took over, as `VariantComparison` asks (`Family.of` once per variant pair).

    python benchmarks/moved_time_cost.py [N ...]   (default 5000 20000)
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sessions.analyses.diff import Family, moved_time
from sessions.analyses.noise import Band
from sessions.documents.model import Layer


def seconds(n: int) -> tuple[int, float]:
    """Regressions judged and the seconds they took, the family included."""
    layers = [Layer(name=f"blocks.{i // 10}.m{i % 10}.conv", kind="Conv2d") for i in range(n)]
    timed = {}
    for i, layer in enumerate(layers):
        a, b = 1.0, 1.5 if i % 10 == 0 else 1.0
        timed[layer.name] = (a, b, Band(a, a * 0.99, a * 1.01, ""), Band(b, b * 0.99, b * 1.01, ""))
    regressed = [i for i in range(n) if i % 10 == 0]
    started, spent = time.perf_counter(), {}
    family = Family.of(timed)
    for i in regressed:
        moved_time(layers, i, timed, 0.05, spent, family)
    return len(regressed), time.perf_counter() - started


if __name__ == "__main__":
    for count in map(int, sys.argv[1:] or ["5000", "20000"]):
        judged, took = seconds(count)
        print(f"{judged} regressions over {count} layers: {took:.3f} s")
