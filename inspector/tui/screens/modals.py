"""Small dialogs: help, regex filter, error, a row in full, and a text page (environment and method)."""

from __future__ import annotations

import re
from typing import ClassVar

from rich.columns import Columns
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import Button, Input, Label, Markdown, Static

from inspector.tui.plain import facts_text, plain
from sessions.reports.tables import terminal_text


def help_keys(screen: Screen) -> list[tuple[str, str]]:
    """(keys, what) for each key of `screen` as bound now (focused widget, screen and app): generated, never written
    by hand; keys that do the same thing share an entry."""
    rows: dict[str, list[str]] = {}
    for active in screen.active_bindings.values():
        binding = active.binding
        if binding.system or not binding.description:
            continue
        display = screen.app.get_key_display(binding)
        rows.setdefault(binding.description, []).append(display)
    return [(" ".join(keys), what) for what, keys in rows.items()]


def key_columns(keys: list[tuple[str, str]]) -> Columns:
    """The keys as `key  what` cells in as many columns as the width allows, read down each column."""
    width = max((len(k) for k, _ in keys), default=1)
    cells = [Text.assemble((terminal_text(k).rjust(width), "bold"), "  ", terminal_text(what)) for k, what in keys]
    return Columns(cells, padding=(0, 3), column_first=True)


HELP_FOOT = "Click a column header to sort by it. Ctrl+P: every command. Esc closes."


class HelpScreen(ModalScreen[None]):
    """The keys of the screen below, in columns (all of them on one page at 80x24)."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,q,question_mark", "dismiss", "Close")]

    def __init__(self, keys: list[tuple[str, str]]) -> None:
        super().__init__()
        self.keys = keys

    @property
    def text(self) -> str:
        """Every entry as `keys: what`, one a line (what the columns show)."""
        return "\n".join(f"{k}: {what}" for k, what in self.keys)

    def compose(self) -> ComposeResult:
        with VerticalScroll(classes="help"):
            yield Static("Keys on this screen", classes="help-title")
            yield Static(key_columns(self.keys), id="help-keys")
            yield Static(HELP_FOOT, classes="help-foot")


class FactsScreen(ModalScreen[None]):
    """One row in full, label by label (Enter on a row that has nothing further to open)."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,q,enter", "dismiss", "Close")]

    def __init__(self, title: str, facts: list[tuple[str, str]]) -> None:
        super().__init__()
        self.title_text, self.facts = title, facts

    def compose(self) -> ComposeResult:
        with VerticalScroll(classes="dialog wide"):
            yield Static(plain(self.title_text), classes="help-title")
            yield Static(facts_text(self.facts), id="facts")


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
