"""How far apart are the times of one study run in separate processes, each holding a different amount of GPU memory
before the study allocates anything? The same study (one variant alone, with `-- --variants NAME`) run in a fresh
process per entry of --pads, each process first holding PAD MiB of GPU memory for its whole run; then each variant's
median and band per run, and how many pairs of runs differ beyond their bands (`sessions.analyses.noise.judge`, the
diff's rule), counted apart for runs at the same pad and at different pads.

    python benchmarks/placement_shift.py MODEL [--pads 0,0,2,4,8,16,32,64] [--out DIR] [-- RUN OPTIONS ...]
    python benchmarks/placement_shift.py --judge --out DIR     (the sessions a run left in DIR, or in a .tar.gz of
                                                                them, judged again)

Where the runs differ beyond their bands, one process's band does not hold what varies between processes, and rows
of two studies (a variant alone and in a whole study, each in its own process) can differ by that much with nothing
else changed. Whether the pad decides it shows as runs at the same pad agreeing (a pad repeated: 0 twice by default)
and runs at different pads not. Prints one table row per run and the counts per variant; writes the sessions
(pad-PAD-N.json) to DIR, the progress to standard error.
"""

from __future__ import annotations

import itertools
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this checkout's code, as the runs it starts

from benchmarks.session_rounds import sessions_at
from benchmarks.study_runs import band_cell, parse_runs_args, runs_parser
from sessions.analyses.noise import WITHIN, Band, judge, latency_band

# What each run's process executes (`python -c`): {pad} MiB held on the GPU to its end, then the CLI on its arguments
PADDED_CLI_SOURCE = """
import sys, torch
pad = torch.empty({pad} << 20, dtype=torch.uint8, device="cuda") if {pad} else None  # held to the end
from inspector.cli import main
sys.exit(main(sys.argv[1:]))
"""


def run_padded(pad_mib: int, model: str, options: list[str], out: Path) -> float:
    """One `trt-inspect run` in a fresh process holding `pad_mib` MiB of GPU memory first; its wall seconds (it must
    exit 0)."""
    start = time.monotonic()
    source = PADDED_CLI_SOURCE.format(pad=pad_mib)
    subprocess.run([sys.executable, "-c", source, "run", model, *options, "--out", str(out), "--force"], check=True,
                   cwd=ROOT, stdout=subprocess.DEVNULL)
    return time.monotonic() - start


def measure(model: str, options: list[str], out: Path, pads: list[int]) -> None:
    """The runs, one per pad in the order given; sessions written to `out` as pad-PAD-N.json (N counts repeats)."""
    seen: dict[int, int] = {}
    for pad in pads:
        seen[pad] = seen.get(pad, 0) + 1
        path = out / f"pad-{pad}-{seen[pad]}.json"
        seconds = run_padded(pad, model, options, path)
        print(f"# pad {pad} MiB, run {seen[pad]}: {seconds:.0f} s", file=sys.stderr, flush=True)


def runs_in(out: Path) -> list[tuple[int, int, dict[str, Band]]]:
    """The sessions in `out` (a folder, or a .tar.gz of them) as (pad MiB, run, each variant's latency band), by pad
    then run."""
    pattern = re.compile(r"pad-(\d+)-(\d+)\.json")
    sources = [out] if out.name.endswith(".tar.gz") else sorted(out.glob("pad-*.json"))
    found = []
    for path, session in (each for source in sources for each in sessions_at(source)):
        if (m := pattern.fullmatch(path.name)) is not None:
            bands = {v.name: band for v in session.variants
                     if v.latency is not None and (band := latency_band(v.latency)) is not None}
            found.append((int(m.group(1)), int(m.group(2)), bands))
    return sorted(found, key=lambda run: run[:2])


def judged(out: Path) -> None:
    """Prints each variant's median and band per run, then per variant: the spread of the medians and how many
    pairs of runs differ beyond their bands, at the same pad and at different pads."""
    runs = runs_in(out)
    if not runs:
        raise SystemExit(f"placement_shift: no pad-PAD-N.json in {out}")
    names = list(runs[0][2])
    print("| pad MiB | run | " + " | ".join(f"{name} ms [band]" for name in names) + " |")
    print("|---:|---:|" + "---|" * len(names))
    for pad, index, found in runs:
        print(f"| {pad} | {index} | " + " | ".join(band_cell(found[name]) if name in found else "-" for name in names)
              + " |")
    for name in names:
        measured = [(pad, found[name]) for pad, _, found in runs if name in found]
        medians = [band.center_ms for _, band in measured]
        pairs = {True: [0, 0], False: [0, 0]}  # same pad or not -> [pairs, pairs that differ]
        for (pad_a, a), (pad_b, b) in itertools.combinations(measured, 2):
            tally = pairs[pad_a == pad_b]
            tally[0] += 1
            tally[1] += judge(a, b) != WITHIN
        print(f"{name}: medians {min(medians):.4f}-{max(medians):.4f} ms ({(max(medians) / min(medians) - 1) * 100:.2f}"
              f" % apart) over {len(measured)} runs; pairs that differ beyond their bands: {pairs[True][1]} of "
              f"{pairs[True][0]} at the same pad, {pairs[False][1]} of {pairs[False][0]} at different pads")


def main() -> int:
    parser = runs_parser(__doc__.split("\n\n")[0], "placement-shift")
    parser.add_argument("--pads", default="0,0,2,4,8,16,32,64",
                        help="MiB of GPU memory held before each run, comma-separated (default 0,0,2,4,8,16,32,64)")
    args, options = parse_runs_args(parser, sys.argv[1:])
    if not args.judge:
        try:
            pads = [int(pad) for pad in args.pads.split(",")]
        except ValueError:
            pads = []
        if not pads or min(pads) < 0:
            parser.error(f"--pads takes whole MiB from 0 up, comma-separated: {args.pads!r}")
        args.out.mkdir(parents=True, exist_ok=True)
        measure(args.model, options, args.out, pads)
    judged(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
