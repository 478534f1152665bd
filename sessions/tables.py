"""Tables as aligned text or as Markdown, and a check that Markdown tables are well formed."""

from __future__ import annotations

from collections.abc import Sequence

Cell = str | int | float | None


def cell_text(value: Cell, digits: int = 3) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        if value != 0 and abs(value) < 10 ** -digits:
            return f"{value:.2e}"
        return f"{value:.{digits}f}"
    return str(value)


def render_text(headers: Sequence[str], rows: Sequence[Sequence[Cell]], right: set[int] | None = None) -> str:
    """Columns padded to their widest cell; numbers right-aligned unless `right` says otherwise."""
    texts = [[cell_text(c) for c in row] for row in rows]
    if right is None:
        right = {i for i in range(len(headers)) if rows and all(isinstance(r[i], (int, float)) or r[i] is None for r in rows)}
    widths = [max([len(h)] + [len(r[i]) for r in texts]) for i, h in enumerate(headers)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths))).rstrip()

    return "\n".join([line(headers), line(["-" * w for w in widths])] + [line(r) for r in texts])


def _md_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def render_markdown(headers: Sequence[str], rows: Sequence[Sequence[Cell]], right: set[int] | None = None) -> str:
    for row in rows:
        if len(row) != len(headers):
            raise ValueError(f"row has {len(row)} cells, table has {len(headers)} columns")
    if right is None:
        right = {i for i in range(len(headers)) if rows and all(isinstance(r[i], (int, float)) or r[i] is None for r in rows)}
    out = ["| " + " | ".join(_md_escape(h) for h in headers) + " |"]
    out.append("|" + "|".join("---:" if i in right else "---" for i in range(len(headers))) + "|")
    for row in rows:
        out.append("| " + " | ".join(_md_escape(cell_text(c)) for c in row) + " |")
    return "\n".join(out)


def _split_row(line: str) -> list[str]:
    body = line.strip()
    body = body[1:] if body.startswith("|") else body
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
        if lines[i].lstrip().startswith("|") and i + 1 < len(lines) and set(lines[i + 1].strip()) <= set("|:- ") and "-" in lines[i + 1]:
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
