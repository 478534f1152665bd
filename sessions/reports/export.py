"""Export a session for a README: Markdown sections, or the variant table as CSV / JSON.

The Markdown is the sections `--sections` names (`sessions.reports.sections` writes each); it states the method
(what the timed region holds) and the exact command that reruns the study, so a reader can check and repeat the
numbers.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from sessions.analyses.groups import Rules
from sessions.analyses.summary import summary_document
from sessions.analyses.verdict import verdict_lines
from sessions.documents.model import Session
from sessions.documents.paths import ChosenPath, exports_dir
from sessions.documents.storage import file_writer
from sessions.reports import views
from sessions.reports.roofline_report import roofline_section
from sessions.reports.sections import (
    comparison_section,
    environment_section,
    groups_section,
    method_section,
    quality_section,
    recipe_section,
    rerun_section,
)
from sessions.reports.tables import md_cell, table_csv

# The `--sections` words, in the order `export --format md` writes them, each with the section it writes.
SECTIONS: dict[str, Callable[[Session, Rules, str | None], str]] = {
    "comparison": lambda session, rules, path: comparison_section(session, rules),
    "quality": lambda session, rules, path: quality_section(session),
    "groups": lambda session, rules, path: groups_section(session, rules),
    "roofline": lambda session, rules, path: roofline_section(session, rules),
    "method": lambda session, rules, path: method_section(session),
    "environment": lambda session, rules, path: environment_section(session),
    "recipe": lambda session, rules, path: recipe_section(session),
    "rerun": lambda session, rules, path: rerun_section(session, path),
}


def export_markdown(session: Session, rules: Rules, sections: list[str] | None = None, path: str | None = None) -> str:
    """The session's title, then the `sections` named (every one of `SECTIONS` where None), in the order given;
    `path`, the file the session was read from, names it in the rerun commands."""
    names = ", ".join(v.name for v in session.variants)
    title = f"# {md_cell(session.study.model)}: {md_cell(names)} ({md_cell(session.study.created)})"
    return "\n\n".join([title, *(SECTIONS[name](session, rules, path) for name in sections or SECTIONS)]) + "\n"


def export_csv(session: Session) -> str:
    """The variant table with raw values (what `show` prints, unformatted)."""
    return table_csv(views.session_variant_table(session))


def export_json(session: Session, path: str | None, rules: Rules) -> dict[str, object]:
    return {**summary_document(session, path), "verdicts": verdict_lines(session, rules)}


def export_file_name(*parts: str) -> str:
    """A Markdown file name from a screen's words, e.g. `senet154-groups-fp8-all-against-fp16-by-role.md`:
    ASCII letters, digits, `.`, `_` and `-` only, at most 100 characters before `.md`."""
    words = "-".join(re.sub(r"[^A-Za-z0-9._]+", "-", part).strip("-._") for part in parts)
    return (re.sub(r"-{2,}", "-", words).strip("-")[:100].rstrip("-") or "trt-inspect") + ".md"


def write_new_markdown(text: str, *parts: str) -> Path:
    """`text` in a new file under `exports_dir()` named from `parts`; `-2`, `-3` ... where one exists, never over it
    (`sessions.documents.storage.file_writer` with a name trt-inspect chose)."""
    with file_writer(ChosenPath(exports_dir() / export_file_name(*parts)), "export", force=False) as writer:
        return writer.write(text.encode())
