"""`trt-inspect show SESSION`: a session's variant table, or with --layers every layer in full."""

from __future__ import annotations

import argparse
from typing import Any

from inspector.commands.output import print_json, print_session
from sessions.documents.errors import ExitCode
from sessions.reports.tables import terminal_text

NAME = "show"


def add_parser(sub: Any) -> None:
    p = sub.add_parser(NAME, help="print a session's variant table, or with --layers every layer in full")
    p.add_argument("session")
    p.add_argument("--json", action="store_true")
    p.add_argument("--layers", action="store_true",
                   help="every layer: tactic, input / output formats and dtypes, reformats, precision as run and "
                        "as asked, and for a layer asked for in FP8 what it ran (fp8, fp16 by timing, fp16 refused) "
                        "and why")
    p.add_argument("--variant", action="append", dest="variants",
                   help="with --layers: only these variants (repeatable)")


def run(args: argparse.Namespace) -> int:
    from sessions.documents.storage import load, resolve

    path = resolve(args.session)
    session = load(path)
    if args.layers:
        _print_layers(session, path, args.variants, args.json)
    else:
        print_session(session, path, args.json)
    return ExitCode.OK


def _print_layers(session: Any, path: Any, names: list[str] | None, as_json: bool) -> None:
    from sessions.reports.layer_detail import layer_detail_table, layers_document
    from sessions.reports.tables import table_text

    if as_json:
        print_json(layers_document(session, str(path), names))
        return
    for variant in [session.variant(name) for name in names] if names else session.variants:
        table = layer_detail_table(variant)
        print(terminal_text(table.title))
        print(table_text(table))
