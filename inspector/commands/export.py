"""`trt-inspect export SESSION...`: a session in one of the export formats (`sessions.reports.exporters`): README-ready
Markdown, CSV or JSON; the study section or the matrix tables of several."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from inspector.commands.output import err, rules
from sessions.documents.errors import ExitCode, InputError, InspectError
from sessions.reports.tables import terminal_text

NAME = "export"


def add_parser(sub: Any) -> None:
    from sessions.reports.exporters import exporters

    formats = list(exporters())
    p = sub.add_parser(NAME, help="a session as README-ready Markdown, or CSV / JSON; the study section of several")
    p.add_argument("session", nargs="+", help="one session; several for --format study")
    p.add_argument("--format", default=formats[0], choices=formats,
                   help="; ".join(f"{e.name}: {e.help}" for e in exporters().values() if e.help))
    p.add_argument("--sections", help="comma list of comparison,quality,groups,method,environment,recipe,rerun; "
                   "with --format csv or json, `layers`: every layer with tactic, formats, reformats and precision")
    p.add_argument("--groups", dest="rules", help="TOML file of extra grouping rules")
    p.add_argument("-o", "--output", help="write here instead of stdout (refuses to overwrite without --force)")
    p.add_argument("--force", action="store_true")


def run(args: argparse.Namespace) -> int:
    from sessions.documents.storage import load, resolve
    from sessions.reports.exporters import ExportRequest, exporter

    chosen = exporter(args.format)
    paths = [resolve(name) for name in args.session]
    if not chosen.many and len(paths) > 1:
        raise InputError(f"--format {args.format} takes one session; --format study takes several")
    sources = [(str(path), load(path)) for path in paths]
    text = chosen.render(ExportRequest(sources, lambda: rules(args.rules), args.sections))
    return _write_export(text, args.output, args.force)


def _write_export(text: str, output: str | None, force: bool) -> int:
    from sessions.reports.tables import markdown_table_problems

    problems = markdown_table_problems(text)
    if problems:
        raise InspectError(f"export made a malformed table ({problems[0]}); nothing written")
    if output:
        from sessions.reports.export import write_export

        write_export(Path(output), text, force)
        err(f"wrote {output}")
    else:
        sys.stdout.write(terminal_text(text, keep_lines=True))
    return ExitCode.OK
