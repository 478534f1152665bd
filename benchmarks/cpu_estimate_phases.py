"""Each CPU study's steps in wall and CPU seconds, from the logs `benchmarks/cpu_estimate.py --logs DIR` keeps (each
run's `LOG.cpu.tsv`: the process's CPU seconds and the load average as each progress line arrived).

    python benchmarks/cpu_estimate_phases.py LOG_DIR ... > benchmarks/results/cpu/estimate-share/phases.txt

One row per study and step: before the first variant (from the plan's line), each variant's build, quality and trace,
the timing's warm-up with its first round and the rounds after it, and the whole study after the plan; each as wall
seconds, CPU seconds and their ratio (the share of a core the study got: CPU over wall at one thread). The plan's own
column: the share the process got from its start to the plan's line (what `inspector.cpu_defaults.process_share`
reads). Then each study's plan against it, step by step (`MODEL-busyN.log`'s plan line: before the first variant,
each variant, the timing rounds): the seconds planned, the wall seconds taken, their ratio. The last lines compare,
per model, each step's CPU seconds between the loads it ran at (the work the load does not change) and its wall
seconds (what the load does change).
"""

from __future__ import annotations

import re
import sys
from collections import defaultdict
from pathlib import Path

STUDY = re.compile(r"(?P<model>.+)-busy(?P<busy>\d+)\.cpu$")
PLAN = re.compile(r"estimated (?:(\d+) min )?(\d+) s from here.*\(per variant: (.*); timing rounds ([\d.]+) s\)")


def planned(log: Path) -> dict[str, float]:
    """The plan line's seconds by step: `before` (the total less the steps it names), each variant, `timing`."""
    match = PLAN.search(log.read_text())
    if match is None:
        return {}
    each = {name: float(s) for name, s in re.findall(r"(\S+) ([\d.]+) s", match.group(3))}
    total = 60 * int(match.group(1) or 0) + int(match.group(2))
    timing = float(match.group(4))
    return {"before": total - sum(each.values()) - timing, **each, "timing": timing}


def read(path: Path) -> list[tuple[float, float, float, str]]:
    """The rows of one `LOG.cpu.tsv`: wall seconds, CPU seconds, 1-minute load, the line's start."""
    rows = []
    for line in path.read_text().splitlines()[1:]:
        wall, cpu, load, text = line.split("\t", 3)
        rows.append((float(wall), float(cpu), float(load), text))
    return rows


def steps(rows: list[tuple[float, float, float, str]]) -> list[tuple[str, int, int]]:
    """Each step as (name, first row, last row)."""
    def at(pattern: str) -> int:
        return next(i for i, row in enumerate(rows) if re.search(pattern, row[3]))

    plan, first = at(r"\] CPU plan: "), at(r"\] building \S+ \(")
    found = [("before", plan, first)]
    names = [m.group(1) for row in rows if (m := re.search(r"\] building (\S+) \(", row[3]))]
    for name in names:
        start, quality = at(rf"\] building {re.escape(name)} \("), at(rf"\] {re.escape(name)}: quality")
        trace, end = at(rf"\] {re.escape(name)}: tracing"), at(rf"\] {re.escape(name)} built and traced")
        found += [(f"{name} build", start, quality), (f"{name} quality", quality, trace), (f"{name} trace", trace, end)]
    timing, first_round, done = at(r"\[timing "), at(r"\] round 1/"), at(r"\[done ")
    found += [("warm-up and round 1", timing, first_round), ("later rounds", first_round, done), ("study", plan, done)]
    return found


def main(folders: list[str]) -> None:
    cpu_by_step: dict[tuple[str, str], dict[int, tuple[float, float]]] = defaultdict(dict)
    print("| study | share from start to plan | load at plan | step | wall s | CPU s | share |")
    print("|---|---|---|---|---|---|---|")
    for path in sorted(p for folder in folders for p in Path(folder).glob("*.cpu.tsv")):
        match = STUDY.match(path.stem)
        if match is None:
            continue
        rows = read(path)
        found = steps(rows)
        plan = found[0][1]
        plan_share = rows[plan][1] / rows[plan][0]
        for name, a, b in found:
            wall, cpu = rows[b][0] - rows[a][0], rows[b][1] - rows[a][1]
            share = f"{cpu / wall:.2f}" if wall > 0.05 else "-"
            print(f"| {path.parent.name}/{match['model']}-busy{match['busy']} | {plan_share:.2f} | "
                  f"{rows[plan][2]:.1f} | {name} | {wall:.2f} | {cpu:.2f} | {share} |")
            cpu_by_step[(f"{path.parent.name}/{match['model']}", name)][int(match["busy"])] = (wall, cpu)
    print()
    print("| study | step | planned s | taken s | taken / planned |")
    print("|---|---|---|---|---|")
    for path in sorted(p for folder in folders for p in Path(folder).glob("*.cpu.tsv")):
        rows = read(path)
        ends = {name: (a, b) for name, a, b in steps(rows)}
        ends["timing"] = (ends["warm-up and round 1"][0], ends["later rounds"][1])
        for name, seconds in planned(path.with_name(path.name.replace(".cpu.tsv", ".log"))).items():
            if name not in ends:
                a, b = ends[f"{name} build"][0], ends[f"{name} trace"][1]
            else:
                a, b = ends[name]
            taken = rows[b][0] - rows[a][0]
            ratio = f"{taken / seconds:.2f}" if seconds >= 0.5 else "-"  # the total is printed to whole seconds
            print(f"| {path.parent.name}/{path.stem.removesuffix('.cpu')} | {name} | {seconds:.1f} | {taken:.1f} | "
                  f"{ratio} |")
    print()
    print("| models | step | busy 0: wall s / CPU s | busy 2: wall s / CPU s | CPU busy 2 / busy 0 "
          "| wall busy 2 / busy 0 |")
    print("|---|---|---|---|---|---|")
    for (model, name), by_busy in cpu_by_step.items():
        if 0 in by_busy and 2 in by_busy and by_busy[0][1] >= 0.3:
            (wall0, cpu0), (wall2, cpu2) = by_busy[0], by_busy[2]
            print(f"| {model} | {name} | {wall0:.2f} / {cpu0:.2f} | {wall2:.2f} / {cpu2:.2f} | {cpu2 / cpu0:.2f} | "
                  f"{wall2 / wall0:.2f} |")


if __name__ == "__main__":
    main(sys.argv[1:])
