"""`trt-inspect export SESSION...`: a session in one of the export formats (`sessions.reports.exporters`): README-ready
Markdown, CSV or JSON; the study section or the matrix tables of several."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from inspector.commands.output import check_out, err, rules
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
    p.add_argument("--sections", help="comma list of comparison,quality,groups,roofline,method,environment,recipe,"
                   "rerun; with --format csv or json, `layers`: every layer with tactic, formats, reformats and "
                   "precision; `roofline`: every layer's FLOPs, bytes, achieved TFLOP/s and GB/s and bound")
    p.add_argument("--groups", dest="rules", help="TOML file of extra grouping rules")
    p.add_argument("-o", "--output", help="write here instead of stdout (refuses to overwrite without --force)")
    p.add_argument("--force", action="store_true")


def run(args: argparse.Namespace) -> int:
    from sessions.documents.storage import load, resolve
    from sessions.reports.exporters import ExportRequest, exporter

    chosen = exporter(args.format)
    if args.output is not None:
        if args.output and not Path(args.output).parent.is_dir():  # an export goes into a folder that exists
            raise InputError(f"cannot write {args.output}: no folder {Path(args.output).parent}")
        check_out(args.output, "export", args.force)
    paths = [resolve(name) for name in args.session]
    if not chosen.many and len(paths) > 1:
        raise InputError(f"--format {args.format} takes one session; --format study takes several")
    if args.output is not None:
        _check_not_a_source(Path(args.output), paths)
    sources = [(str(path), load(path)) for path in paths]
    text = chosen.render(ExportRequest(sources, lambda: rules(args.rules), args.sections))
    return _write_export(text, args.output, args.force)


def _check_not_a_source(target: Path, sources: list[Path]) -> None:
    """An export never replaces a session it reads (`export S -o S --force`), by any name or link to it."""
    for source in sources:
        if target.exists() and os.path.samefile(target, source):
            raise InputError(f"{target} is the session being exported; give another -o")


def _write_export(text: str, output: str | None, force: bool) -> int:
    """`text` in the file `output` through the one writer (`sessions.documents.storage.file_writer`), or on stdout
    escaped for the terminal (`stdout_text`)."""
    from sessions.reports.tables import markdown_table_problems

    problems = markdown_table_problems(text)
    if problems:
        raise InspectError(f"export made a malformed table ({problems[0]}); nothing written")
    if output is not None:
        from sessions.documents.storage import file_writer

        with file_writer(Path(output), "export", force) as writer:
            try:
                writer.write(text.encode())
            except InspectError as exc:  # a full disk: the target given is unusable (exit 2)
                raise InputError(exc.message) from None
        err(f"wrote {output}")
    else:
        sys.stdout.write(stdout_text(text))
    return ExitCode.OK


CSV_ROW_END = "\r\n"  # what `csv.writer` ends every row with


def stdout_text(text: str) -> str:
    """An export as written to stdout: what a session put in it escaped for the terminal (`terminal_text`), and the
    export's own line ends kept, CSV's `\\r\\n` included, so `export > a.csv` and `export -o a.csv` hold the same
    bytes. A `\\r` alone, a cell's, is escaped; the cells of every format are escaped already where rendered."""
    return CSV_ROW_END.join(terminal_text(line, keep_lines=True) for line in text.split(CSV_ROW_END))
