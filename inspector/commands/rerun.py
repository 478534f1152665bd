"""`trt-inspect rerun SESSION`: a study repeated with its recorded plan, then diffed against it."""

from __future__ import annotations

import argparse
from typing import Any

from inspector.commands.diff import print_diff, threshold
from inspector.commands.output import check_out, rules, run_headless
from sessions.documents.errors import InputError

NAME = "rerun"
BUILDS_MODELS = True  # the CLI checks the torch / torchvision pair before it runs
RUNS_A_STUDY = True  # the CLI holds the garbage collector until the study is set up (`inspector.process`)


def add_parser(sub: Any) -> None:
    p = sub.add_parser(NAME, help="repeat a study with its recorded plan, then diff against it")
    p.add_argument("session")
    p.add_argument("--out", help="session file for the new run")
    p.add_argument("--force", action="store_true", help="replace the session at --out (when the study is done)")
    p.add_argument("--threshold", default="5%")


def run(args: argparse.Namespace) -> int:
    import dataclasses

    from inspector.study import run_study
    from sessions.analyses.diff import diff_sessions
    from sessions.documents.storage import load, resolve

    change = threshold(args.threshold)
    check_out(args.out, "session", args.force)
    path = resolve(args.session)
    old = load(path)
    if old.study.plan is None:
        raise InputError(f"{path} records no study plan (imported files cannot be rerun)")
    plan = dataclasses.replace(old.study.plan, out=args.out, raw_trace=None)
    code, new, new_path = run_headless(lambda report: run_study(plan, old.study.command, report, args.force), False)
    if new is None:
        return code
    print()
    return print_diff(diff_sessions(old, new, rules(None), change, str(path), str(new_path)), "text")
