"""A table that renders only the rows on screen (Textual's line API), so 100k rows open at once.

Textual's DataTable measures every cell on the main thread (slow past thousands of rows); this table
formats a row when it scrolls into view. The header is the first line and scrolls sideways with the
body; the first column (the row's name) stays pinned. Rows are tuples of plain values; numbers sort
as numbers.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.binding import Binding, BindingType
from textual.geometry import Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from sessions.reports.tables import format_value, terminal_text
from sessions.reports.views import Column

MAX_COLUMN = 72
GAP = 2
TONE_STYLES = {"good": "green", "bad": "bold red", "warn": "yellow", "dim": "dim", "": ""}


def format_cell(value: Any, column: Column) -> str:
    return format_value(value, column.kind)


PLAIN_CELLS = {str, int, float, type(None)}


def column_widths(rows: Sequence[tuple[Any, ...]], columns: Sequence[Column], labels: Sequence[str]) -> list[int]:
    """Each column's width: its label's, or its widest cell's up to MAX_COLUMN where that is wider.

    A column of plain values formats each distinct one once (100,000 rows hold a few hundred kernel names, kinds
    and precisions): values are distinct by type and `str`, so 1 and 1.0, or 0.0 and -0.0, are each formatted.
    """
    widths = [len(label) for label in labels]
    for i, column in enumerate(columns):
        cells = [row[i] for row in rows if len(row) > i]
        if set(map(type, cells)) <= PLAIN_CELLS:
            cells = list(dict(zip(zip(map(type, cells), map(str, cells), strict=False), cells, strict=False)).values())
        widest = max((len(format_cell(value, column)) for value in cells), default=0)
        if widest > widths[i]:
            widths[i] = min(widest, MAX_COLUMN)
    return widths


class VirtualTable(ScrollView, can_focus=True):
    """Rows with a cursor; Enter posts `RowChosen`; `s` sorts by the next column, `S` reverses, a header click sorts."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up,k", "cursor(-1)", "Up", show=False),
        Binding("down,j", "cursor(1)", "Down", show=False),
        Binding("pageup", "page(-1)", "Page up", show=False),
        Binding("pagedown", "page(1)", "Page down", show=False),
        Binding("home,g", "jump(0)", "Top", show=False),
        Binding("end,G", "jump(-1)", "Bottom", show=False),
        Binding("enter", "choose", "Open", id="table.open"),
        Binding("s", "sort_next", "Sort", show=False, id="table.sort"),
        Binding("S", "reverse", "Reverse sort", show=False, id="table.reverse"),
    ]
    DEFAULT_CSS = """
    VirtualTable { height: 1fr; }
    VirtualTable > .virtual-table--cursor { background: $accent; color: $text; text-style: bold; }
    VirtualTable > .virtual-table--header { color: $text-muted; text-style: bold; }
    """
    COMPONENT_CLASSES: ClassVar[set[str]] = {"virtual-table--cursor", "virtual-table--header"}

    cursor = reactive(0)

    class RowChosen(Message):
        def __init__(self, table: VirtualTable, key: Any) -> None:
            super().__init__()
            self.table = table
            self.key = key

    class Resorted(Message):
        """Rows, widths or order changed: owners redraw counts and details."""

        def __init__(self, table: VirtualTable) -> None:
            super().__init__()
            self.table = table

    class Moved(Message):
        """The cursor moved to another row."""

        def __init__(self, table: VirtualTable) -> None:
            super().__init__()
            self.table = table

    def __init__(self, columns: Sequence[Column], *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.columns = list(columns)
        self._rows: list[tuple] = []
        self._keys: list[Any] = []
        self._tones: list[str] = []
        self._widths = [len(c.label) for c in self.columns]
        self.sort_column: int | None = None
        self.sort_reverse = False

    # -- data ------------------------------------------------------------------------------------
    def set_rows(self, rows: Sequence[tuple], keys: Sequence[Any] | None = None, tones: Sequence[str] | None = None,
                 columns: Sequence[Column] | None = None) -> None:
        """Replace the rows (and the columns, where given); `keys` identify rows in `RowChosen`; `tones` colour rows."""
        if columns is not None and list(columns) != self.columns:
            self.columns = list(columns)
            self.sort_column = None
        self._rows = list(rows)
        self._keys = list(keys) if keys is not None else list(range(len(self._rows)))
        self._tones = list(tones) if tones is not None else [""] * len(self._rows)
        self._widths = column_widths(self._rows, self.columns, [self._label(i) for i in range(len(self.columns))])
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

    @property
    def cursor_row(self) -> tuple | None:
        return self._rows[self.cursor] if self._rows else None

    def _label(self, i: int) -> str:
        arrow = (" ▼" if self.sort_reverse else " ▲") if self.sort_column == i else ""
        return terminal_text(self.columns[i].label) + arrow  # variant names head some columns

    def header_text(self) -> str:
        return self._line([self._label(i) for i in range(len(self.columns))]).rstrip()

    def _line(self, texts: Sequence[str]) -> str:
        cells = []
        for text, column, w in zip(texts, self.columns, self._widths, strict=False):
            text = text if len(text) <= w else text[: w - 1] + "…"
            cells.append(text.rjust(w) if column.numeric else text.ljust(w))
        return (" " * GAP).join(cells)

    def _resize(self) -> None:
        self._widths = [max(w, len(self._label(i))) for i, w in enumerate(self._widths)]  # room for the sort arrow
        self.virtual_size = Size(sum(self._widths) + GAP * len(self._widths), len(self._rows) + 1)
        self.refresh()
        self.post_message(self.Resorted(self))

    def _sort(self) -> None:
        column = self.sort_column
        assert column is not None
        numeric = self.columns[column].numeric

        def key(i: int):
            value = self._rows[i][column]
            if numeric:
                return (value is None, value if isinstance(value, (int, float)) else 0)
            return (value is None, str(value).lower())

        order = sorted(range(len(self._rows)), key=key, reverse=self.sort_reverse)
        self._rows = [self._rows[i] for i in order]
        self._keys = [self._keys[i] for i in order]
        self._tones = [self._tones[i] for i in order]

    # -- drawing ---------------------------------------------------------------------------------
    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        width = self.scrollable_content_region.width
        if y == 0:
            texts = [self._label(i) for i in range(len(self.columns))]
            style = self.rich_style + self.get_component_rich_style("virtual-table--header", partial=True)
            return self._pinned(self._line(texts), scroll_x, width, style)
        index = y - 1 + scroll_y
        if index >= len(self._rows):
            return Strip.blank(width, self.rich_style)
        row = self._rows[index]
        style = self.rich_style
        tone = TONE_STYLES.get(self._tones[index], "")
        if tone:
            style += Style.parse(tone)
        if index == self.cursor:
            style += (self.get_component_rich_style("virtual-table--cursor", partial=True) if self.has_focus
                      else Style(reverse=True, dim=True))
        cells = [format_cell(v, c) for v, c in zip(row, self.columns, strict=False)]
        return self._pinned(self._line(cells), scroll_x, width, style)

    def _pinned(self, line: str, scroll_x: int, width: int, style: Style) -> Strip:
        """The first column stays; the rest of the line scrolls by `scroll_x`."""
        first = self._widths[0] + GAP if self._widths else 0
        if first >= width:
            return Strip([Segment(line, style)], len(line)).crop_extend(scroll_x, scroll_x + width, style)
        rest = Strip([Segment(line[first:], style)], max(len(line) - first, 0)).crop_extend(
            scroll_x, scroll_x + width - first, style)
        return Strip.join([Strip([Segment(line[:first], style)], first), rest])

    # -- actions ---------------------------------------------------------------------------------
    def watch_cursor(self, old: int, new: int) -> None:
        self.refresh()
        body = max(self.scrollable_content_region.height - 1, 1)
        if new < self.scroll_offset.y:
            self.scroll_to(y=new, animate=False)
        elif new >= self.scroll_offset.y + body:
            self.scroll_to(y=new - body + 1, animate=False)
        self.post_message(self.Moved(self))

    def action_cursor(self, delta: int) -> None:
        if self._rows:
            self.cursor = max(0, min(len(self._rows) - 1, self.cursor + delta))

    def action_page(self, direction: int) -> None:
        self.action_cursor(direction * max(self.scrollable_content_region.height - 2, 1))

    def action_jump(self, where: int) -> None:
        if self._rows:
            self.cursor = 0 if where == 0 else len(self._rows) - 1

    def action_choose(self) -> None:
        if self._rows:
            self.post_message(self.RowChosen(self, self._keys[self.cursor]))

    def sort_by(self, column: int, reverse: bool | None = None) -> None:
        self.sort_column = column
        self.sort_reverse = self.columns[column].numeric if reverse is None else reverse  # numbers: largest first
        self._sort()
        self._resize()

    def action_sort_next(self) -> None:
        self.sort_by(0 if self.sort_column is None else (self.sort_column + 1) % len(self.columns))

    def action_reverse(self) -> None:
        if self.sort_column is not None:
            self.sort_by(self.sort_column, not self.sort_reverse)

    def column_at(self, x: int) -> int | None:
        """The column under screen column `x` of this widget (the pinned first column, then scrolled ones)."""
        first = self._widths[0] + GAP if self._widths else 0
        position = x if x < first else x + self.scroll_offset.x
        edge = 0
        for i, w in enumerate(self._widths):
            edge += w + GAP
            if position < edge:
                return i
        return None

    def on_click(self, event: events.Click) -> None:
        if event.y == 0:
            column = self.column_at(event.x)
            if column is not None:
                self.sort_by(column, not self.sort_reverse if column == self.sort_column else None)
            return
        index = event.y - 1 + self.scroll_offset.y
        if 0 <= index < len(self._rows):
            if index == self.cursor:
                self.action_choose()
            self.cursor = index
