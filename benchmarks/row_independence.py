"""Is a variant's time independent of the variants beside it? Each variant of a study timed alone and in the
whole study, every run the CLI in a fresh process, then each variant's median alone against together, judged by
the diff's own noise rule (`sessions.analyses.noise`: a difference only where the two latency bands do not overlap).

    python benchmarks/row_independence.py MODEL [--repeat 2] [--out DIR] [-- RUN OPTIONS ...]
    python benchmarks/row_independence.py --judge --out DIR     (the sessions a run left in DIR, judged again)

The variants are the ones the whole study (`trt-inspect run MODEL RUN OPTIONS`) measures, the main job's defaults
unless RUN OPTIONS name others; each is then run alone as `--variants NAME` (its backend's prefix kept). Runs
alternate (together, each alone, together ...) `--repeat` times, so a drift of the machine shows as a difference
between the two "together" runs rather than as a difference between alone and together. A variant's band on each
side is the hull of its runs' bands (`hull`): one process's band holds its own rounds' drift and its median's
interval, but not what differs between processes (the graph's memory, the tactics a build chose), which only runs
in separate processes show. Each row is judged twice: on those hulls, and as `diff` judges two sessions' latencies,
each run together against each run alone on their bands widened for another process (`apart_as_diff`). Prints one
table row per variant and a last line with the count of variants that moved beyond their bands each way; writes the
sessions to DIR, the progress to standard error.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this checkout's code, as the runs it starts

from benchmarks.study_runs import band_cell, parse_runs_args, runs_parser
from sessions.analyses.noise import WITHIN, Band, across_processes, judge, latency_band, median
from sessions.documents.storage import load


def run_study(model: str, options: list[str], out: Path) -> float:
    """One `trt-inspect run` in a fresh process; the wall seconds it took (it must exit 0)."""
    start = time.monotonic()
    subprocess.run([sys.executable, "-m", "inspector", "run", model, *options, "--out", str(out), "--force"],
                   check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
    return time.monotonic() - start


def bands(path: Path) -> dict[str, Band]:
    """Each measured variant's latency band in the session at `path`."""
    found = {}
    for variant in load(path).variants:
        band = latency_band(variant.latency) if variant.latency is not None else None
        if band is not None:
            found[variant.name] = band
    return found


def alone_options(options: list[str]) -> list[str]:
    """RUN OPTIONS less any --variants (each alone run names its own)."""
    kept, skip = [], False
    for option in options:
        if skip:
            skip = False
        elif option == "--variants":
            skip = True
        elif not option.startswith("--variants="):
            kept.append(option)
    return kept


def hull(bands: list[Band]) -> Band:
    """Where a run of one configuration lands, as its runs in separate processes show: from the lowest of their
    bands to the highest, centred on the median of their medians."""
    return Band(median([band.center_ms for band in bands]), min(band.low_ms for band in bands),
                max(band.high_ms for band in bands), f"hull of {len(bands)} runs' bands")


def apart_as_diff(together: list[Band], alone: list[Band]) -> int:
    """Of the pairs (a run together, a run alone), how many `diff` of their two sessions would call faster or
    slower: each band widened for another process (`across_processes`), then `judge`."""
    return sum(judge(across_processes(t), across_processes(a)) != WITHIN for t in together for a in alone)


def measure(model: str, options: list[str], out: Path, repeat: int) -> None:
    """The runs, alternating together / each alone `repeat` times; sessions written to `out`."""
    for index in range(1, repeat + 1):
        path = out / f"together-{index}.json"
        seconds = run_study(model, options, path)
        names = list(bands(path))
        print(f"# together {index}: {len(names)} variants, {seconds:.0f} s", file=sys.stderr, flush=True)
        for name in names:
            path = out / f"alone-{name}-{index}.json"
            seconds = run_study(model, [*alone_options(options), "--variants", name], path)
            print(f"# {name} alone {index}: {seconds:.0f} s", file=sys.stderr, flush=True)


def alone_runs(out: Path, name: str) -> list[Path]:
    """The sessions of variant `name` run alone in `out` (alone-NAME-N.json), by N; never another variant's whose
    name starts with NAME."""
    pattern = re.compile(rf"alone-{re.escape(name)}-(\d+)\.json")
    found = [(int(m.group(1)), path) for path in out.glob("alone-*.json") if (m := pattern.fullmatch(path.name))]
    return [path for _, path in sorted(found)]


def judged(out: Path) -> int:
    """Prints the table of the sessions in `out` (together-N.json, alone-NAME-N.json); returns how many variants'
    time alone differs from their time together."""
    together = [bands(path) for path in sorted(out.glob("together-*.json"))]
    if not together:
        raise SystemExit(f"row_independence: no together-N.json in {out}")
    names = list(together[0])
    alone = {name: [band for path in alone_runs(out, name) for band in bands(path).values()] for name in names}
    runs = max(len(found) for found in alone.values())
    print(f"| variant | {' | '.join(f'together {i + 1} ms [band]' for i in range(len(together)))} "
          f"| {' | '.join(f'alone {i + 1} ms [band]' for i in range(runs))} | alone / together | judged "
          "| pairs diff calls apart |")
    print(f"|---|{'---|' * (len(together) + runs)}---|---|---|")
    moved = moved_across = 0
    for name in names:
        bands_together = [run[name] for run in together if name in run]
        bands_alone = alone[name]
        verdict = judge(hull(bands_together), hull(bands_alone)) if bands_alone else "not run alone"
        apart = apart_as_diff(bands_together, bands_alone)
        moved += verdict not in (WITHIN, "not run alone")
        moved_across += apart > 0
        ratio = hull(bands_alone).center_ms / hull(bands_together).center_ms if bands_alone else float("nan")
        cells = [band_cell(b) for b in [*bands_together, *bands_alone]]
        pairs = f"{apart} of {len(bands_together) * len(bands_alone)}" if bands_alone else "not run alone"
        print(f"| {name} | {' | '.join(cells)} | {ratio:.4f} | {verdict} | {pairs} |")
    print(f"variants whose time alone differs from their time in the study: {moved} of {len(names)} (each side's band"
          f" the hull of its runs' bands, {len(together)} together and {runs} alone); {moved_across} of {len(names)}"
          " with a pair of sessions diff calls apart")
    return moved


def main() -> int:
    parser = runs_parser(__doc__.split("\n\n")[0], "row-independence")
    parser.add_argument("--repeat", type=int, default=2, help="alternations of together / each alone (default 2)")
    args, options = parse_runs_args(parser, sys.argv[1:])
    if not args.judge:
        args.out.mkdir(parents=True, exist_ok=True)
        measure(args.model, options, args.out, args.repeat)
    judged(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
