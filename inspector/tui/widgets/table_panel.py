"""A VirtualTable over one `sessions.reports.views.Table`: a filter, a count line with the matching rows' time, a
detail pane."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.widgets import Static

from inspector.tui.plain import facts_text, plain
from inspector.tui.widgets.virtual_table import VirtualTable
from sessions.reports.tables import render_markdown
from sessions.reports.views import Table, filter_rows, row_detail

NO_DETAIL = "no row to detail (no rows, or none match the filter)"


class TablePanel(Vertical):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("n", "match(1)", "Next row", show=False, id="table.next_match"),
        Binding("N", "match(-1)", "Previous row", show=False, id="table.previous_match"),
        Binding("d", "toggle_detail", "Detail", show=False, id="table.detail"),
    ]
    DEFAULT_CSS = """
    TablePanel { height: 1fr; }
    TablePanel > .table-count { color: $text-muted; height: 1; }
    TablePanel > .detail-box { background: $panel; height: auto; max-height: 40%; display: none; }
    TablePanel > .detail-box > .table-detail { color: $text; height: auto; }
    TablePanel.with-detail > .detail-box { display: block; }
    """
    MIN_ROWS = 5  # rows the table keeps on screen (80x24 included) whatever the detail pane and the notes hold

    def __init__(self, data: Table, *, id: str | None = None, detail: bool = False,
                 facts: Callable[[Any], list[tuple[str, str]]] | None = None) -> None:
        """`facts(key)` fills the detail pane for a row (a layer's tactic and formats); default: the row's cells."""
        super().__init__(id=id, classes="with-detail" if detail else "")
        self.data = data
        self.facts = facts
        self.pattern: str | None = None
        self.table = VirtualTable(data.columns)
        self.table.styles.min_height = self.MIN_ROWS + 2  # the header line and a horizontal scrollbar besides

    def compose(self) -> ComposeResult:
        yield self.table
        yield Static("", classes="table-count")
        with VerticalScroll(classes="detail-box", can_focus=False):
            yield Static("", classes="table-detail")

    def on_mount(self) -> None:
        self.show(self.data)

    def show(self, data: Table) -> None:
        """New rows (and columns: a live table grows, a regrouped one renames its first column)."""
        self.data = data
        matches = filter_rows(data, self.pattern)
        kept = matches.rows
        self._total = matches.total
        self.table.set_rows([data.rows[i] for i in kept], [data.keys[i] for i in kept], [data.tones[i] for i in kept],
                            columns=data.columns)

    def markdown(self) -> str:
        """The rows shown, in the order shown, as a Markdown table."""
        from sessions.reports.tables import format_value

        table = self.table
        cells = [[format_value(value, column.kind) for value, column in zip(row, table.columns, strict=False)]
                 for row in table.rows]
        return render_markdown([c.label for c in table.columns], cells,
                               {i for i, c in enumerate(table.columns) if c.numeric})

    def filter(self, pattern: str | None) -> None:
        """A new pattern; None (the dialog cancelled) keeps the current one, "" clears it."""
        if pattern is None:
            return
        self.pattern = pattern or None
        self.show(self.data)

    def action_match(self, step: int) -> None:
        """The next (previous) row of the filtered table, wrapping around."""
        if self.table.row_count:
            self.table.cursor = (self.table.cursor + step) % self.table.row_count

    def action_toggle_detail(self) -> None:
        self.toggle_class("with-detail")
        self._update_detail()

    def count_text(self) -> str:
        shown, total = self.table.row_count, len(self.data.rows)
        if shown == total and not self.pattern:
            return f"{total} rows"
        text = f"{shown} of {total} rows match /{self.pattern}/"
        if self._total is not None:
            text += f" · Σ {self.data.columns[self.data.time_column or 0].label} {self._total:.3f}"
        return text + " (n/N step, / changes)"

    def on_virtual_table_resorted(self, event: VirtualTable.Resorted) -> None:
        self.query_one(".table-count", Static).update(plain(self.count_text()))
        self._update_detail()

    def on_virtual_table_moved(self, event: VirtualTable.Moved) -> None:
        self._update_detail()

    def _update_detail(self) -> None:
        if not self.has_class("with-detail"):
            return
        row, key = self.table.cursor_row, self.table.cursor_key
        pairs = [] if row is None else (self.facts(key) if self.facts is not None else row_detail(self.data, row))
        # never an empty pane: `d` always shows something, so one press is seen to work
        self.query_one(".table-detail", Static).update(facts_text(pairs) if pairs else plain(NO_DETAIL))
