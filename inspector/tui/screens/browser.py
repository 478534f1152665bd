"""Saved sessions: open one, or mark two and compare them. The list is read in a worker, once per app."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import Footer, Static
from textual.worker import Worker, WorkerState

from inspector.tui.screens.overview import OverviewScreen
from inspector.tui.screens.tables import DiffScreen
from inspector.tui.widgets.table_panel import TablePanel
from inspector.tui.widgets.virtual_table import VirtualTable
from sessions.analyses.diff import diff_sessions
from sessions.analyses.groups import Rules
from sessions.documents.errors import InputError
from sessions.documents.state import SessionState, session_state
from sessions.documents.storage import SessionEntry, list_sessions, load
from sessions.reports.tables import terminal_text
from sessions.reports.views import Column, Table, Tone

COLUMNS = (Column(""), Column("model"), Column("created"), Column("state"), Column("GPU / CPU"), Column("backend"),
           Column("variants"), Column("file"))
STATE_TONES = {"complete": "", "interrupted": "warn", "running": "dim"}


class BrowserScreen(Screen):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("space", "mark", "Mark", id="browser.mark"),
        Binding("c", "compare", "Compare marked", id="browser.compare"),
        Binding("r", "reload", "Reload", id="browser.reload"),
        Binding("escape", "back", "Back", id="browser.back"),
    ]

    def __init__(self, rules: Rules, folder: Path | None = None) -> None:
        super().__init__()
        self.rules, self.folder = rules, folder
        self.marked: list[Path] = []
        self.entries: list[SessionEntry] = []
        self.states: dict[Path, SessionState] = {}
        self.panel = TablePanel(self._data())

    def _data(self) -> Table:
        states = [self.states.get(e.path) for e in self.entries]
        rows = [("*" if e.path in self.marked else "", e.model, e.created, state.text if state else "?", e.gpu,
                 f"{e.backend}/{e.device}", ",".join(e.variants), e.path.name)
                for e, state in zip(self.entries, states, strict=False)]
        tones: list[Tone] = ["warn" if r[0] else (STATE_TONES[s.kind] if s else "")
                             for r, s in zip(rows, states, strict=False)]
        return Table(COLUMNS, rows, [e.path for e in self.entries], tones)

    def compose(self) -> ComposeResult:
        yield Static("sessions (reading ...) Enter opens, space marks, c compares the two marked", id="breadcrumb")
        yield self.panel
        yield Footer(compact=True, show_command_palette=False)

    def on_mount(self) -> None:
        self.panel.table.focus()
        self.read_sessions()

    @work(thread=True, exclusive=True, group="browser")
    def read_sessions(self) -> tuple[list[SessionEntry], list[str], dict[Path, SessionState]]:
        try:
            entries, problems = list_sessions(self.folder)
        except InputError as exc:  # the folder cannot be listed: the browser says so, as it says a bad file
            return [], [exc.message], {}
        states = {}
        for entry in entries:
            try:
                states[entry.path] = session_state(load(entry.path), entry.path)
            except InputError:  # changed since it was listed: the next reload says why
                continue
        return entries, problems, states

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.worker.group != "browser" or event.state != WorkerState.SUCCESS:
            return
        self.entries, problems, self.states = event.worker.result
        self.panel.show(self._data())
        self.query_one("#breadcrumb", Static).update("sessions: Enter opens, space marks, c compares the two marked")
        for problem in problems:
            self.notify(terminal_text(problem), severity="warning", markup=False)

    def action_reload(self) -> None:
        self.read_sessions()

    def action_back(self) -> None:
        if len(self.app.screen_stack) > 2:
            self.app.pop_screen()

    def action_mark(self) -> None:
        path = self.panel.table.cursor_key
        if path is None:
            return
        self.marked = [p for p in self.marked if p != path] if path in self.marked else (self.marked + [path])[-2:]
        self.panel.show(self._data())

    def action_compare(self) -> None:
        if len(self.marked) != 2:
            self.notify("mark two sessions with space first", severity="warning")
            return
        path_a, path_b = sorted(self.marked, key=lambda p: next(e.created for e in self.entries if e.path == p))
        try:
            a, b = load(path_a), load(path_b)
        except InputError as exc:
            self.notify(terminal_text(exc.message), severity="error", markup=False)
            return
        for session, path in ((a, path_a), (b, path_b)):
            state = session_state(session, path)
            if state.kind == "running":
                self.notify(f"{path.name} is still being written by a running study ({state.step}): "
                            "compare it once the study has finished", severity="warning")
                return
            if state.kind == "interrupted":
                self.notify(f"{path.name} is {state.text}: the diff covers what finished", severity="warning")
        diff = diff_sessions(a, b, self.rules, 0.05, path_a.name, path_b.name)
        self.app.push_screen(DiffScreen(diff, ["sessions"]))

    def on_virtual_table_row_chosen(self, event: VirtualTable.RowChosen) -> None:
        try:
            session = load(event.key)
        except InputError as exc:
            self.notify(terminal_text(exc.message), severity="error", markup=False)
            return
        self.app.push_screen(OverviewScreen(session, event.key, self.rules))
