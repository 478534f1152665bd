"""`trt-inspect merge SOURCES... --out FILE`: sessions (files, folders, sweeps) joined into one comparison."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from inspector.commands.output import check_out, err, print_session
from sessions.documents.errors import ExitCode

NAME = "merge"


def add_parser(sub: Any) -> None:
    p = sub.add_parser(NAME, help="join sessions (files, folders, sweeps) into one comparison keyed by their axes")
    p.add_argument("sources", nargs="+", metavar="SESSION_OR_DIR")
    p.add_argument("--out", required=True, help="the merged session file (never one of the sources)")
    p.add_argument("--force", action="store_true", help="replace the session at --out")
    p.add_argument("--json", action="store_true")


def run(args: argparse.Namespace) -> int:
    from sessions.analyses.merge import collect, merge_sessions
    from sessions.documents.storage import LOCK_WAIT_S, session_writer

    target = Path(args.out)
    sources, skipped = collect(args.sources, target)  # first: a source named as --out is refused as such
    check_out(args.out, "session", args.force, LOCK_WAIT_S)
    for line in skipped:
        err(f"skipped: {line}")
    merged = merge_sessions(sources, args.argv)
    with session_writer(target, args.force, LOCK_WAIT_S) as writer:
        writer.finish(merged)
    print_session(merged, target, args.json)
    return ExitCode.OK
