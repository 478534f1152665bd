"""Median latency per variant as bars over the whole width, coloured by direction, with a sparkline of the samples."""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual.widget import Widget

from inspector.tui.widgets.virtual_table import TONE_STYLES
from sessions.documents.model import Session
from sessions.reports import views
from sessions.reports.tables import terminal_text

SPARK = 24  # characters of sparkline per variant


@dataclass(frozen=True)
class Bar:
    name: str
    median_ms: float
    tone: str
    samples: tuple[float, ...]


def bars_of(session: Session) -> list[Bar]:
    table = views.session_variant_table(session)
    tones = dict(zip(table.keys, table.tones, strict=False))
    return [Bar(v.name, v.latency.median_ms, tones.get(v.name, ""), tuple(v.latency.samples_ms))
            for v in session.variants if v.latency]


class LatencyBars(Widget):
    DEFAULT_CSS = "LatencyBars { height: auto; padding: 0 1; }"

    def __init__(self, bars: list[Bar], *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.bars = bars

    def get_content_height(self, container, viewport, width: int) -> int:
        return max(len(self.bars), 1)

    def render(self) -> Text:
        if not self.bars:
            return Text("no latency measured", style="dim")
        names = [terminal_text(b.name) for b in self.bars]
        label = max(len(name) for name in names)
        longest = max(b.median_ms for b in self.bars) or 1.0
        room = max(self.size.width - label - 12 - SPARK - 3, 4)
        out = Text()
        for i, bar in enumerate(self.bars):
            out.append(names[i].ljust(label) + " ")
            out.append("█" * max(1, round(bar.median_ms / longest * room)), style=TONE_STYLES.get(bar.tone) or "cyan")
            out.append(f" {bar.median_ms:.3f} ms ".rjust(12 + room - max(1, round(bar.median_ms / longest * room))))
            out.append(views.sparkline(bar.samples, SPARK), style="dim")
            if i < len(self.bars) - 1:
                out.append("\n")
        return out
