"""The Textual app: a thin layer over sessions/, builders/ and profilers/."""

from __future__ import annotations

from collections.abc import Iterable
from functools import partial
from pathlib import Path
from typing import ClassVar

from textual.app import App, SystemCommand
from textual.binding import Binding, BindingType
from textual.screen import Screen

from inspector.request import StudyRequest
from inspector.tui.output import LibraryOutput, terminal_driver
from inspector.tui.screens.browser import BrowserScreen
from inspector.tui.screens.modals import HelpScreen, help_keys
from inspector.tui.screens.overview import OverviewScreen
from inspector.tui.screens.study import StudyScreen
from sessions.analyses.groups import Rules, load_rules
from sessions.documents.model import Session


class InspectorApp(App):
    CSS_PATH = "app.tcss"
    TITLE = "trt-inspect"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+q,ctrl+c", "quit", "Quit", show=False, id="app.quit", priority=True),
        Binding("question_mark", "help", "Help", id="app.help"),
        Binding("b", "browser", "Sessions", show=False, id="app.browser"),
    ]

    def __init__(
        self,
        session: Session | None = None,
        path: Path | None = None,
        study: StudyRequest | None = None,
        rules: Rules | None = None,
        sessions_folder: Path | None = None,
        force: bool = False,
        output: LibraryOutput | None = None,
    ) -> None:
        """`output`: libraries' stdout and stderr, redirected while a live study runs; the app then draws on the
        terminal copy it keeps."""
        super().__init__(driver_class=terminal_driver(output) if output is not None else None)
        self.session, self.path, self.study, self.force = session, path, study, force
        self.output = output
        self.rules = rules or load_rules()
        self.sessions_folder = sessions_folder
        self.exit_note: str | None = None  # one line for stderr once the terminal is back (an interrupted study)

    def on_mount(self) -> None:
        if self.study is not None:
            self.push_screen(StudyScreen(self.study, self.rules, self.force))
        elif self.session is not None:
            self.push_screen(OverviewScreen(self.session, self.path, self.rules))
        else:
            self.push_screen(BrowserScreen(self.rules, self.sessions_folder))

    def _study_screen(self) -> StudyScreen | None:
        return next((s for s in self.screen_stack if isinstance(s, StudyScreen) and s.running), None)

    async def action_quit(self) -> None:
        """Quit; while a study runs, ask first (its screen stops it the way Ctrl-C stops a headless run)."""
        study = self._study_screen()
        if study is None:
            self.exit()
        else:
            study.action_quit_study()

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(help_keys(self.screen)))

    def action_browser(self) -> None:
        """The session browser: one at most (b on it does nothing); not while a study runs on its screen."""
        if self._study_screen() is not None:
            self.notify("a study is running: Ctrl+X stops it, then b browses", severity="warning")
            return
        if isinstance(self.screen, BrowserScreen):
            return
        existing = next((s for s in self.screen_stack if isinstance(s, BrowserScreen)), None)
        if existing is not None:
            while self.screen is not existing:
                self.pop_screen()
            return
        self.push_screen(BrowserScreen(self.rules, self.sessions_folder))

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        """Textual's commands, then one per key of the current screen (its own bindings, so every screen added
        brings its palette entries with it), named `screen: what`."""
        yield from super().get_system_commands(screen)
        yield SystemCommand("Sessions: Browse", "Saved sessions; mark two to compare", self.action_browser)
        yield SystemCommand("Help: Keys", "The keys of this screen", self.action_help)
        where = type(screen).__name__.removesuffix("Screen").lower() or "screen"
        for binding in screen_bindings(screen):
            yield SystemCommand(f"{where}: {binding.description}", f"key {binding.key}",
                                partial(screen.run_action, binding.action))


def screen_bindings(screen: Screen) -> list[Binding]:
    """The bindings this tool's screen classes declare (its own and inherited), each action once, described ones
    only."""
    found: dict[str, Binding] = {}
    for cls in (c for c in type(screen).__mro__ if c.__module__.startswith("inspector.")):
        for binding in cls.__dict__.get("BINDINGS", []):
            if isinstance(binding, Binding) and binding.description and binding.action not in found:
                found[binding.action] = binding
    return list(found.values())
