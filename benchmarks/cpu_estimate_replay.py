"""The time left a study's progress lines state after each variant, replayed from the logs `benchmarks/cpu_estimate.py
--logs DIR` keeps, against the time each study took after that variant: the estimator of this checkout
(`inspector.eta.Estimate`, fed the log's plan and steps at the log's own times) beside the rule it replaced (the
plan's seconds to go times the measured time of the variants done over their planned seconds).

    python benchmarks/cpu_estimate_replay.py LOG_DIR ... > benchmarks/results/cpu/estimate-logs/replay.txt

Each row: the study, the variant just finished, the seconds the study took after it, and each rule's ratio of stated
over taken (1.00: exact; `WITHIN`, as `benchmarks/cpu_estimate.py` counts). The last lines count the updates within
30 % of the time taken.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from cpu_estimate import WITHIN

from inspector.cpu_defaults import PlanLine, StepEstimate
from inspector.eta import Estimate
from inspector.study import Progress

STAMP = re.compile(r"^trt-inspect: \[(\w+) ([\d.]+) s\] (.*)$")
PLAN = re.compile(r"per variant: (.*); timing rounds ([\d.]+) s")


def read(path: Path) -> tuple[StepEstimate, list[tuple[str, float, float]], float]:
    """The log's plan (per variant and timing seconds, as its line prints them), each variant with its start and end
    (seconds since the run began), and when the study was done."""
    plan: StepEstimate | None = None
    starts: dict[str, float] = {}
    variants: list[tuple[str, float, float]] = []
    done = None
    for line in path.read_text().splitlines():
        stamp = STAMP.match(line)
        if stamp is None:
            continue
        phase, at, message = stamp.group(1), float(stamp.group(2)), stamp.group(3)
        if plan is None and (match := PLAN.search(message)) is not None:
            each = {name: float(s) for name, s in re.findall(r"(\S+) ([\d.]+) s", match.group(1))}
            plan = StepEstimate(0.0, each, float(match.group(2)))
        elif (match := re.match(r"building (\S+) \(", message)) is not None:
            starts[match.group(1)] = at
        elif (match := re.match(r"(\S+) built and traced", message)) is not None:
            variants.append((match.group(1), starts[match.group(1)], at))
        elif phase == "done":
            done = at
    if plan is None or done is None or not variants:
        raise SystemExit(f"{path}: no plan line, variant or end found")
    return plan, variants, done


def stated_now(plan: StepEstimate, variants: list[tuple[str, float, float]], upto: int) -> float:
    """The seconds left `inspector.eta.Estimate` states once the first `upto` variants are done."""
    now = [variants[0][1]]
    eta = Estimate(clock=lambda: now[0])
    eta.update(Progress("setup", PlanLine("CPU plan", plan)))
    total = len(variants)
    eta.update(Progress("build", f"building {variants[0][0]}", variants[0][0], 0, total))
    line = ""
    for done, (name, _, end) in enumerate(variants[:upto], 1):
        now[0] = end
        line = eta.update(Progress("build", f"{name} built and traced", name, done, total))
    words = line.split("about ", 1)[1].split(" left", 1)[0].split()
    return 60 * int(words[0]) + int(words[2]) if "min" in words else int(words[0])


def stated_before(plan: StepEstimate, variants: list[tuple[str, float, float]], upto: int) -> float:
    """The replaced rule: the plan's seconds to go times the variants done's measured over planned seconds."""
    measured = variants[upto - 1][2] - variants[0][1]
    planned = sum(plan.variants[name] for name, _, _ in variants[:upto])
    to_go = sum(plan.variants[name] for name, _, _ in variants[upto:]) + plan.timing
    return measured / planned * to_go


def main(folders: list[str]) -> None:
    ratios: dict[str, list[float]] = {"now": [], "before": []}
    print("| study | after | taken s | now: stated / taken | before: stated / taken |")
    print("|---|---|---|---|---|")
    for path in sorted(p for folder in folders for p in Path(folder).glob("*.log")):
        plan, variants, done = read(path)
        for upto in range(1, len(variants)):
            taken = done - variants[upto - 1][2]
            now = max(stated_now(plan, variants, upto), 0.5) / taken  # the line rounds to whole seconds
            before = stated_before(plan, variants, upto) / taken
            ratios["now"].append(now)
            ratios["before"].append(before)
            print(f"| {path.stem} | {variants[upto - 1][0]} | {taken:.1f} | {now:.2f} | {before:.2f} |")
    for rule, values in ratios.items():
        within = sum(WITHIN[0] <= value <= WITHIN[1] for value in values)
        print(f"{rule}: {within} of {len(values)} updates within 30 % of the time taken, stated / taken "
              f"{min(values):.2f}-{max(values):.2f}")


if __name__ == "__main__":
    main(sys.argv[1:])
