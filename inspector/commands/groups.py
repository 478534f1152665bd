"""`trt-inspect groups SESSION`: per-group kernels and time per variant, and flagged layers."""

from __future__ import annotations

import argparse
from typing import Any

from inspector.commands.output import print_json, rules
from sessions.documents.errors import ExitCode
from sessions.reports.tables import terminal_text

NAME = "groups"


def add_parser(sub: Any) -> None:
    p = sub.add_parser(NAME, help="per-group kernels and time per variant, and flagged layers")
    p.add_argument("session")
    p.add_argument("--variant", action="append", dest="variants", help="only these variants (repeatable)")
    p.add_argument("--by", default="role", choices=["role", "stage", "kernel"])
    p.add_argument("--groups", dest="rules", help="TOML file of extra grouping rules (tried before the built-in ones)")
    p.add_argument("--json", action="store_true")


def run(args: argparse.Namespace) -> int:
    from sessions.documents.storage import load, resolve
    from sessions.reports.group_report import group_document, group_text

    session = load(resolve(args.session))
    for name in args.variants or []:
        session.variant(name)  # unknown names fail here, with the known ones listed
    grouping = rules(args.rules)
    if args.json:
        print_json(group_document(session, args.by, grouping, args.variants))
    else:
        print(terminal_text(group_text(session, args.by, grouping, args.variants), keep_lines=True))
    return ExitCode.OK
