"""Tables as aligned text or as Markdown, and a check that Markdown tables are well formed."""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Sequence
from typing import Any, Protocol


class TypedColumn(Protocol):
    @property
    def label(self) -> str: ...

    @property
    def kind(self) -> str: ...

    @property
    def numeric(self) -> bool: ...


class Table(Protocol):
    """What sessions.reports.views.Table offers the renderers (a protocol: views imports this module, not the
    reverse)."""

    @property
    def columns(self) -> Sequence[TypedColumn]: ...

    @property
    def rows(self) -> Sequence[Sequence[Any]]: ...

    @property
    def notes(self) -> Sequence[str]: ...

    @property
    def labels(self) -> list[str]: ...

Cell = str | int | float | None


_ZERO_WIDTH = "\u200b-\u200f\u2060-\u2064\ufeff"  # zero-width spaces, joiners and marks: unseen text in a name
# Control characters (C0, DEL, C1), Unicode line and paragraph separators, bidirectional controls, zero-width ones.
_TERMINAL_UNSAFE = re.compile(f"[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069{_ZERO_WIDTH}]")
_TERMINAL_UNSAFE_IN_LINES = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f"
                                       f"\u2028\u2029\u202a-\u202e\u2066-\u2069{_ZERO_WIDTH}]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def terminal_text(text: object, keep_lines: bool = False) -> str:
    """Text from a session or a file, safe on a terminal: every control character, Unicode line break, bidi
    control and zero-width character becomes a visible backslash escape (ESC as `\\x1b`, U+202E as `\\u202e`), so
    none can move the cursor, clear the screen, set the window title or reorder the line. The one owner of that rule:
    the CLI's output, the text tables, CSV and the TUI call it where they render.

    `keep_lines` keeps newlines and tabs, for text whose lines this tool's renderers made (a table, a report).
    """
    text = str(text)
    if text.isprintable():  # no control, separator or format character: the common case, checked in C
        return text
    pattern = _TERMINAL_UNSAFE_IN_LINES if keep_lines else _TERMINAL_UNSAFE
    return pattern.sub(_escape, text)


def _unsigned_zero(text: str) -> str:
    """'-0.0' and '-0.000' read as a loss where nothing changed."""
    return text[1:] if text.startswith("-") and not text.strip("-0.%x") else text


def cell_text(value: Cell, digits: int = 3) -> str:
    """A cell of an untyped table: integers (and whole floats) as integers, other floats fixed-point."""
    if value is None:
        return "-"
    if isinstance(value, float):
        if value.is_integer() and abs(value) < 1e15:
            return str(int(value))
        if value != 0 and abs(value) < 10 ** -digits:
            return f"{value:.2e}"
        return _unsigned_zero(f"{value:.{digits}f}")
    return terminal_text(value)


def format_value(value: Cell, kind: str) -> str:
    """A cell of a typed column (sessions.reports.views.Column.kind): one unit and one precision per column."""
    if value is None:
        return "-"
    if kind == "text" or isinstance(value, str):
        return terminal_text(value)
    number = float(value)
    if kind == "count":
        if 0 < abs(number) < 0.05:  # a count above zero never reads 0 (one unattributed kernel in 50 calls: 0.02)
            return f"{number:.1g}"
        return str(round(number)) if abs(number - round(number)) < 0.05 else f"{number:.1f}"
    if kind == "delta_count":
        text = f"{round(number):+d}" if abs(number - round(number)) < 0.05 else f"{number:+.1f}"
        return "0" if text in ("+0", "-0") else text
    if kind == "delta_ms":
        text = f"{number:+.3f}"
        return "0.000" if text in ("+0.000", "-0.000") else text
    if kind == "sci":
        return f"{number:.2e}" if number != 0 and not 1e-3 <= abs(number) < 1e5 else f"{number:.4f}"
    text = f"{number:.{FORMATS.get(kind, 3)}f}"
    return _unsigned_zero(text) + ("x" if kind == "speedup" else "")


FORMATS = {"ms": 3, "us": 1, "pct": 1, "speedup": 2, "seconds": 2, "mib": 1}


