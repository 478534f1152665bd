"""A live study: the headless `run_study` in a thread worker, its progress shown per phase.

Stopping matches the headless Ctrl-C: the study thread gets a KeyboardInterrupt (StudyCancelled) at
its next Python step, the session file keeps every finished variant (it is saved atomically after
each step), and quitting exits with 130. Nothing runs on after the app has gone.
"""

from __future__ import annotations

import ctypes
import threading
from pathlib import Path
from typing import ClassVar

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Footer, Log, ProgressBar, Static
from textual.worker import Worker, WorkerState

from inspector.eta import Estimate
from inspector.request import StudyRequest
from inspector.study import Progress, run_requested_study
from inspector.tui.plain import plain
from inspector.tui.screens.modals import ConfirmScreen, ErrorScreen
from inspector.tui.screens.overview import OverviewScreen
from inspector.tui.widgets.table_panel import TablePanel
from sessions.analyses import captions
from sessions.analyses.groups import Rules
from sessions.analyses.summary import VariantSummary
from sessions.documents.errors import ExitCode, InspectError
from sessions.documents.storage import load
from sessions.reports import views
from sessions.reports.tables import terminal_text

PHASES = ("build", "timing")


class StudyCancelled(KeyboardInterrupt):
    """Raised in the study's thread once the user stops it: the study unwinds as from a Ctrl-C."""


class StudyStopped(Exception):
    """The worker's result once a StudyCancelled has unwound the study."""


class StudyScreen(Screen):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+x", "cancel", "Stop study", id="study.cancel"),
        Binding("ctrl+c", "quit_study", "Stop and quit", id="study.quit", priority=True),
    ]

    class Update(Message):
        def __init__(self, progress: Progress) -> None:
            super().__init__()
            self.progress = progress

    def __init__(self, request: StudyRequest, rules: Rules, force: bool = False) -> None:
        super().__init__()
        self.request, self.rules, self.force = request, rules, force
        self.session_path: Path | None = None
        self.cancelled = False
        self.quitting = False
        self.thread_id: int | None = None  # the study's thread while it runs the study, else None
        self.lock = threading.Lock()
        self.estimate = Estimate()
        self.finished: tuple[VariantSummary, ...] = ()  # as the session file holds them

    def compose(self) -> ComposeResult:
        yield Static(plain(f"study of {self.request.model}"), id="breadcrumb")
        for phase in PHASES:
            yield Static(phase, classes="phase-label")
            yield ProgressBar(total=None, id=f"bar-{phase}", show_eta=False)
        yield Static("", id="eta")
        yield Static("variants: finished (saved in the session file), then the one running", classes="phase-label")
        yield TablePanel(views.variant_table([]), id="landed")
        yield Log(id="study-log")
        yield Footer(compact=True, show_command_palette=False)

    def on_mount(self) -> None:
        self.run_worker_study()

    @property
    def running(self) -> bool:
        return any(w.group == "study" and w.state in (WorkerState.PENDING, WorkerState.RUNNING) for w in self.workers)

    @work(thread=True, exclusive=True, exit_on_error=False, group="study")
    def run_worker_study(self):
        try:
            return self._interruptible_study()
        except KeyboardInterrupt:  # a worker must end in an Exception: a KeyboardInterrupt would stop the app's loop
            raise StudyStopped() from None

    def _interruptible_study(self):
        def report(progress: Progress) -> None:
            if self.cancelled:
                raise StudyCancelled()
            self.post_message(self.Update(progress))

        with self.lock:
            self.thread_id = threading.get_ident()
        try:
            return run_requested_study(self.request, report, self.force)
        finally:
            with self.lock:  # from here on `stop` raises nothing in this thread (it returns to Textual's pool)
                self.thread_id = None

    @on(Update)
    def show_progress(self, event: Update) -> None:
        p = event.progress
        if p.session_path is not None:
            self.session_path = p.session_path
        self.query_one(Log).write_line(terminal_text(f"[{p.phase}] {p.message}"))
        if p.phase in PHASES and p.total:
            self.query_one(f"#bar-{p.phase}", ProgressBar).update(total=p.total, progress=p.done)
        eta = self.estimate.update(p)
        if eta:
            self.query_one("#eta", Static).update(plain(eta))
        if p.saved:  # finished means saved: a stop now keeps exactly these
            self.finished = p.variants
        running = (p.variant, f"{p.phase}: {p.message}") if p.variant and p.phase in ("build", "quality", "trace") else None
        self.query_one("#landed", TablePanel).show(views.live_variant_table(self.finished, running))

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.state not in (WorkerState.SUCCESS, WorkerState.ERROR, WorkerState.CANCELLED):
            return
        while self.app.screen is not self:  # a dialog on top (help, the quit question) gives way
            self.app.pop_screen()
        error = event.worker.error
        if self.quitting:
            self.app.exit(return_code=ExitCode.INTERRUPTED, message=None)
            self.app.exit_note = self._kept(captions.INTERRUPTED)
        elif event.state == WorkerState.SUCCESS:
            session, path = event.worker.result
            self.app.switch_screen(OverviewScreen(session, path, self.rules))
        elif isinstance(error, StudyStopped):
            self.query_one(Log).write_line(self._kept(captions.CANCELLED))
            self.notify(self._kept(captions.CANCELLED), title="Study stopped", markup=False)
            self._land_on_saved()
        else:
            message = error.message if isinstance(error, InspectError) else f"{type(error).__name__}: {error}"
            kept = f"\n\nMeasured so far is saved in {self.session_path}" if self._saved() else ""
            self.query_one(Log).write_line(terminal_text(message + kept))
            self.app.push_screen(ErrorScreen(message + kept), lambda _: self._land_on_saved())

    def _saved(self) -> bool:
        return self.session_path is not None and self.session_path.exists()

    def _kept(self, words: str) -> str:
        return words.format(path=self.session_path) if self._saved() else words.split(";")[0] + "; nothing was saved yet"

    def _land_on_saved(self) -> None:
        if self._saved():
            assert self.session_path is not None
            try:
                self.app.switch_screen(OverviewScreen(load(self.session_path), self.session_path, self.rules))
            except InspectError:
                pass

    def stop(self) -> None:
        """Interrupt the study thread at its next Python step, as Ctrl-C interrupts a headless run."""
        self.cancelled = True
        with self.lock:
            if self.thread_id is not None:
                ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(self.thread_id), ctypes.py_object(StudyCancelled))
        self.query_one(Log).write_line("stopping the study ...")

    def action_cancel(self) -> None:
        if self.running and not self.cancelled:
            self.stop()

    def action_quit_study(self) -> None:
        """Ctrl-C (and Ctrl-Q): ask while a study runs; a second Ctrl-C in the question says yes."""
        if not self.running:
            self.app.exit(return_code=ExitCode.INTERRUPTED if self.cancelled else ExitCode.OK)
            return
        if self.quitting:  # asked and answered: stopping takes until the current step returns
            self.app.exit(return_code=ExitCode.INTERRUPTED)
            self.app.exit_note = self._kept(captions.INTERRUPTED)
            return
        where = f"Finished variants are kept in {self.session_path}." if self.session_path else ""
        self.app.push_screen(ConfirmScreen(f"A study is running. Stop it and quit? {where}"), self._answered)

    def _answered(self, stop: bool | None) -> None:
        if stop:
            self.quitting = True
            self.stop()
