"""The Textual app: a thin layer over sessions/, builders/ and profilers/."""

from __future__ import annotations

from pathlib import Path

from textual.app import App, SystemCommand
from textual.binding import Binding

from inspector.request import StudyRequest
from inspector.tui.screens.browser import BrowserScreen
from inspector.tui.screens.modals import HelpScreen
from inspector.tui.screens.overview import OverviewScreen
from inspector.tui.screens.study import StudyScreen
from sessions.groups import Rules, load_rules
from sessions.model import Session


class InspectorApp(App):
    CSS_PATH = "app.tcss"
    TITLE = "trt-inspect"
    BINDINGS = [
        Binding("ctrl+q", "quit", "Quit", id="app.quit", priority=True),
        Binding("question_mark", "help", "Help", id="app.help"),
        Binding("b", "browser", "Sessions", id="app.browser"),
    ]

    def __init__(
        self,
        session: Session | None = None,
        path: Path | None = None,
        study: StudyRequest | None = None,
        rules: Rules | None = None,
        sessions_folder: Path | None = None,
    ) -> None:
        super().__init__()
        self.session, self.path, self.study = session, path, study
        self.rules = rules or load_rules()
        self.sessions_folder = sessions_folder

    def on_mount(self) -> None:
        if self.study is not None:
            self.push_screen(StudyScreen(self.study, self.rules))
        elif self.session is not None:
            self.push_screen(OverviewScreen(self.session, self.path, self.rules))
        else:
            self.push_screen(BrowserScreen(self.rules, self.sessions_folder))

    def action_help(self) -> None:
        self.push_screen(HelpScreen())

    def action_browser(self) -> None:
        self.push_screen(BrowserScreen(self.rules, self.sessions_folder))

    def get_system_commands(self, screen):
        yield from super().get_system_commands(screen)
        yield SystemCommand("Sessions: Browse", "Saved sessions; mark two to compare", self.action_browser)
        yield SystemCommand("Help: Keys", "Every key binding", self.action_help)
        for name, description in (("groups", "Groups: Show"), ("flags", "Flagged layers: Show"), ("export", "Export: Markdown")):
            if isinstance(screen, OverviewScreen):
                yield SystemCommand(description, f"The {name} view of this session", getattr(screen, f"action_{name}"))
