"""The CPU plan's time estimate against the time the study took, on small models, under whatever load the host has.

    python benchmarks/cpu_estimate.py [MODEL ...] > benchmarks/results/cpu/estimate.txt

Each model runs as `trt-inspect run MODEL --device cpu` (the CPU defaults: `inspector.cpu_defaults.fit_cpu_plan` picks
threads, variants and counts and states "estimated ... from here"), from this checkout, in a fresh process. From its
progress lines on stderr (each stamped with the seconds since the start): the estimate and when it was made, the time
taken from then to the end of the study ("saved ..." of the done step), their ratio; and the headless estimate after
the second timing round ("about N s left"; the first holds every variant's warm-up) against the time the rounds
after it took. The load average before and
after each run is printed beside it: the host is shared.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = ["resnet18", "mobilenetv3_small_050", "regnety_002", "efficientnet_b0"]
STAMP = re.compile(r"^trt-inspect: \[(\w+) ([\d.]+) s\] (.*)$")
ESTIMATE = re.compile(r"estimated (?:(\d+) min )?(\d+) s from here")
FORWARD = re.compile(r"one fp32 forward ([\d.]+) s")
LEFT = re.compile(r"round 2 of \d+; about (?:(\d+) min )?(\d+) s left")  # round 1 holds every warm-up


def seconds(match: re.Match[str]) -> float:
    return 60 * int(match.group(1) or 0) + int(match.group(2))


def run(model: str, out: Path) -> tuple[float | None, ...]:
    """(the measured fp32 forward, estimate, taken, headless estimate after round 2, taken after round 2) in seconds;
    None where not found."""
    done = subprocess.run([sys.executable, "-m", "inspector", "run", model, "--device", "cpu", "--out", str(out)],
                          cwd=ROOT, capture_output=True, text=True, check=False)
    forward = estimate = made = finished = left = after_round = None
    for line in done.stderr.splitlines():
        stamp = STAMP.match(line)
        if stamp is None:
            continue
        phase, at, message = stamp.group(1), float(stamp.group(2)), stamp.group(3)
        if (found := FORWARD.search(message)) is not None:
            forward = float(found.group(1))
        if (found := ESTIMATE.search(message)) is not None:
            estimate, made = seconds(found), at
        if (found := LEFT.search(message)) is not None:
            left, after_round = seconds(found), at
        if phase == "done":
            finished = at
    taken = finished - made if finished is not None and made is not None else None
    rest = finished - after_round if finished is not None and after_round is not None else None
    return forward, estimate, taken, left, rest


def main(models: list[str]) -> None:
    print(f"# {os.cpu_count()} cores; trt-inspect run MODEL --device cpu (the CPU defaults)")
    print("| model | load before | fp32 forward s | estimate s | taken s | taken / estimate | after round 2: estimate s "
          "| taken s | load after |")
    print("|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as folder:
        for model in models:
            before = os.getloadavg()[0]
            forward, estimate, taken, left, rest = run(model, Path(folder) / f"{model}.json")
            ratio = f"{taken / estimate:.2f}" if estimate and taken is not None else "-"
            cells = [model, f"{before:.1f}", _s(forward, 2), _s(estimate), _s(taken), ratio, _s(left), _s(rest),
                     f"{os.getloadavg()[0]:.1f}"]
            print("| " + " | ".join(cells) + " |", flush=True)


def _s(value: float | None, decimals: int = 1) -> str:
    return f"{value:.{decimals}f}" if value is not None else "-"


if __name__ == "__main__":
    main(sys.argv[1:] or DEFAULT)
