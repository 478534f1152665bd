"""The overview of one session: the verdict, a row per variant, latency bars, and the way into every view."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Static

from inspector.tui.plain import plain
from inspector.tui.screens.modals import TextScreen
from inspector.tui.screens.tables import (
    AllKernelsScreen,
    CompareScreen,
    FlagsScreen,
    GroupsScreen,
    PrecisionScreen,
    ok_variants,
)
from inspector.tui.screens.timeline import TimelineScreen
from inspector.tui.widgets.answer_panel import AnswerPanel, answer_text
from inspector.tui.widgets.latency_bars import LatencyBars, bars_of
from inspector.tui.widgets.table_panel import TablePanel
from inspector.tui.widgets.virtual_table import VirtualTable
from sessions.analyses.answer import Answer, answers
from sessions.analyses.comparison import batch_words
from sessions.analyses.groups import Rules
from sessions.analyses.verdict import verdict_lines
from sessions.documents.errors import InspectError
from sessions.documents.model import Session
from sessions.reports import views
from sessions.reports.export import write_new_markdown
from sessions.reports.exporters import ExportRequest, exporter
from sessions.reports.sections import environment_section, method_section


def drill_default(session: Session) -> str | None:
    """The variant drill-downs open first: the one the verdict speaks of (first FP8), else the first that finished.

    None when no variant finished (a study stopped during its first variant): there is nothing to drill into.
    """
    pair = views.default_pair(session)
    if pair is not None:
        return pair[1]
    ok = ok_variants(session)
    return ok[0] if ok else None


NOTHING_FINISHED = "no variant finished in this session: nothing to open"


OVERVIEW_ROWS = 10  # variant rows the overview's table shows before it scrolls
LARGE_SESSION_LAYERS = 20_000  # above this the overview paints first and its verdict line follows


class OverviewScreen(Screen):
    BINDINGS: ClassVar[list[BindingType]] = [
        # priority: the table would take g and k for top / up
        Binding("g", "groups", "Groups", id="overview.groups", priority=True),
        Binding("c", "compare", "Compare", id="overview.compare"),
        Binding("f", "flags", "Flagged", id="overview.flags"),
        Binding("p", "precision", "FP8", id="overview.precision"),
        Binding("k", "all_kernels", "Kernels", id="overview.kernels", priority=True),
        Binding("t", "timeline", "Timeline", id="overview.timeline"),
        Binding("e", "environment", "Env", id="overview.environment"),
        Binding("x", "export", "Export", id="overview.export"),
        Binding("escape", "back", "Back", show=False),
    ]

    def __init__(self, session: Session, path: Path | None, rules: Rules) -> None:
        super().__init__()
        self.session, self.path, self.rules = session, path, rules

    def compose(self) -> ComposeResult:
        s = self.session
        gpu = s.environment.gpu.name if s.environment.gpu else (s.environment.cpu or "GPU unknown")
        yield Static(plain(f"{s.study.model}  {batch_words(s)}  {s.study.backend} on {s.study.device} ({gpu})  "
                           f"{s.study.created}"), id="breadcrumb")
        if self.large:
            layers = sum(len(v.layers) for v in s.variants)
            yield AnswerPanel([], [f"verdict: comparing the groups of {layers:,} layers ..."], id="verdict")
        else:
            yield AnswerPanel(*self._answers(), id="verdict")
        table = views.session_variant_table(s)
        panel = TablePanel(table, id="overview-table")
        # every variant's row, up to a page (header and scrollbar besides), never fewer than the panel keeps: the
        # bars and notes below scroll in what is left
        panel.table.styles.height = max(min(len(table.rows), OVERVIEW_ROWS), TablePanel.MIN_ROWS) + 2
        yield panel
        with VerticalScroll(id="overview-more", can_focus=False):
            yield LatencyBars(bars_of(s), id="bars")
            yield Static(plain(*table.notes), id="notes")
        yield Footer(compact=True, show_command_palette=False)

    @property
    def large(self) -> bool:
        """Whether the verdict is worked out after the first paint (a session of many layers)."""
        return sum(len(v.layers) for v in self.session.variants) > LARGE_SESSION_LAYERS

    def _answers(self) -> tuple[list[Answer], list[str]]:
        """The FP8 answers, or the first verdict line where no quantized variant has one."""
        found = answers(self.session, self.rules)
        fallback = [] if found else (verdict_lines(self.session, self.rules)[:1]
                                     or ["no verdict: fewer than two timed variants"])
        return found, fallback

    def on_mount(self) -> None:
        self.query_one(TablePanel).table.focus()
        if self.large:  # after the first paint: the worker's Python would hold the interpreter while the screen draws
            self.call_after_refresh(self._work_out_verdict)

    @work(thread=True, exclusive=True, group="verdict")
    def _work_out_verdict(self) -> None:
        text = answer_text(*self._answers())
        self.app.call_from_thread(self.query_one("#verdict", AnswerPanel).query_one(Static).update, text)

    @property
    def crumbs(self) -> list[str]:
        return [self.session.study.model]

    def on_virtual_table_row_chosen(self, event: VirtualTable.RowChosen) -> None:
        """Enter on a variant: its groups (every session has layers, even a names-only import)."""
        variant = event.key if event.key in ok_variants(self.session) else drill_default(self.session)
        self._open_groups(variant)

    def action_groups(self) -> None:
        self._open_groups(drill_default(self.session))

    def _open_groups(self, variant: str | None) -> None:
        if variant is None:
            self.notify(NOTHING_FINISHED, severity="warning")
            return
        self.app.push_screen(GroupsScreen(self.session, self.rules, self.crumbs, variant))

    def action_compare(self) -> None:
        pair = views.default_pair(self.session)
        if pair is None:
            self.notify("comparing needs two variants that finished", severity="warning")
            return
        self.app.push_screen(CompareScreen(self.session, self.rules, *pair, self.crumbs))

    def action_flags(self) -> None:
        self.app.push_screen(FlagsScreen(self.session, self.rules, self.crumbs))

    def action_precision(self) -> None:
        """What the layers each recipe asked for in FP8 ran, by role; where no variant records it, a note."""
        screen = PrecisionScreen(self.session, self.rules, self.crumbs)
        if not screen.panel.data.rows:
            self.notify("no variant records what its FP8 layers ran (the engine's variants do)", severity="warning")
            return
        self.app.push_screen(screen)

    def action_all_kernels(self) -> None:
        variant = drill_default(self.session)
        if variant is None:
            self.notify(NOTHING_FINISHED, severity="warning")
            return
        self.app.push_screen(AllKernelsScreen(self.session, self.rules, variant, self.crumbs))

    def action_timeline(self) -> None:
        """One traced call of the variant the verdict speaks of, on a time axis."""
        variant = drill_default(self.session)
        if variant is None:
            self.notify(NOTHING_FINISHED, severity="warning")
            return
        self.app.push_screen(TimelineScreen(self.session, self.rules, variant, self.crumbs))

    def action_environment(self) -> None:
        self.app.push_screen(TextScreen(method_section(self.session) + "\n\n" + environment_section(self.session)))

    def action_export(self) -> None:
        """The session as Markdown, a new file in the exports folder (never over one)."""
        s = self.session
        request = ExportRequest([(str(self.path) if self.path else "", s)], lambda: self.rules)
        text = exporter("md").render(request)
        try:
            target = write_new_markdown(text, s.study.model, "session", s.study.created[:19])
        except InspectError as exc:
            self.notify(exc.message, severity="error")
            return
        self.notify(f"wrote {target}", markup=False)

    def action_back(self) -> None:
        if len(self.app.screen_stack) > 2:
            self.app.pop_screen()
