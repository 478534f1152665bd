"""The overview of one session: a column per variant, latency bars, and the way into every view."""

from __future__ import annotations

from pathlib import Path

from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import Footer, Static

from inspector.tui import rows
from inspector.tui.screens.modals import TextScreen
from inspector.tui.screens.tables import AllKernelsScreen, FlagsScreen, GroupsScreen
from inspector.tui.widgets.table_panel import TablePanel
from sessions.export import environment_section, export_markdown, method_section
from sessions.groups import Rules
from sessions.model import Session


def drill_default(session: Session) -> str:
    """The variant drill-downs open first: the first one that is not the baseline."""
    ok = [v.name for v in session.variants if v.status == "ok"]
    baseline = session.baseline()
    others = [n for n in ok if baseline is None or n != baseline.name]
    return (others or ok or [session.variants[0].name])[0]


class OverviewScreen(Screen):
    BINDINGS = [
        # priority: the overview's table would take g and k for top / up
        Binding("g", "groups", "Groups", id="overview.groups", priority=True),
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
        yield Static(f"{s.study.model}  batch {s.study.batch}  {s.study.backend} on {s.study.device} ({gpu})  {s.study.created}", id="breadcrumb")
        yield TablePanel(rows.overview(s), id="overview-table")
        yield Static("\n".join(rows.latency_bars(s)), id="bars")
        notes = []
        if any(v.simulated for v in s.variants):
            notes.append("simulated variants: numerics of the FP8 recipe, not FP8 kernel speed")
        baseline = s.baseline()
        if baseline is not None:
            notes.append(f"x = {baseline.name} median / variant median")
        yield Static("  ·  ".join(notes), id="notes")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one(TablePanel).table.focus()

    @property
    def crumbs(self) -> list[str]:
        return [self.session.study.model]

    def action_groups(self) -> None:
        self.app.push_screen(GroupsScreen(self.session, self.rules, self.crumbs, drill_default(self.session)))

    def action_flags(self) -> None:
        self.app.push_screen(FlagsScreen(self.session, self.rules, self.crumbs))

    def action_all_kernels(self) -> None:
        self.app.push_screen(AllKernelsScreen(self.session, self.rules, drill_default(self.session), self.crumbs))

    def action_environment(self) -> None:
        self.app.push_screen(TextScreen(method_section(self.session) + "\n\n" + environment_section(self.session)))

    def action_export(self) -> None:
        if self.path is None:
            self.notify("this session has no file yet", severity="warning")
            return
        target = self.path.with_suffix(".md")
        target.write_text(export_markdown(self.session, self.rules, path=str(self.path)))
        self.notify(f"wrote {target}")

    def action_back(self) -> None:
        if len(self.app.screen_stack) > 2:
            self.app.pop_screen()
