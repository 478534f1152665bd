"""Text from a session, a file or the user as the TUI's widgets show it (the one place it is made safe there)."""

from __future__ import annotations

from rich.text import Text

from sessions.reports.tables import terminal_text


def plain(*lines: object, style: str = "") -> Text:
    """`lines` as Rich Text, one under the other: never parsed as markup (`[/]`, `[@click=app.quit]` are shown as
    written) and every control character escaped (`sessions.reports.tables.terminal_text`)."""
    return Text("\n".join(terminal_text(line) for line in lines), style=style)


def facts_text(pairs: list[tuple[str, str]]) -> Text:
    """(label, value) pairs one a line, the label bold; both escaped as `plain` escapes."""
    text = Text()
    for i, (label, value) in enumerate(pairs):
        text.append(("\n" if i else "") + f"{terminal_text(label)}: ", style="bold")
        text.append(terminal_text(value))
    return text