def render_text(headers: Sequence[str], rows: Sequence[Sequence[Cell]], right: set[int] | None = None) -> str:
    """Columns padded to their widest cell; numbers right-aligned unless `right` says otherwise."""
    headers = [terminal_text(h) for h in headers]  # variant names head the columns of some tables
    texts = [[cell_text(c) for c in row] for row in rows]
    if right is None:
        right = {i for i in range(len(headers))
                 if rows and all(isinstance(r[i], (int, float)) or r[i] is None for r in rows)}
    widths = [max([len(h)] + [len(r[i]) for r in texts]) for i, h in enumerate(headers)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(c.rjust(w) if i in right else c.ljust(w)
                         for i, (c, w) in enumerate(zip(cells, widths, strict=False))).rstrip()

    return "\n".join([line(headers), line(["-" * w for w in widths])] + [line(r) for r in texts])


# Every control character and every Unicode line break becomes a space: a name cannot end a row or a line.
_BREAKS = {c: " " for c in [*range(0x20), 0x7F, *range(0x80, 0xA0), 0x2028, 0x2029]}
_MARKDOWN_CHARS = str.maketrans({**_BREAKS, "\\": "\\\\", "|": "\\|", "`": "\\`", "&": "&amp;", "<": "&lt;",
                                 ">": "&gt;"})
_BLOCK_START = re.compile(r"^([#>+*=~`_\[-]|\d+(?=[.)]))")  # heading, quote, list, rule, fence, link label


def md_cell(text: object) -> str:
    """Text from a session as one inline Markdown run: no line break, no cell break, no raw HTML."""
    return str(text).translate(_MARKDOWN_CHARS)


def md_text(text: object) -> str:
    """`md_cell`, and a leading heading, list, quote or fence marker escaped: for text that starts a line."""
    text = md_cell(text).lstrip()
    marker = _BLOCK_START.match(text)
    if marker is None:
        return text
    at = marker.end() if marker.group(1)[0].isdigit() else 0  # `1.` -> `1\.`; `#` -> `\#`
    return text[:at] + "\\" + text[at:]


def md_code(text: object) -> str:
    """A name as inline code where it holds nothing that could leave the code span, else as escaped text."""
    text = str(text)
    return f"`{text}`" if text and text == text.translate(_BREAKS) and not set(text) & set("`<>&") else md_cell(text)


def md_fence(lines: Sequence[str], language: str = "") -> str:
    """A fenced code block that no line can close: the fence is longer than any run of backticks inside."""
    body = [line.translate(_BREAKS) for line in lines]
    longest = max((len(run) for line in body for run in re.findall(r"`+", line)), default=0)
    fence = "`" * max(3, longest + 1)
    return "\n".join([fence + language, *body, fence])


def render_markdown(headers: Sequence[str], rows: Sequence[Sequence[Cell]], right: set[int] | None = None) -> str:
    for row in rows:
        if len(row) != len(headers):
            raise ValueError(f"row has {len(row)} cells, table has {len(headers)} columns")
    if right is None:
        right = {i for i in range(len(headers))
                 if rows and all(isinstance(r[i], (int, float)) or r[i] is None for r in rows)}
    out = ["| " + " | ".join(md_cell(h) for h in headers) + " |"]
    out.append("|" + "|".join("---:" if i in right else "---" for i in range(len(headers))) + "|")
    for row in rows:
        out.append("| " + " | ".join(md_cell(cell_text(c)) for c in row) + " |")
    return "\n".join(out)


def _split_row(line: str) -> list[str]:
    body = line.strip()
    body = body.removeprefix("|")
    body = body[:-1] if body.endswith("|") and not body.endswith("\\|") else body
    cells, current, escaped = [], "", False
    for ch in body:
        if escaped:
            current += ch
            escaped = False
        elif ch == "\\":
            current += ch
            escaped = True
        elif ch == "|":
            cells.append(current)
            current = ""
        else:
            current += ch
    cells.append(current)
    return cells


def markdown_table_problems(text: str) -> list[str]:
    """Every table whose rows do not all have the header's column count, as one line each."""
    problems = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        if (lines[i].lstrip().startswith("|") and i + 1 < len(lines) and set(lines[i + 1].strip()) <= set("|:- ")
                and "-" in lines[i + 1]):
            columns = len(_split_row(lines[i]))
            if len(_split_row(lines[i + 1])) != columns:
                problems.append(f"line {i + 2}: separator has {len(_split_row(lines[i + 1]))} cells, header {columns}")
            j = i + 2
            while j < len(lines) and lines[j].lstrip().startswith("|"):
                n = len(_split_row(lines[j]))
                if n != columns:
                    problems.append(f"line {j + 1}: {n} cells, header has {columns}")
                j += 1
            i = j
        else:
            i += 1
    return problems


def _typed_cells(table: Table) -> list[list[str]]:
    return [[format_value(v, c.kind) for v, c in zip(row, table.columns, strict=False)] for row in table.rows]


def table_text(table: Table) -> str:
    """A typed table (sessions.reports.views.Table) as aligned text, its notes below."""
    right = {i for i, c in enumerate(table.columns) if c.numeric}
    return "\n".join([render_text(table.labels, _typed_cells(table), right), *map(terminal_text, table.notes)])


def table_markdown(table: Table) -> str:
    right = {i for i, c in enumerate(table.columns) if c.numeric}
    return "\n\n".join([render_markdown(table.labels, _typed_cells(table), right), *(md_text(n) for n in table.notes)])


def table_csv(table: Table) -> str:
    """Raw values, not formatted ones: a spreadsheet computes with them."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(map(terminal_text, table.labels))
    writer.writerows([terminal_text(v) if isinstance(v, str) else v for v in row] for row in table.rows)
    return out.getvalue()


def table_records(table: Table) -> list[dict[str, Any]]:
    return [dict(zip(table.labels, row, strict=False)) for row in table.rows]
