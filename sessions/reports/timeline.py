"""One traced call on a time axis: kernels on their streams, the idle gaps between launches, the copies.

Built from the kernel table's start times, durations and streams (recorded since the first session
schema); a variant without a kernel table has no timeline, and every view says so in `NO_TIMELINE`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sessions.documents.model import Variant
from sessions.reports.views import Column, Table, Tone

NO_TIMELINE = "no timeline recorded: this variant has no kernel trace (start times and streams)"
NO_COPIES = "copies: none recorded (the kernel tracer records kernel launches only, not memcpy / memset)"
GAP_US = 5.0  # idle time before a launch that a timeline marks: well above the ~2 us of back-to-back launches
_COPY = re.compile(r"mem(cpy|set)|memory copy", re.IGNORECASE)
BLOCKS = " ▁▂▃▄▅▆▇█"


@dataclass(frozen=True)
class Span:
    start_us: float  # from the call's first launch
    duration_us: float
    gap_us: float  # idle time (no stream busy) just before this span starts
    stream: int
    layer: str
    name: str
    copy: bool

    @property
    def end_us(self) -> float:
        return self.start_us + self.duration_us


@dataclass(frozen=True)
class Timeline:
    variant: str
    call: int
    calls: int
    spans: list[Span]

    @property
    def streams(self) -> list[int]:
        return sorted({s.stream for s in self.spans})

    @property
    def length_us(self) -> float:
        return max((s.end_us for s in self.spans), default=0.0)

    @property
    def busy_us(self) -> float:
        """Time at least one stream runs something (overlap counted once)."""
        return self.length_us - sum(s.gap_us for s in self.spans)

    @property
    def gaps(self) -> list[Span]:
        return [s for s in self.spans if s.gap_us > GAP_US]


def timeline_of(variant: Variant, call: int = 0) -> Timeline | None:
    """The spans of traced call `call`, in start order; None where the variant has no kernel trace."""
    table = variant.kernels
    rows = [i for i in range(len(table)) if table.call[i] == call] if table is not None else []
    if table is None or not rows:
        return None
    rows.sort(key=lambda i: table.start_ns[i])
    origin = table.start_ns[rows[0]]
    names = [layer.name for layer in variant.layers]
    spans, reached = [], origin
    for i in rows:
        start, end = table.start_ns[i], table.start_ns[i] + table.duration_ns[i]
        name = table.names[table.name[i]]
        owner = names[table.layer[i]] if 0 <= table.layer[i] < len(names) else "(outside layers)"
        spans.append(Span((start - origin) / 1e3, table.duration_ns[i] / 1e3, max(0, start - reached) / 1e3,
                          table.stream[i], owner, name, bool(_COPY.search(name))))
        reached = max(reached, end)
    return Timeline(variant.name, call, max(table.call) + 1, spans)


def summary_lines(timeline: Timeline) -> list[str]:
    """What a Nsight Systems user reads first: span, busy share, streams, the gaps and where they fall, copies."""
    length, busy, gaps = timeline.length_us, timeline.busy_us, timeline.gaps
    share = busy / length * 100 if length else 0.0
    first = (f"call {timeline.call + 1} of {timeline.calls} of {timeline.variant}: {len(timeline.spans)} launches on "
             f"{len(timeline.streams)} stream(s) over {length / 1e3:.3f} ms; "
             f"GPU busy {busy / 1e3:.3f} ms ({share:.1f} %)")
    lines = [first]
    if gaps:
        worst = max(gaps, key=lambda s: s.gap_us)
        lines.append(f"{len(gaps)} idle gaps over {GAP_US:g} us, {sum(s.gap_us for s in gaps) / 1e3:.3f} ms in all; "
                     f"the largest {worst.gap_us:.1f} us before {worst.layer} at {worst.start_us / 1e3:.3f} ms")
    else:
        lines.append(f"no idle gap over {GAP_US:g} us between launches")
    copies = [s for s in timeline.spans if s.copy]
    lines.append(f"copies: {len(copies)}, {sum(s.duration_us for s in copies):.1f} us" if copies else NO_COPIES)
    return lines


def traced_call_note(variant: Variant) -> str | None:
    """Which call this is: the eager call traced with ranges on, not the timed (graph) replays."""
    trace = variant.trace
    if trace is None or trace.traced_call_ms is None:
        return None
    untraced = f", untraced {trace.untraced_call_ms:.1f} ms" if trace.untraced_call_ms is not None else ""
    return (f"the eager call traced with {trace.tracer} and layer ranges on (host wall {trace.traced_call_ms:.1f} ms"
            f"{untraced}): its gaps hold eager launch and tracing overhead, not the timed replays' ")


def lanes(timeline: Timeline, width: int, start_us: float = 0.0, end_us: float | None = None) -> list[tuple[str, str]]:
    """(label, bar) per stream over [start_us, end_us): each character's block height is the busy share of its slice."""
    end = timeline.length_us if end_us is None else end_us
    if width <= 0 or end <= start_us:
        return []
    step = (end - start_us) / width
    out = []
    for stream in timeline.streams:
        busy = [0.0] * width
        for s in timeline.spans:
            if s.stream != stream or s.end_us <= start_us or s.start_us >= end:
                continue
            first, last = (int((max(s.start_us, start_us) - start_us) / step),
                           int((min(s.end_us, end) - start_us) / step))
            for cell in range(first, min(last, width - 1) + 1):
                lo, hi = start_us + cell * step, start_us + (cell + 1) * step
                busy[cell] += max(0.0, min(hi, s.end_us) - max(lo, s.start_us))
        out.append((f"stream {stream}",
                    "".join(BLOCKS[min(8, max(1 if b > 0 else 0, round(b / step * 8)))] for b in busy)))
    return out


TIMELINE_COLUMNS = (Column("start ms", "ms"), Column("us", "us"), Column("gap us", "us"), Column("stream", "count"),
                    Column("layer"), Column("kernel"))


def timeline_table(variant: Variant, call: int = 0) -> Table:
    """The spans of one call as rows (launch order); gaps over `GAP_US` marked; notes: the summary lines."""
    timeline = timeline_of(variant, call)
    title = f"timeline of {variant.name}"
    if timeline is None:
        return Table(TIMELINE_COLUMNS, [], [], [], notes=(NO_TIMELINE,), title=title)
    rows = [(s.start_us / 1e3, s.duration_us, s.gap_us, s.stream, s.layer, s.name) for s in timeline.spans]
    tones: list[Tone] = ["warn" if s.gap_us > GAP_US else ("dim" if s.copy else "") for s in timeline.spans]
    traced = traced_call_note(variant)
    notes = [*summary_lines(timeline), *([traced] if traced else [])]
    return Table(TIMELINE_COLUMNS, rows, list(range(len(rows))), tones,
                 notes=tuple(notes), title=title, time_column=1)
