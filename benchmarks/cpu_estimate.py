"""The CPU plan's time estimate against the time the study took, on small models, each at two background loads.

    python benchmarks/cpu_estimate.py [--busy 0,2] [--logs DIR] [MODEL ...] > benchmarks/results/cpu/estimate.txt

Each model runs as `trt-inspect run MODEL --device cpu` (the CPU defaults: `inspector.cpu_defaults.fit_cpu_plan` picks
threads, variants and counts and states "estimated ... from here"), from this checkout, in a fresh process, once per
count of `--busy` processes that this script keeps busy beside it (`cpu_load.busy`, started 30 s before the first model
of that count, so that the load average has risen when the plan reads it). From its progress lines on stderr (each
stamped with the seconds since the start): the estimate and when it was made, the time taken from then to the end of
the study ("saved ..." of the done step), their ratio (stated / taken); the headless time left after the first
variant (the whole study's) and after the second timing round (the first holds every variant's warm-up), each against
the time the study took after it (after round 2, where 0 s are left and the study took a fraction of a second, the
ratio says little).
The load average before and after each run is printed beside it: the host is shared, and other work changes its load
too. The last lines count the ratios within 30 %. `--logs DIR` keeps each run's stderr there, and beside it the
process's CPU seconds and the load average as each line arrived (`_watched`).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from cpu_load import busy

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = ["resnet18", "mobilenetv3_small_050", "regnety_002", "efficientnet_b0"]
SETTLE_S = 30.0
STAMP = re.compile(r"^trt-inspect: \[(\w+) ([\d.]+) s\] (.*)$")
ESTIMATE = re.compile(r"estimated (?:(\d+) min )?(\d+) s from here")
FORWARD = re.compile(r"(\d+) PyTorch threads?; one fp32 forward ([\d.]+) s(?:, at the (\d+)% of a core)?")
DURATION = r"(?:(\d+) min )?(\d+) s"
FIRST = re.compile(rf"1 of \d+ variants done; about {DURATION} left")
LEFT = re.compile(rf"round 2 of \d+; about {DURATION} left")
WITHIN = (0.7, 1.3)  # stated / taken: an estimate within 30 % of the time taken


def seconds(match: re.Match[str]) -> float:
    return 60 * int(match.group(1) or 0) + int(match.group(2))


def run(model: str, out: Path, log: Path | None) -> dict[str, float | None]:
    """The run's figures in seconds (threads a count, share a fraction), None where not found: `threads`, `forward`,
    `share` (of a core, where the plan states it), `estimate`,
    `taken` (after the estimate), `first` and `after_first` (the time left said after the first variant, and the time
    taken after it), `left` and `rest` (the same after the second timing round)."""
    stderr = _watched([sys.executable, "-m", "inspector", "run", model, "--device", "cpu", "--out", str(out)], log)
    found: dict[str, float | None] = dict.fromkeys(("threads", "forward", "share", "estimate", "first", "left"))
    stamps: dict[str, float] = {}
    finished = None
    for line in stderr.splitlines():
        stamp = STAMP.match(line)
        if stamp is None:
            continue
        phase, at, message = stamp.group(1), float(stamp.group(2)), stamp.group(3)
        if (match := FORWARD.search(message)) is not None:
            found["threads"], found["forward"] = float(match.group(1)), float(match.group(2))
            found["share"] = float(match.group(3)) / 100 if match.group(3) else None
        for key, pattern in (("estimate", ESTIMATE), ("first", FIRST), ("left", LEFT)):
            if found[key] is None and (match := pattern.search(message)) is not None:
                found[key], stamps[key] = seconds(match), at
        if phase == "done":
            finished = at
    for key, taken in (("estimate", "taken"), ("first", "after_first"), ("left", "rest")):
        found[taken] = finished - stamps[key] if finished is not None and key in stamps else None
    return found


def _watched(command: list[str], log: Path | None) -> str:
    """Run `command` from the checkout; its stderr. With `log`, the stderr goes there and, beside it
    (`LOG.cpu.tsv`), one row per stderr line: the seconds since the start, the process's CPU seconds so far (user and
    system, from /proc) and the 1-minute load average, read as the line arrives: what the study did with its share
    of the cores, phase by phase, apart from how long the load made it take."""
    started = time.monotonic()
    process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    assert process.stderr is not None
    lines: list[str] = []
    rows: list[str] = []
    for line in process.stderr:
        lines.append(line)
        rows.append(f"{time.monotonic() - started:.2f}\t{_cpu_s(process.pid):.2f}\t{os.getloadavg()[0]:.2f}\t"
                    f"{line.rstrip()[:100]}")
    process.wait()
    if log is not None:
        log.write_text("".join(lines))
        log.with_suffix(".cpu.tsv").write_text("wall_s\tcpu_s\tload_1min\tline\n" + "\n".join(rows) + "\n")
    return "".join(lines)


def _cpu_s(pid: int) -> float:
    """The CPU seconds (user and system) process `pid` has used so far; 0 where /proc cannot be read."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", default=DEFAULT)
    parser.add_argument("--busy", default="0,2", help="busy processes beside the runs, one pass per count (0,2)")
    parser.add_argument("--logs", type=Path, help="a folder for each run's stderr")
    args = parser.parse_args()
    if args.logs is not None:
        args.logs.mkdir(parents=True, exist_ok=True)
    print(f"# {os.cpu_count()} cores; trt-inspect run MODEL --device cpu (the CPU defaults), beside N busy processes")
    print("| model | busy | load before | threads | fp32 forward s | share | estimate s | taken s | estimate / taken "
          "| after variant 1: left s | taken s | ratio | after round 2: left s | taken s | load after |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    ratios: dict[str, list[str]] = {"first estimate": [], "after variant 1": [], "after round 2": []}
    with tempfile.TemporaryDirectory() as folder:
        for count in (int(value) for value in args.busy.split(",")):
            with busy(count, SETTLE_S):
                for model in args.models:
                    before = os.getloadavg()[0]
                    log = args.logs / f"{model}-busy{count}.log" if args.logs is not None else None
                    f = run(model, Path(folder) / f"{model}-busy{count}.json", log)
                    for kind, (taken, stated) in (("first estimate", ("taken", "estimate")),
                                                  ("after variant 1", ("after_first", "first")),
                                                  ("after round 2", ("rest", "left"))):
                        ratios[kind].append(_ratio(f[stated], f[taken]))
                    cells = [model, str(count), f"{before:.1f}", _s(f["threads"], 0), _s(f["forward"], 2),
                             _s(f["share"], 2), _s(f["estimate"]), _s(f["taken"]), ratios["first estimate"][-1],
                             _s(f["first"]), _s(f["after_first"]), ratios["after variant 1"][-1], _s(f["left"]),
                             _s(f["rest"]), f"{os.getloadavg()[0]:.1f}"]
                    print("| " + " | ".join(cells) + " |", flush=True)
    for kind, values in ratios.items():
        within = sum(WITHIN[0] <= float(value) <= WITHIN[1] for value in values if value != "-")
        print(f"{kind}: {within} of {len(values)} within 30 % of the time taken (stated / taken {', '.join(values)})")


def _s(value: float | None, decimals: int = 1) -> str:
    return f"{value:.{decimals}f}" if value is not None else "-"


def _ratio(stated: float | None, taken: float | None) -> str:
    """stated / taken; "-" where either is missing or 0 (a "0 s left" says no more than that the end is near)."""
    return f"{stated / taken:.2f}" if stated and taken else "-"


if __name__ == "__main__":
    main()
