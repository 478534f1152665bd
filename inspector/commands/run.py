"""`trt-inspect run MODEL`: a study headless, its session saved."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from inspector.commands.output import check_out, run_headless
from inspector.options import add_arguments
from sessions.documents.options import RUN

NAME = "run"
BUILDS_MODELS = True  # the CLI checks the torch / torchvision pair before it runs
RUNS_A_STUDY = True  # the CLI holds the garbage collector until the study is set up (`inspector.process`)


def add_parser(sub: Any) -> None:
    add_study_options(sub.add_parser(NAME, help="run a study headless and save its session"))


def add_study_options(p: argparse.ArgumentParser) -> None:
    add_arguments(p, RUN)
    p.add_argument("--force", action="store_true", help="replace the session at --out (when the study is done)")
    p.add_argument("--json", action="store_true", help="print a JSON summary on stdout")


def study_request(args: argparse.Namespace, command: Sequence[str]) -> Any:
    """The `inspector.request.StudyRequest` the parsed `run` arguments ask for, `command` recorded with it."""
    from inspector.request import StudyRequest

    fields = StudyRequest.__dataclass_fields__
    values: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v  # a repeatable option's list
                              for k, v in vars(args).items() if k in fields and k != "command"}
    return StudyRequest(**values, command=tuple(command))


def run(args: argparse.Namespace) -> int:
    check_out(args.out, "session", args.force)  # before the set-up: a model may take a minute to load
    request = study_request(args, args.argv)
    from inspector.study import run_requested_study

    return run_headless(lambda report: run_requested_study(request, report, args.force), args.json)[0]
