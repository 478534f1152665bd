"""Small dialogs: help, regex filter, error, and a text page (environment and method)."""

from __future__ import annotations

import re

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Markdown, Static

HELP = """\
## Keys
| key | what |
|---|---|
| enter | drill in: group -> layers -> kernels |
| esc | back |
| / | filter rows by a regular expression |
| s / S | sort by the next column / reverse |
| j k g G, arrows, page keys | move |
| [ ] | previous / next variant |
| 1 2 3 | groups by role / stage / kernel class |
| g (overview) | groups; f flagged layers; k all kernels |
| e | environment and method |
| x | overview: the session as Markdown beside it; tables: the table as shown |
| b | session browser; space marks, c compares two |
| ctrl+p | command palette; ctrl+q quits |
"""


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,q,question_mark", "dismiss", "Close")]

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Markdown(HELP)


class FilterScreen(ModalScreen[str | None]):
    """Asks for a regular expression; an empty answer clears the filter."""

    BINDINGS = [Binding("escape", "dismiss(None)", "Cancel")]

    def __init__(self, current: str | None) -> None:
        super().__init__()
        self.current = current or ""

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label("Filter rows (regular expression, empty clears):")
            yield Input(value=self.current, id="pattern")
            yield Static("", id="problem")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        try:
            re.compile(event.value)
        except re.error as exc:
            self.query_one("#problem", Static).update(f"[red]{exc}[/]")
            return
        self.dismiss(event.value)


class ErrorScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,enter", "dismiss", "Close")]

    def __init__(self, message: str) -> None:
        super().__init__()
        self.message = message

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog error"):
            yield Label("Error", classes="title")
            yield Static(self.message)
            yield Button("Close", id="close")

    def on_button_pressed(self) -> None:
        self.dismiss()


class TextScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,q", "dismiss", "Close")]

    def __init__(self, markdown: str) -> None:
        super().__init__()
        self.markdown = markdown

    def compose(self) -> ComposeResult:
        with VerticalScroll(classes="dialog wide"):
            yield Markdown(self.markdown)
