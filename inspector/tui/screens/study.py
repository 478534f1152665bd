"""A live study: the headless `run_study` in a thread worker, its progress shown per phase."""

from __future__ import annotations

from pathlib import Path

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Footer, Log, ProgressBar, Static
from textual.worker import Worker, WorkerState

from inspector.request import StudyRequest
from inspector.study import Progress, run_requested_study
from inspector.tui import rows
from inspector.tui.screens.modals import ErrorScreen
from inspector.tui.screens.overview import OverviewScreen
from inspector.tui.widgets.table_panel import TablePanel
from sessions.errors import InspectError
from sessions.groups import Rules
from sessions.storage import load

PHASES = ("build", "timing")


class StudyCancelled(Exception):
    """Raised inside the study's progress callback once the user cancels."""


class StudyScreen(Screen):
    BINDINGS = [Binding("ctrl+x", "cancel", "Cancel study", id="study.cancel")]

    class Update(Message):
        def __init__(self, progress: Progress) -> None:
            super().__init__()
            self.progress = progress

    def __init__(self, request: StudyRequest, rules: Rules) -> None:
        super().__init__()
        self.request, self.rules = request, rules
        self.session_path: Path | None = None
        self.cancelled = False

    def compose(self) -> ComposeResult:
        yield Static(f"study of {self.request.model}", id="breadcrumb")
        for phase in PHASES:
            yield Static(phase, classes="phase-label")
            yield ProgressBar(total=None, id=f"bar-{phase}", show_eta=False)
        yield Static("finished variants", classes="phase-label")
        yield TablePanel(rows.overview_of([]), id="landed")
        yield Log(id="study-log")
        yield Footer()

    def on_mount(self) -> None:
        self.run_worker_study()

    @work(thread=True, exclusive=True, exit_on_error=False, group="study")
    def run_worker_study(self):
        def report(progress: Progress) -> None:
            if self.cancelled:
                raise StudyCancelled()
            self.post_message(self.Update(progress))

        return run_requested_study(self.request, report)

    @on(Update)
    def show_progress(self, event: Update) -> None:
        p = event.progress
        if p.session_path is not None:
            self.session_path = p.session_path
        self.query_one(Log).write_line(f"[{p.phase}] {p.message}")
        if p.phase in PHASES and p.total:
            self.query_one(f"#bar-{p.phase}", ProgressBar).update(total=p.total, progress=p.done)
        if p.variants:  # variants appear as they land, from the study's own snapshot
            self.query_one("#landed", TablePanel).show(rows.overview_of(list(p.variants)))

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.state == WorkerState.SUCCESS:
            session, path = event.worker.result
            self.app.switch_screen(OverviewScreen(session, path, self.rules))
        elif event.state == WorkerState.ERROR:
            error = event.worker.error
            kept = f"\n\nMeasured so far is saved in {self.session_path}" if self.session_path else ""
            if isinstance(error, StudyCancelled):
                message = "study cancelled" + kept
            elif isinstance(error, InspectError):
                message = error.message + kept
            else:
                message = f"{type(error).__name__}: {error}" + kept
            self.query_one(Log).write_line(message)
            self.app.push_screen(ErrorScreen(message), lambda _: self._after_error())

    def _after_error(self) -> None:
        if self.session_path and self.session_path.exists():
            try:
                self.app.switch_screen(OverviewScreen(load(self.session_path), self.session_path, self.rules))
            except InspectError:
                pass

    def action_cancel(self) -> None:
        self.cancelled = True
        self.query_one(Log).write_line("cancelling after the current step ...")
