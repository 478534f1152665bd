"""The answer above the overview's table: per quantized variant its verdict, then the notes that qualify it."""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static

from inspector.tui.widgets.virtual_table import TONE_STYLES
from sessions.analyses.answer import Answer
from sessions.reports.tables import terminal_text


def answer_text(answers: Sequence[Answer], fallback: Sequence[str]) -> Text:
    """Rich Text built from plain strings (session text is never markup), one line per item, no control characters."""
    text = Text()
    for answer in answers:
        text.append(terminal_text(answer.headline), style=f"bold {TONE_STYLES.get(answer.tone, '')}".strip())
        for note in answer.notes:
            text.append("\n  · " + terminal_text(note), style="dim")
        text.append("\n")
    for line in fallback:
        text.append(terminal_text(line) + "\n", style="bold")
    text.rstrip()
    return text


class AnswerPanel(VerticalScroll, can_focus=False):
    """`answer_text` sized to its lines up to 40 % of the screen, scrolling beyond (the table stays in view)."""

    DEFAULT_CSS = """
    AnswerPanel { height: auto; max-height: 30%; padding: 0 1; border: round $panel; }
    AnswerPanel > Static { height: auto; }
    """

    def __init__(self, answers: Sequence[Answer], fallback: Sequence[str], *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.answers = list(answers)
        self.text = answer_text(answers, fallback)

    def compose(self) -> ComposeResult:
        yield Static(self.text)
