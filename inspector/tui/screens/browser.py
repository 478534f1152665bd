"""Saved sessions: open one, or mark two and compare them."""

from __future__ import annotations

from pathlib import Path

from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import Footer, Static

from inspector.tui.rows import TableData
from inspector.tui.screens.overview import OverviewScreen
from inspector.tui.screens.tables import DiffScreen
from inspector.tui.widgets.table_panel import TablePanel
from inspector.tui.widgets.virtual_table import VirtualTable
from sessions.diff import diff_sessions
from sessions.errors import InputError
from sessions.groups import Rules
from sessions.storage import list_sessions, load


class BrowserScreen(Screen):
    BINDINGS = [
        Binding("space", "mark", "Mark", id="browser.mark"),
        Binding("c", "compare", "Compare marked", id="browser.compare"),
        Binding("r", "reload", "Reload", id="browser.reload"),
    ]

    def __init__(self, rules: Rules, folder: Path | None = None) -> None:
        super().__init__()
        self.rules, self.folder = rules, folder
        self.marked: list[Path] = []
        self.panel = TablePanel(self._data())

    def _data(self) -> TableData:
        entries, problems = list_sessions(self.folder)
        self.problems = problems
        rows = [
            ("*" if e.path in getattr(self, "marked", []) else "", e.model, e.created, e.gpu, f"{e.backend}/{e.device}", ",".join(e.variants), e.path.name)
            for e in entries
        ]
        columns = [("", False), ("model", False), ("created", False), ("GPU / CPU", False), ("backend", False), ("variants", False), ("file", False)]
        return TableData(columns, rows, [e.path for e in entries], ["bold" if r[0] else "" for r in rows])

    def compose(self) -> ComposeResult:
        yield Static("sessions (Enter opens, space marks, c compares the two marked)", id="breadcrumb")
        yield self.panel
        yield Footer()

    def on_mount(self) -> None:
        self.panel.table.focus()
        for problem in self.problems:
            self.notify(problem, severity="warning")

    def action_reload(self) -> None:
        self.panel.show(self._data())

    def action_mark(self) -> None:
        path = self.panel.table.cursor_key
        if path is None:
            return
        if path in self.marked:
            self.marked.remove(path)
        else:
            self.marked = (self.marked + [path])[-2:]
        self.panel.show(self._data())

    def action_compare(self) -> None:
        if len(self.marked) != 2:
            self.notify("mark two sessions with space first", severity="warning")
            return
        a, b = sorted(self.marked, key=lambda p: load(p).study.created)
        diff = diff_sessions(load(a), load(b), self.rules, 0.05, a.name, b.name)
        self.app.push_screen(DiffScreen(diff, ["sessions"]))

    def on_virtual_table_row_chosen(self, event: VirtualTable.RowChosen) -> None:
        try:
            session = load(event.key)
        except InputError as exc:
            self.notify(exc.message, severity="error")
            return
        self.app.push_screen(OverviewScreen(session, event.key, self.rules))
