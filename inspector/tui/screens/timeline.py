"""One traced call on a time axis: a lane per stream above the launches in order (gaps marked); + / - zoom
around the selected launch, [ ] another variant."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import Footer, Static

from inspector.tui.plain import plain
from inspector.tui.screens.tables import VariantTableScreen
from inspector.tui.widgets.virtual_table import VirtualTable
from sessions.analyses.groups import Rules
from sessions.documents.model import Session
from sessions.reports import views
from sessions.reports.timeline import Timeline, lanes, timeline_of, timeline_table

LABEL = 11  # characters before a lane: "stream 123 "
MAX_ZOOM = 4096.0
ZOOM_KEYS = Binding.Group("Zoom")  # + and - under one footer entry


class TimelineScreen(VariantTableScreen):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("plus,equals_sign", "zoom(2)", "Zoom in", id="timeline.zoom_in", group=ZOOM_KEYS),
        Binding("minus", "zoom(0.5)", "Zoom out", id="timeline.zoom_out", group=ZOOM_KEYS),
    ]

    def __init__(self, session: Session, rules: Rules, variant: str, crumbs: list[str]) -> None:
        self.zoom = 1.0
        self.timeline: Timeline | None = None
        super().__init__(session, rules, variant, crumbs)

    def build(self) -> views.Table:
        self.timeline = timeline_of(self.variant)
        return timeline_table(self.variant)

    def compose(self) -> ComposeResult:
        yield Static(plain(" > ".join(self.crumbs)), id="breadcrumb")
        yield Static("", id="lanes")
        yield self.panel
        yield Static(plain(*self.panel.data.notes), id="notes")
        yield Footer(compact=True, show_command_palette=False)

    def on_mount(self) -> None:
        super().on_mount()
        self.draw_lanes()

    def show(self, data: views.Table, crumbs: list[str] | None = None) -> None:
        super().show(data, crumbs)
        self.draw_lanes()

    def window(self) -> tuple[float, float]:
        """The time range the lanes show: the whole call, or 1 / zoom of it centred on the selected launch."""
        assert self.timeline is not None
        length = self.timeline.length_us
        if self.zoom <= 1:
            return 0.0, length
        span = length / self.zoom
        key = self.panel.table.cursor_key
        centre = self.timeline.spans[key].start_us if isinstance(key, int) else length / 2
        start = min(max(0.0, centre - span / 2), length - span)
        return start, start + span

    def draw_lanes(self) -> None:
        widget = self.query_one("#lanes", Static)
        if self.timeline is None:
            widget.update("")
            return
        width = max(self.size.width - LABEL - 2, 10)
        start, end = self.window()
        text = Text()
        for label, bar in lanes(self.timeline, width, start, end):
            text.append(f"{label:>{LABEL - 1}} ", style="bold")
            text.append(bar + "\n", style="green")
        key = self.panel.table.cursor_key
        if isinstance(key, int) and end > start:
            at = int((self.timeline.spans[key].start_us - start) / (end - start) * width)
            if 0 <= at < width:
                text.append(" " * (LABEL + at) + "▲ selected\n", style="yellow")
        text.append(f"{'':>{LABEL}}{start / 1e3:.3f} ms … {end / 1e3:.3f} ms (zoom x{self.zoom:g})", style="dim")
        widget.update(text)

    def action_zoom(self, factor: float) -> None:
        zoom = min(max(self.zoom * factor, 1.0), MAX_ZOOM)
        if zoom == self.zoom:  # the key is never silent: at either end it says why nothing moved
            self.notify("the whole call is shown" if factor < 1 else f"zoomed in as far as it goes (x{MAX_ZOOM:g})")
            return
        self.zoom = zoom
        self.draw_lanes()

    def on_virtual_table_moved(self, event: VirtualTable.Moved) -> None:
        self.draw_lanes()

    def on_resize(self) -> None:
        self.draw_lanes()

    def open_row(self, key: object) -> None:
        """Enter on a launch zooms onto it."""
        self.action_zoom(8)
