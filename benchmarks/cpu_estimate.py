"""The CPU plan's time estimate against the time the study took, on small models, each at two background loads.

    python benchmarks/cpu_estimate.py [--busy 0,2] [--logs DIR] [MODEL ...] > benchmarks/results/cpu/estimate.txt

Each model runs as `trt-inspect run MODEL --device cpu` (the CPU defaults: `inspector.cpu_defaults.fit_cpu_plan` picks
threads, variants and counts and states "estimated ... from here"), from this checkout, in a fresh process, once per
count of `--busy` processes that this script keeps busy beside it (`cpu_load.busy`, started 30 s before the first model
of that count, so that the load average has risen when the plan reads it). From its progress lines on stderr (each
stamped with the seconds since the start): the estimate and when it was made, the time taken from then to the end of
the study ("saved ..." of the done step), their ratio; the headless time left after the first variant (the whole
study's) and after the second timing round (the first holds every variant's warm-up), each against the time the study
took after it. The load average before and after each run is printed beside it: the host is shared, and other work
changes its load too. `--logs DIR` keeps each run's stderr there.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from cpu_load import busy

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = ["resnet18", "mobilenetv3_small_050", "regnety_002", "efficientnet_b0"]
SETTLE_S = 30.0
STAMP = re.compile(r"^trt-inspect: \[(\w+) ([\d.]+) s\] (.*)$")
ESTIMATE = re.compile(r"estimated (?:(\d+) min )?(\d+) s from here")
FORWARD = re.compile(r"(\d+) PyTorch threads?; one fp32 forward ([\d.]+) s")
DURATION = r"(?:(\d+) min )?(\d+) s"
FIRST = re.compile(rf"1 of \d+ variants done; about {DURATION} left")
LEFT = re.compile(rf"round 2 of \d+; about {DURATION} left")


def seconds(match: re.Match[str]) -> float:
    return 60 * int(match.group(1) or 0) + int(match.group(2))


def run(model: str, out: Path, log: Path | None) -> dict[str, float | None]:
    """The run's figures in seconds (threads a count), None where not found: `threads`, `forward`, `estimate`,
    `taken` (after the estimate), `first` and `after_first` (the time left said after the first variant, and the time
    taken after it), `left` and `rest` (the same after the second timing round)."""
    done = subprocess.run([sys.executable, "-m", "inspector", "run", model, "--device", "cpu", "--out", str(out)],
                          cwd=ROOT, capture_output=True, text=True, check=False)
    if log is not None:
        log.write_text(done.stderr)
    found: dict[str, float | None] = dict.fromkeys(("threads", "forward", "estimate", "first", "left"))
    stamps: dict[str, float] = {}
    finished = None
    for line in done.stderr.splitlines():
        stamp = STAMP.match(line)
        if stamp is None:
            continue
        phase, at, message = stamp.group(1), float(stamp.group(2)), stamp.group(3)
        if (match := FORWARD.search(message)) is not None:
            found["threads"], found["forward"] = float(match.group(1)), float(match.group(2))
        for key, pattern in (("estimate", ESTIMATE), ("first", FIRST), ("left", LEFT)):
            if found[key] is None and (match := pattern.search(message)) is not None:
                found[key], stamps[key] = seconds(match), at
        if phase == "done":
            finished = at
    for key, taken in (("estimate", "taken"), ("first", "after_first"), ("left", "rest")):
        found[taken] = finished - stamps[key] if finished is not None and key in stamps else None
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", default=DEFAULT)
    parser.add_argument("--busy", default="0,2", help="busy processes beside the runs, one pass per count (0,2)")
    parser.add_argument("--logs", type=Path, help="a folder for each run's stderr")
    args = parser.parse_args()
    if args.logs is not None:
        args.logs.mkdir(parents=True, exist_ok=True)
    print(f"# {os.cpu_count()} cores; trt-inspect run MODEL --device cpu (the CPU defaults), beside N busy processes")
    print("| model | busy | load before | threads | fp32 forward s | estimate s | taken s | taken / estimate "
          "| after variant 1: left s | taken s | ratio | after round 2: left s | taken s | load after |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as folder:
        for count in (int(value) for value in args.busy.split(",")):
            with busy(count, SETTLE_S):
                for model in args.models:
                    before = os.getloadavg()[0]
                    log = args.logs / f"{model}-busy{count}.log" if args.logs is not None else None
                    f = run(model, Path(folder) / f"{model}-busy{count}.json", log)
                    cells = [model, str(count), f"{before:.1f}", _s(f["threads"], 0), _s(f["forward"], 2),
                             _s(f["estimate"]), _s(f["taken"]), _ratio(f["taken"], f["estimate"]), _s(f["first"]),
                             _s(f["after_first"]), _ratio(f["after_first"], f["first"]), _s(f["left"]), _s(f["rest"]),
                             f"{os.getloadavg()[0]:.1f}"]
                    print("| " + " | ".join(cells) + " |", flush=True)


def _s(value: float | None, decimals: int = 1) -> str:
    return f"{value:.{decimals}f}" if value is not None else "-"


def _ratio(taken: float | None, estimate: float | None) -> str:
    return f"{taken / estimate:.2f}" if taken is not None and estimate else "-"


if __name__ == "__main__":
    main()
