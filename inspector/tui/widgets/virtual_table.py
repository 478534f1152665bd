"""A table that renders only the rows on screen (Textual's line API), so 100k rows open at once.

Textual's DataTable measures every cell on the main thread (about 1.5 s for 10k rows); this table
formats a row when it scrolls into view. Rows are tuples of plain values; numbers sort as numbers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.binding import Binding
from textual.geometry import Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

MAX_COLUMN = 72


@dataclass(frozen=True)
class Column:
    label: str
    numeric: bool = False
    digits: int = 3


def format_cell(value: Any, column: Column) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        if value != 0 and abs(value) < 10**-column.digits:
            return f"{value:.2e}"
        return f"{value:.{column.digits}f}"
    return str(value)


class VirtualTable(ScrollView, can_focus=True):
    """Rows with a cursor; Enter posts `RowChosen`; `s` sorts by the next column, `S` reverses."""

    BINDINGS = [
        Binding("up,k", "cursor(-1)", "Up", show=False),
        Binding("down,j", "cursor(1)", "Down", show=False),
        Binding("pageup", "page(-1)", show=False),
        Binding("pagedown", "page(1)", show=False),
        Binding("home,g", "jump(0)", "Top", show=False),
        Binding("end,G", "jump(-1)", "Bottom", show=False),
        Binding("enter", "choose", "Open", id="table.open"),
        Binding("s", "sort_next", "Sort", id="table.sort"),
        Binding("S", "reverse", "Reverse", show=False),
    ]
    DEFAULT_CSS = """
    VirtualTable { height: 1fr; }
    """

    cursor = reactive(0)

    class RowChosen(Message):
        def __init__(self, table: "VirtualTable", key: Any) -> None:
            super().__init__()
            self.table = table
            self.key = key

    def __init__(self, columns: Sequence[Column], *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.columns = list(columns)
        self._rows: list[tuple] = []
        self._keys: list[Any] = []
        self._styles: list[str] = []
        self._widths = [len(c.label) for c in self.columns]
        self.sort_column: int | None = None
        self.sort_reverse = False

    # -- data ------------------------------------------------------------------------------------
    def set_rows(self, rows: Sequence[tuple], keys: Sequence[Any] | None = None, styles: Sequence[str] | None = None) -> None:
        """Replace the rows; `keys` identify rows in `RowChosen`; `styles` colour whole rows."""
        self._rows = list(rows)
        self._keys = list(keys) if keys is not None else list(range(len(self._rows)))
        self._styles = list(styles) if styles is not None else [""] * len(self._rows)
        self._widths = [len(c.label) for c in self.columns]
        for row in self._rows:
            for i, (value, column) in enumerate(zip(row, self.columns)):
                width = len(format_cell(value, column))
                if width > self._widths[i]:
                    self._widths[i] = min(width, MAX_COLUMN)
        if self.sort_column is not None:
            self._sort()
        self.cursor = min(self.cursor, max(len(self._rows) - 1, 0))
        self._resize()

    @property
    def rows(self) -> list[tuple]:
        """The rows as shown: filtered and sorted."""
        return self._rows

    @property
    def row_count(self) -> int:
        return len(self._rows)

    @property
    def cursor_key(self) -> Any:
        return self._keys[self.cursor] if self._rows else None

    def header_text(self) -> str:
        parts = []
        for i, (column, width) in enumerate(zip(self.columns, self._widths)):
            label = column.label + (" ▼" if self.sort_reverse else " ▲") * (self.sort_column == i)
            parts.append(label.rjust(width) if column.numeric else label.ljust(width))
        return "  ".join(parts)

    def _resize(self) -> None:
        self.virtual_size = Size(sum(self._widths) + 2 * len(self._widths), len(self._rows))
        self.refresh()
        self.post_message(self.Resorted(self))

    class Resorted(Message):
        """Rows, widths or order changed: owners redraw headers and counts."""

        def __init__(self, table: "VirtualTable") -> None:
            super().__init__()
            self.table = table

    def _sort(self) -> None:
        column = self.sort_column
        numeric = self.columns[column].numeric

        def key(i: int):
            value = self._rows[i][column]
            if numeric:
                return (value is None, value if isinstance(value, (int, float)) else 0)
            return (value is None, str(value).lower())

        order = sorted(range(len(self._rows)), key=key, reverse=self.sort_reverse)
        self._rows = [self._rows[i] for i in order]
        self._keys = [self._keys[i] for i in order]
        self._styles = [self._styles[i] for i in order]

    # -- drawing ---------------------------------------------------------------------------------
    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        index = y + scroll_y
        width = self.scrollable_content_region.width
        if index >= len(self._rows):
            return Strip.blank(width, self.rich_style)
        row = self._rows[index]
        cells = []
        for value, column, w in zip(row, self.columns, self._widths):
            text = format_cell(value, column)
            text = text if len(text) <= w else text[: w - 1] + "…"
            cells.append(text.rjust(w) if column.numeric else text.ljust(w))
        line = "  ".join(cells)
        style = self.rich_style
        row_style = self._styles[index]
        if row_style:
            style += Style.parse(row_style)
        if index == self.cursor:
            style += self.get_component_rich_style("virtual-table--cursor", partial=True) if self.has_focus else Style(reverse=True, dim=True)
        strip = Strip([Segment(line, style)], len(line))
        return strip.crop_extend(scroll_x, scroll_x + width, style)

    COMPONENT_CLASSES = {"virtual-table--cursor"}
    DEFAULT_CSS += """
    VirtualTable > .virtual-table--cursor { background: $accent; color: $text; text-style: bold; }
    """

    # -- actions ---------------------------------------------------------------------------------
    def watch_cursor(self, old: int, new: int) -> None:
        self.refresh()
        if new < self.scroll_offset.y:
            self.scroll_to(y=new, animate=False)
        elif new >= self.scroll_offset.y + self.scrollable_content_region.height:
            self.scroll_to(y=new - self.scrollable_content_region.height + 1, animate=False)

    def action_cursor(self, delta: int) -> None:
        if self._rows:
            self.cursor = max(0, min(len(self._rows) - 1, self.cursor + delta))

    def action_page(self, direction: int) -> None:
        self.action_cursor(direction * max(self.scrollable_content_region.height - 1, 1))

    def action_jump(self, where: int) -> None:
        if self._rows:
            self.cursor = 0 if where == 0 else len(self._rows) - 1

    def action_choose(self) -> None:
        if self._rows:
            self.post_message(self.RowChosen(self, self._keys[self.cursor]))

    def action_sort_next(self) -> None:
        self.sort_column = 0 if self.sort_column is None else (self.sort_column + 1) % len(self.columns)
        self.sort_reverse = self.columns[self.sort_column].numeric  # numbers: largest first
        self._sort()
        self._resize()

    def action_reverse(self) -> None:
        if self.sort_column is not None:
            self.sort_reverse = not self.sort_reverse
            self._sort()
            self._resize()

    def on_click(self, event: events.Click) -> None:
        index = event.y + self.scroll_offset.y
        if 0 <= index < len(self._rows):
            if index == self.cursor:
                self.action_choose()
            self.cursor = index
