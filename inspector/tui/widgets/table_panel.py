"""A VirtualTable with its header line and a row count, filterable by a regular expression."""

from __future__ import annotations

import re

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Static

from inspector.tui.rows import TableData
from inspector.tui.widgets.virtual_table import Column, VirtualTable, format_cell
from sessions.tables import render_markdown


class TablePanel(Vertical):
    DEFAULT_CSS = """
    TablePanel { height: 1fr; }
    TablePanel > .table-header { color: $text-muted; text-style: bold; height: 1; }
    TablePanel > .table-count { color: $text-muted; height: 1; }
    """

    def __init__(self, data: TableData, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.data = data
        self.pattern: str | None = None
        self.table = VirtualTable([Column(label, numeric) for label, numeric in data.columns])

    def compose(self) -> ComposeResult:
        yield Static("", classes="table-header")
        yield self.table
        yield Static("", classes="table-count")

    def on_mount(self) -> None:
        self.show(self.data)

    def show(self, data: TableData) -> None:
        self.data = data
        rows, keys, styles = data.rows, data.keys, data.styles
        if self.pattern:
            regex = re.compile(self.pattern, re.IGNORECASE)
            kept = [i for i, row in enumerate(rows) if any(regex.search(str(cell)) for cell in row if isinstance(cell, str))]
            rows, keys, styles = [rows[i] for i in kept], [keys[i] for i in kept], [styles[i] for i in kept]
        self.table.set_rows(rows, keys, styles)

    def markdown(self) -> str:
        """The rows shown, in the order shown, as a Markdown table."""
        table = self.table
        cells = [[format_cell(value, column) for value, column in zip(row, table.columns)] for row in table.rows]
        return render_markdown([c.label for c in table.columns], cells, {i for i, c in enumerate(table.columns) if c.numeric})

    def filter(self, pattern: str | None) -> None:
        self.pattern = pattern or None
        self.show(self.data)

    def on_virtual_table_resorted(self, event: VirtualTable.Resorted) -> None:
        self.query_one(".table-header", Static).update(self.table.header_text())
        shown = self.table.row_count
        total = len(self.data.rows)
        text = f"{shown} rows" if shown == total else f"{shown} of {total} rows (filter /{self.pattern}/)"
        self.query_one(".table-count", Static).update(text)
