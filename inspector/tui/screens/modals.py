"""Small dialogs: help, regex filter, error, and a text page (environment and method)."""

from __future__ import annotations

import re
from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import Button, Input, Label, Markdown, Static

from inspector.tui.plain import plain
from sessions.reports.tables import terminal_text


def help_markdown(screen: Screen) -> str:
    """The keys of `screen` as they are bound now (focused widget, screen and app), generated, never written by hand."""
    rows: dict[str, list[str]] = {}
    for active in screen.active_bindings.values():
        binding = active.binding
        if binding.system or not binding.description:
            continue
        display = screen.app.get_key_display(binding)
        rows.setdefault(binding.description, []).append(display)
    lines = ["## Keys on this screen", "| key | what |", "|---|---|"]
    lines += ["| " + " ".join(keys).replace("|", "\\|") + f" | {what} |" for what, keys in rows.items()]
    lines += ["", "Click a column header to sort by it. Ctrl+P: every command."]
    return "\n".join(lines)


class HelpScreen(ModalScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,q,question_mark", "dismiss", "Close")]

    def __init__(self, markdown: str) -> None:
        super().__init__()
        self.markdown = markdown

    def compose(self) -> ComposeResult:
        with VerticalScroll(classes="help"):
            yield Markdown(terminal_text(self.markdown, keep_lines=True))


class ConfirmScreen(ModalScreen[bool]):
    """A yes / no question: y or Enter say yes, n or Esc no; Ctrl+C again says yes (quit means quit)."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("y,enter,ctrl+c", "dismiss(True)", "Yes", priority=True),
                Binding("n,escape", "dismiss(False)", "No", priority=True)]

    def __init__(self, question: str) -> None:
        super().__init__()
        self.question = question

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Static(plain(self.question))
            yield Label("[b]y[/b] yes   [b]n[/b] no")


class FilterScreen(ModalScreen[str | None]):
    """Asks for a regular expression; an empty answer clears the filter."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "dismiss(None)", "Cancel")]

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
            self.query_one("#problem", Static).update(plain(exc, style="red"))
            return
        self.dismiss(event.value)


class ErrorScreen(ModalScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,enter", "dismiss", "Close")]

    def __init__(self, message: str) -> None:
        super().__init__()
        self.message = message

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog error"):
            yield Label("Error", classes="title")
            yield Static(plain(self.message))
            yield Button("Close", id="close")

    def on_button_pressed(self) -> None:
        self.dismiss()


class TextScreen(ModalScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,q", "dismiss", "Close")]

    def __init__(self, markdown: str) -> None:
        super().__init__()
        self.markdown = markdown

    def compose(self) -> ComposeResult:
        with VerticalScroll(classes="dialog wide"):
            yield Markdown(terminal_text(self.markdown, keep_lines=True))
