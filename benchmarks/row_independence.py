"""Is a variant's time independent of the variants beside it? Each variant of a study timed alone and in the
whole study, every run the CLI in a fresh process, then each variant's median alone against together, judged by
the diff's own noise rule (`sessions.analyses.noise`: a difference only where the two latency bands do not overlap).

    python benchmarks/row_independence.py MODEL [--repeat 2] [--out DIR] [-- RUN OPTIONS ...]

The variants are the ones the whole study (`trt-inspect run MODEL RUN OPTIONS`) measures, the main job's defaults
unless RUN OPTIONS name others; each is then run alone as `--variants NAME` (its backend's prefix kept). Runs
alternate (together, each alone, together ...) `--repeat` times, so a drift of the machine shows as a difference
between the two "together" runs rather than as a difference between alone and together. Prints one table row per
variant and a last line with the count of variants that moved beyond their bands; writes the sessions to DIR.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this checkout's code, as the runs it starts

from sessions.analyses.noise import WITHIN, Band, judge, latency_band
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


def cell(band: Band) -> str:
    return f"{band.center_ms:.4f} [{band.low_ms:.4f}, {band.high_ms:.4f}]"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model")
    parser.add_argument("--repeat", type=int, default=2, help="alternations of together / each alone (default 2)")
    parser.add_argument("--out", type=Path, default=Path("row-independence"))
    argv = sys.argv[1:]
    split = argv.index("--") if "--" in argv else len(argv)
    args, options = parser.parse_args(argv[:split]), argv[split + 1:]  # after --: options for every run
    args.out.mkdir(parents=True, exist_ok=True)
    together: list[dict[str, Band]] = []
    alone: dict[str, list[Band]] = {}
    for repeat in range(1, args.repeat + 1):
        path = args.out / f"together-{repeat}.json"
        seconds = run_study(args.model, options, path)
        together.append(bands(path))
        print(f"# together {repeat}: {len(together[-1])} variants, {seconds:.0f} s", flush=True)
        for name in together[0]:
            path = args.out / f"alone-{name}-{repeat}.json"
            seconds = run_study(args.model, [*alone_options(options), "--variants", name], path)
            alone.setdefault(name, []).extend(bands(path).values())
            print(f"# {name} alone {repeat}: {seconds:.0f} s", flush=True)
    print(f"| variant | {' | '.join(f'together {i + 1} ms [band]' for i in range(len(together)))} "
          f"| {' | '.join(f'alone {i + 1} ms [band]' for i in range(args.repeat))} | alone against together |")
    print(f"|---|{'---|' * (len(together) + args.repeat)}---|")
    moved = 0
    for name in together[0]:
        bands_together = [run[name] for run in together if name in run]
        bands_alone = alone.get(name, [])
        differs = [judge(t, a) for a in bands_alone for t in bands_together if judge(t, a) != WITHIN]
        moved += bool(differs)
        print(f"| {name} | {' | '.join(cell(b) for b in bands_together)} | {' | '.join(cell(b) for b in bands_alone)}"
              f" | {', '.join(sorted(set(differs))) or WITHIN} |")
    print(f"variants whose time alone differs from their time in the study: {moved} of {len(together[0])}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
