"""`trt-inspect sessions`: the saved sessions, one line each."""

from __future__ import annotations

import argparse
from typing import Any

from inspector.commands.output import err, print_json
from sessions.documents.errors import ExitCode

NAME = "sessions"


def add_parser(sub: Any) -> None:
    p = sub.add_parser(NAME, help="list saved sessions")
    p.add_argument("--json", action="store_true")


def run(args: argparse.Namespace) -> int:
    from sessions.documents.paths import sessions_dir
    from sessions.documents.storage import list_sessions
    from sessions.reports.tables import render_text

    entries, problems = list_sessions()
    for problem in problems:
        err(f"skipped: {problem}")
    if args.json:
        print_json([{**e.__dict__, "path": str(e.path)} for e in entries])
        return ExitCode.OK
    if not entries:
        err(f"no sessions in {sessions_dir()}")
        return ExitCode.OK
    rows = [[e.path.name, e.model, e.created, e.gpu, f"{e.backend}/{e.device}", ",".join(e.variants)] for e in entries]
    print(render_text(["session", "model", "created", "GPU / CPU", "backend", "variants"], rows))
    return ExitCode.OK
