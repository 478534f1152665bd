"""A live study: the headless `run_study` in a thread worker, its progress shown per phase.

Stopping matches the headless Ctrl-C: the study thread gets a KeyboardInterrupt (StudyCancelled) at
its next Python step, the session file keeps every finished variant (it is saved atomically after
each step), and quitting exits with 130. Nothing runs on after the app has gone.
"""

from __future__ import annotations

import ctypes
import threading
from dataclasses import replace
from pathlib import Path
from typing import ClassVar

from textual import events, on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Footer, Log, ProgressBar, Static
from textual.worker import Worker, WorkerState

from inspector.eta import VARIANT_PHASES, Estimate
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
# the figures a variant gets first, shown first (a live table is read at 80 columns): then the rest as saved
LIVE_LEAD = ("variant", "status", "build s", "median ms", "kernels / call", "ops / call", "top-1 %")


def lead_columns(table: views.Table, labels: tuple[str, ...]) -> views.Table:
    """`table` with the columns named in `labels` first, in that order, the others after as they were."""
    order = [i for label in labels for i, c in enumerate(table.columns) if c.label == label]
    order += [i for i in range(len(table.columns)) if i not in order]
    return replace(table, columns=tuple(table.columns[i] for i in order),
                   rows=[tuple(row[i] for i in order) for row in table.rows],
                   time_column=order.index(table.time_column) if table.time_column is not None else None)


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

    class Output(Message):
        """A line a library wrote to stdout or stderr (`inspector.tui.output.LibraryOutput`)."""

        def __init__(self, line: str) -> None:
            super().__init__()
            self.line = line

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
        self.latest: dict[str, VariantSummary] = {}  # each variant's figures as the last step measured them

    def compose(self) -> ComposeResult:
        yield Static(plain(f"study of {self.request.model}"), id="breadcrumb")
        for phase in PHASES:
            with Horizontal(classes="phase"):
                yield Static(phase, classes="phase-label")
                yield ProgressBar(total=None, id=f"bar-{phase}", show_eta=False)
        yield Static("", id="eta")
        yield Static("variants: finished (saved in the session file), then the one running", classes="phase-label")
        yield TablePanel(views.variant_table([]), id="landed")
        yield Static("", id="caveats")  # what the quality figures above mean (random weights, a degenerate reference)
        yield Log(id="study-log", max_lines=None, auto_scroll=True)  # every line kept; it follows the newest
        yield Footer(compact=True, show_command_palette=False)

    def on_mount(self) -> None:
        self.app.begin_capture_print(self)  # Python's print and warnings from the study's thread: the log
        output = getattr(self.app, "output", None)
        if output is not None:  # C libraries' writes to descriptors 1 and 2: the log too, never the screen
            output.connect(lambda line: self.post_message(self.Output(line)))
        self.set_interval(1.0, self._tick)
        self.run_worker_study()

    def _tick(self) -> None:
        """The estimate counts down between steps."""
        self.query_one("#eta", Static).update(plain(self.estimate.line()))

    def on_print(self, event: events.Print) -> None:
        self.query_one(Log).write(terminal_text(event.text, keep_lines=True))

    @on(Output)
    def library_line(self, event: Output) -> None:
        self.query_one(Log).write_line(terminal_text(event.line))

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
        if p.phase in PHASES and p.total and (p.phase == "timing" or p.variant is not None):  # not a build's sub-steps
            self.query_one(f"#bar-{p.phase}", ProgressBar).update(total=p.total, progress=p.done)
        self.query_one("#eta", Static).update(plain(self.estimate.update(p)))
        if p.variants:
            self.latest = {summary.name: summary for summary in p.variants}
        if p.saved:  # finished means saved: a stop now keeps exactly these
            self.finished = p.variants
        self.query_one("#landed", TablePanel).show(self.live_table(p))
        self.query_one("#caveats", Static).update(plain("\n".join(p.caveats)))

    def live_table(self, p: Progress) -> views.Table:
        """The finished variants with their newest figures (a timing round's latency before it is saved), then the
        one under way with what it has so far (build time once built, quality, kernels), the figures leading."""
        shown = [self.latest.get(s.name, s) for s in self.finished]
        running = None
        if p.variant and p.phase in VARIANT_PHASES and p.variant not in {s.name for s in self.finished}:
            step = f"running: {p.phase}: {p.message}"
            if p.variant in self.latest:
                shown.append(replace(self.latest[p.variant], status=step))
            else:
                running = (p.variant, step[len("running: "):])
        return lead_columns(views.live_variant_table(shown, running), LIVE_LEAD)

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
        return (words.format(path=self.session_path) if self._saved()
                else words.split(";")[0] + "; nothing was saved yet")

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
                ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(self.thread_id),
                                                           ctypes.py_object(StudyCancelled))
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
