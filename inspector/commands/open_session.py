"""`trt-inspect open [SESSION]`: a saved session (or the session browser) in the TUI."""

from __future__ import annotations

import argparse
from typing import Any

from inspector.commands.output import interactive
from sessions.documents.errors import InputError

NAME = "open"


def add_parser(sub: Any) -> None:
    p = sub.add_parser(NAME, help="open a saved session in the TUI")
    p.add_argument("session", nargs="?", help="session file or name (default: the session browser)")


def run(args: argparse.Namespace) -> int:
    from inspector.tui import open_tui

    if not interactive():
        from sessions.documents.storage import load, resolve

        if args.session:
            load(resolve(args.session))  # a bad file is still named as such
        raise InputError("open needs a terminal; without one use `show`, `groups` or `export`")
    return open_tui(session=args.session)
