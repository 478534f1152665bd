"""The command line and the cells shared by the benchmarks that run studies of one model in fresh processes and
judge the sessions they leave (`row_independence.py`, `placement_shift.py`): MODEL, --out DIR, --judge, and after
`--` the RUN OPTIONS every `trt-inspect run` gets."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from sessions.analyses.noise import Band


def runs_parser(description: str, default_out: str) -> argparse.ArgumentParser:
    """MODEL (not needed with --judge), --out DIR (default `default_out`) and --judge (the sessions already in --out
    judged again, nothing run); the caller adds its own options, then `parse_runs_args`."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("model", nargs="?", help="the model to run (not needed with --judge)")
    parser.add_argument("--out", type=Path, default=Path(default_out))
    parser.add_argument("--judge", action="store_true", help="judge the sessions already in --out; run nothing")
    return parser


def parse_runs_args(parser: argparse.ArgumentParser, argv: Sequence[str]) -> tuple[argparse.Namespace, list[str]]:
    """`argv` split at `--`: the arguments before it, parsed by `parser` (a model required unless --judge; --out made
    absolute, as the runs start in the checkout's root whatever the caller's folder), and the RUN OPTIONS after it."""
    argv = list(argv)
    split = argv.index("--") if "--" in argv else len(argv)
    args = parser.parse_args(argv[:split])
    if not args.judge and args.model is None:
        parser.error("a model is needed unless --judge")
    args.out = args.out.resolve()
    return args, argv[split + 1:]


def band_cell(band: Band) -> str:
    """A latency band as a table cell: `median [low, high]` in ms."""
    return f"{band.center_ms:.4f} [{band.low_ms:.4f}, {band.high_ms:.4f}]"
