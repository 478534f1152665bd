"""The overview of one session: the verdict, a row per variant, latency bars, and the way into every view."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import Footer, Static

from inspector.tui.plain import plain
from inspector.tui.screens.modals import TextScreen
from inspector.tui.screens.tables import AllKernelsScreen, CompareScreen, FlagsScreen, GroupsScreen, ok_variants
from inspector.tui.widgets.latency_bars import LatencyBars, bars_of
from inspector.tui.widgets.table_panel import TablePanel
from inspector.tui.widgets.virtual_table import VirtualTable
from sessions import views
from sessions.export import environment_section, export_markdown, free_name, method_section
from sessions.groups import Rules
from sessions.model import Session
from sessions.verdict import verdict_lines


def drill_default(session: Session) -> str:
    """The variant drill-downs open first: the one the verdict speaks of (first FP8), else the first that is not the baseline."""
    pair = views.default_pair(session)
    if pair is not None:
        return pair[1]
    ok = ok_variants(session)
    return (ok or [session.variants[0].name])[0]


LARGE_SESSION_LAYERS = 20_000  # above this the overview paints first and its verdict line follows


class OverviewScreen(Screen):
    BINDINGS: ClassVar[list[BindingType]] = [
        # priority: the table would take g and k for top / up
        Binding("g", "groups", "Groups", id="overview.groups", priority=True),
        Binding("c", "compare", "Compare", id="overview.compare"),
        Binding("f", "flags", "Flagged", id="overview.flags"),
        Binding("k", "all_kernels", "All kernels", id="overview.kernels", priority=True),
        Binding("e", "environment", "Env/method", id="overview.environment"),
        Binding("x", "export", "Export md", id="overview.export"),
        Binding("escape", "back", "Back", show=False),
    ]

    def __init__(self, session: Session, path: Path | None, rules: Rules) -> None:
        super().__init__()
        self.session, self.path, self.rules = session, path, rules

    def compose(self) -> ComposeResult:
        s = self.session
        gpu = s.environment.gpu.name if s.environment.gpu else (s.environment.cpu or "GPU unknown")
        yield Static(plain(f"{s.study.model}  batch {s.study.batch}  {s.study.backend} on {s.study.device} ({gpu})  {s.study.created}"),
                     id="breadcrumb")
        layers = sum(len(v.layers) for v in s.variants)
        waiting = plain(f"verdict: comparing the groups of {layers:,} layers ...", style="dim")
        yield Static(waiting if self.large else self._verdict(), id="verdict")
        table = views.session_variant_table(s)
        panel = TablePanel(table, id="overview-table")
        panel.styles.height = len(table.rows) + 3  # header, rows, scrollbar, count: the bars follow at once
        yield panel
        yield LatencyBars(bars_of(s), id="bars")
        yield Static(plain(*table.notes), id="notes")
        yield Footer()

    @property
    def large(self) -> bool:
        """Whether the verdict is worked out after the first paint (a session of many layers)."""
        return sum(len(v.layers) for v in self.session.variants) > LARGE_SESSION_LAYERS

    def _verdict(self) -> Text:
        verdicts = verdict_lines(self.session, self.rules)
        return plain(verdicts[0] if verdicts else "no verdict: fewer than two timed variants")

    def on_mount(self) -> None:
        self.query_one(TablePanel).table.focus()
        if self.large:  # after the first paint: the worker's Python would hold the interpreter while the screen draws
            self.call_after_refresh(self._work_out_verdict)

    @work(thread=True, exclusive=True, group="verdict")
    def _work_out_verdict(self) -> None:
        verdict = self._verdict()
        self.app.call_from_thread(self.query_one("#verdict", Static).update, verdict)

    @property
    def crumbs(self) -> list[str]:
        return [self.session.study.model]

    def on_virtual_table_row_chosen(self, event: VirtualTable.RowChosen) -> None:
        """Enter on a variant: its groups (every session has layers, even a names-only import)."""
        variant = event.key if event.key in ok_variants(self.session) else drill_default(self.session)
        self.app.push_screen(GroupsScreen(self.session, self.rules, self.crumbs, variant))

    def action_groups(self) -> None:
        self.app.push_screen(GroupsScreen(self.session, self.rules, self.crumbs, drill_default(self.session)))

    def action_compare(self) -> None:
        pair = views.default_pair(self.session)
        if pair is None:
            self.notify("comparing needs two variants that finished", severity="warning")
            return
        self.app.push_screen(CompareScreen(self.session, self.rules, *pair, self.crumbs))

    def action_flags(self) -> None:
        self.app.push_screen(FlagsScreen(self.session, self.rules, self.crumbs))

    def action_all_kernels(self) -> None:
        self.app.push_screen(AllKernelsScreen(self.session, self.rules, drill_default(self.session), self.crumbs))

    def action_environment(self) -> None:
        self.app.push_screen(TextScreen(method_section(self.session) + "\n\n" + environment_section(self.session)))

    def action_export(self) -> None:
        """The session as Markdown beside its file, under a new name where one exists; never over a file."""
        if self.path is None:
            self.notify("this session has no file yet", severity="warning")
            return
        try:
            target = free_name(self.path.with_suffix(".md"))
            with target.open("x") as out:
                out.write(export_markdown(self.session, self.rules, path=str(self.path)))
        except OSError as exc:
            self.notify(f"cannot write the Markdown: {exc.strerror or exc}", severity="error", markup=False)
            return
        self.notify(f"wrote {target}", markup=False)

    def action_back(self) -> None:
        if len(self.app.screen_stack) > 2:
            self.app.pop_screen()
