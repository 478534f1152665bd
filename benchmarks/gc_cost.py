"""How much of a trt-inspect command's wall time Python's cyclic garbage collector takes: the command runs in this
process with a callback on every collection (`gc.callbacks`), which times each one; prints the collections' seconds
by generation, by second of the run (to set beside the progress lines' times) and the longest ones, then the objects
the collector tracked at the end. The timing rounds hold the collector off (profilers/timing.py): what it costs falls
in the set-up and the builds.

    python benchmarks/gc_cost.py REPORT.txt senet154 --out s.json    (the arguments of trt-inspect)
"""

from __future__ import annotations

import collections
import gc
import sys
import time

LONGEST = 25


def main() -> int:
    report, argv = sys.argv[1], sys.argv[2:]
    collections_seen: list[tuple[float, float, int, int]] = []  # (start since the run's, seconds, generation, freed)
    started: dict[str, float] = {}
    start = time.perf_counter()

    def timed(phase: str, info: dict[str, int]) -> None:
        now = time.perf_counter()
        if phase == "start":
            started["at"] = now
        elif "at" in started:
            at = started.pop("at")
            collections_seen.append((at - start, now - at, info["generation"], info["collected"]))

    gc.callbacks.append(timed)
    from inspector.cli import main as trt_inspect

    code = trt_inspect(argv)
    gc.callbacks.remove(timed)
    wall = time.perf_counter() - start
    by_generation: collections.Counter = collections.Counter()
    counts: collections.Counter = collections.Counter()
    by_second: collections.Counter = collections.Counter()
    for at, seconds, generation, _ in collections_seen:
        by_generation[generation] += seconds
        counts[generation] += 1
        by_second[int(at)] += seconds
    with open(report, "w") as out:
        out.write(f"trt-inspect {' '.join(argv)}: exit {code}, {wall:.1f} s wall; the collector "
                  f"{sum(by_generation.values()):.2f} s in {len(collections_seen)} collections\n\n")
        for generation in sorted(by_generation):
            out.write(f"generation {generation}: {counts[generation]} collections, {by_generation[generation]:.3f} s\n")
        out.write("\nseconds of collection in each second of the run (from the command's start)\n")
        out.writelines(f"{second:4d} s  {by_second[second]:.3f}\n" for second in sorted(by_second))
        out.write(f"\nthe {LONGEST} longest (start, seconds, generation, objects freed)\n")
        for at, seconds, generation, freed in sorted(collections_seen, key=lambda c: -c[1])[:LONGEST]:
            out.write(f"{at:8.2f} s  {seconds:.3f} s  gen {generation}  freed {freed}\n")
        out.write(f"\nobjects tracked at the end: {len(gc.get_objects())}\n")
    return code


if __name__ == "__main__":
    sys.exit(main())
