"""`trt-inspect diff A B`: two sessions compared; exit 1 on a regression past the threshold."""

from __future__ import annotations

import argparse
from typing import Any

from inspector.commands.output import print_json, rules
from sessions.documents.errors import ExitCode, InputError
from sessions.reports.tables import terminal_text

NAME = "diff"


def add_parser(sub: Any) -> None:
    p = sub.add_parser(NAME, help="compare two sessions; exit 1 on a regression past the threshold")
    p.add_argument("a", help="the older session (baseline)")
    p.add_argument("b", help="the newer session")
    p.add_argument("--threshold", default="5%", help="relative change that counts: 5%% or 0.05 (default 5%%)")
    p.add_argument("--format", default="text", choices=["text", "md", "json"])
    p.add_argument("--groups", dest="rules", help="TOML file of extra grouping rules")
    p.add_argument("--pair", action="append", default=[], metavar="A=B",
                   help="compare variant A of the first session with variant B of the second (repeatable)")


def threshold(text: str) -> float:
    """`5%` or `0.05`; a bare number of 1 or more (`10`: 10 % or 1000 %?) is refused as ambiguous."""
    import math

    percent = text.strip().endswith("%")
    try:
        value = float(text.strip()[:-1]) / 100 if percent else float(text)
    except ValueError:
        raise InputError(f"--threshold {text!r}: give a percentage such as 5% or a fraction such as 0.05") from None
    if not math.isfinite(value) or value < 0:
        raise InputError(f"--threshold {text!r}: must be a finite, non-negative change such as 5% or 0.05")
    if not percent and value >= 1:
        raise InputError(f"--threshold {text}: ambiguous (a fraction of {text}, or {text} %?); "
                         f"write {text}% or a fraction below 1")
    return value


def _pairs(texts: list[str]) -> list[tuple[str, str]]:
    pairs = []
    for text in texts:
        left, sep, right = text.partition("=")
        if not sep or not left or not right:
            raise InputError(f"--pair {text!r}: write VARIANT_A=VARIANT_B")
        pairs.append((left, right))
    return pairs


def print_diff(diff: Any, fmt: str) -> int:
    """The diff as text, Markdown or JSON; the exit code says whether it holds a regression."""
    from sessions.reports.diff_report import diff_document, diff_text

    if fmt == "json":
        print_json(diff_document(diff))
    else:
        print(terminal_text(diff_text(diff, markdown=fmt == "md"), keep_lines=True))
    return ExitCode.FAILURE if diff.regressions else ExitCode.OK


def run(args: argparse.Namespace) -> int:
    from sessions.analyses.diff import diff_sessions
    from sessions.documents.storage import load, resolve

    change = threshold(args.threshold)
    path_a, path_b = resolve(args.a), resolve(args.b)
    diff = diff_sessions(load(path_a), load(path_b), rules(args.rules), change, str(path_a), str(path_b),
                         _pairs(args.pair))
    return print_diff(diff, args.format)
