"""One traced call of each variant as a Chrome trace event file (`export --format perfetto`), which ui.perfetto.dev
and chrome://tracing open.

The format (Trace Event Format, JSON object form): `{"traceEvents": [...], "displayTimeUnit": "ms", ...}`. Each
variant is a process (`pid`, from 1 in session order) named by metadata events (`ph: "M"`: `process_name`,
`process_sort_index`); each stream of its kernel table (each thread, for CPU ops) is a thread (`tid`: the stream
number; `thread_name`, `thread_sort_index`). Kernels are complete events (`ph: "X"`, `ts` and `dur` in
microseconds from the call's first launch), each under a complete event of its layer on the same thread: a layer's
event spans a run of consecutive kernels of that layer on that stream, so a layer whose kernels another layer's
interrupt has one event per run. Events on one thread nest properly (none overlaps another partly): where a
kernel's recorded end passes the next kernel's start on its stream (timer jitter), its drawn `dur` stops at that
start; `args.duration_ns` always holds the recorded duration.

The call drawn is the traced call whose summed kernel time is the median of the variant's traced calls (the lower
median for an even count), so one cold or disturbed call is not the one a reader sees.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from sessions.analyses import captions
from sessions.documents.json_text import json_text
from sessions.documents.model import KernelTable, Session, Variant

OUTSIDE = "(outside layers)"  # the layer name of records no layer owns


@dataclass(frozen=True)
class Record:
    """One kernel (or CPU op) of the call drawn, in microseconds from the call's first launch."""

    row: int  # index into the variant's kernel table
    start_us: float
    drawn_us: float  # duration drawn: the recorded one, cut at the next launch on the stream where they overlap
    stream: int
    layer: int


def median_call(table: KernelTable) -> int:
    """The traced call whose summed kernel time is the (lower) median of the calls'; ties: the earliest call."""
    totals: dict[int, int] = {}
    for call, duration in zip(table.call, table.duration_ns, strict=False):
        totals[call] = totals.get(call, 0) + duration
    ranked = sorted(totals, key=lambda call: (totals[call], call))
    return ranked[(len(ranked) - 1) // 2]


def call_records(table: KernelTable, call: int) -> list[Record]:
    """The records of `call` in start order, with durations drawn so that no two on one stream overlap."""
    rows = sorted((i for i in range(len(table)) if table.call[i] == call), key=lambda i: (table.start_ns[i], i))
    if not rows:
        return []
    origin = table.start_ns[rows[0]]
    next_start: dict[int, int] = {}  # stream -> start of the launch after the current one on it
    drawn: dict[int, int] = {}
    for i in reversed(rows):
        stream, end = table.stream[i], table.start_ns[i] + table.duration_ns[i]
        later = next_start.get(stream)
        drawn[i] = max(0, min(end, later) - table.start_ns[i]) if later is not None else table.duration_ns[i]
        next_start[stream] = table.start_ns[i]
    return [Record(i, (table.start_ns[i] - origin) / 1e3, drawn[i] / 1e3, table.stream[i], table.layer[i])
            for i in rows]


def _us(value: float) -> float:
    """Microseconds to the nanosecond the records hold (no float noise in the file)."""
    return round(value, 3)


def _runs(records: list[Record]) -> list[list[Record]]:
    """Maximal runs of consecutive records of one layer on one stream, in start order."""
    runs: list[list[Record]] = []
    last: dict[int, list[Record]] = {}  # stream -> the run open on it
    for record in records:
        run = last.get(record.stream)
        if run is not None and run[-1].layer == record.layer:
            run.append(record)
        else:
            last[record.stream] = run = [record]
            runs.append(run)
    return runs


def _metadata(pid: int, tid: int | None, name: str, value: str | int) -> dict[str, Any]:
    event: dict[str, Any] = {"name": name, "ph": "M", "pid": pid,
                             "args": {"sort_index" if name.endswith("sort_index") else "name": value}}
    if tid is not None:
        event["tid"] = tid
    return event


def variant_events(variant: Variant, pid: int) -> list[dict[str, Any]]:
    """The metadata, layer and kernel events of `variant`'s median traced call as process `pid`; none without a
    kernel table."""
    table = variant.kernels
    if table is None or not len(table) or variant.trace is None:
        return []
    call = median_call(table)
    records = call_records(table, call)
    unit = variant.trace.unit
    lane = "thread" if unit == "op" else "stream"
    label = captions.variant_label(variant.name, variant.simulated)
    title = f"{label} ({variant.backend}, {variant.precision}): traced call {call + 1} of {variant.trace.calls}"
    events = [_metadata(pid, None, "process_name", title), _metadata(pid, None, "process_sort_index", pid)]
    for stream in sorted({r.stream for r in records}):
        events += [_metadata(pid, stream, "thread_name", f"{lane} {stream}"),
                   _metadata(pid, stream, "thread_sort_index", stream)]
    names = [layer.name for layer in variant.layers]
    for run in _runs(records):
        owner = names[run[0].layer] if 0 <= run[0].layer < len(names) else OUTSIDE
        start, end = run[0].start_us, run[-1].start_us + run[-1].drawn_us
        layer_args: dict[str, Any] = {"records": len(run)}
        if owner != OUTSIDE:
            layer = variant.layers[run[0].layer]
            layer_args.update(kind=layer.kind, precision=layer.precision, op=layer.op)
        events.append({"name": owner, "cat": "layer", "ph": "X", "pid": pid, "tid": run[0].stream,
                       "ts": _us(start), "dur": _us(end - start), "args": layer_args})
        for r in run:
            events.append({"name": table.names[table.name[r.row]], "cat": unit, "ph": "X", "pid": pid, "tid": r.stream,
                           "ts": _us(r.start_us), "dur": _us(r.drawn_us),
                           "args": {"layer": owner, "duration_ns": table.duration_ns[r.row],
                                    "grid": table.grid[r.row], "block": table.block[r.row]}})
    return events


def trace_document(session: Session, path: str | None) -> dict[str, Any]:
    """The trace event document of `session`: one process per variant with a kernel table, in session order."""
    events: list[dict[str, Any]] = []
    drawn = []
    for pid, variant in enumerate(session.variants, start=1):
        found = variant_events(variant, pid)
        if found:
            events += found
            drawn.append(variant.name)
    gpu = session.environment.gpu.name if session.environment.gpu else session.environment.cpu
    return {
        "traceEvents": events,
        "displayTimeUnit": "ms",
        "otherData": {
            "tool": session.tool, "session": path or "", "model": session.study.model, "device": gpu,
            "variants": drawn,
            "call": "per variant, the traced call whose summed kernel time is the median of its traced calls",
            "timestamps": "microseconds from the call's first launch; each variant's call starts at 0",
        },
    }


def trace_text(document: dict[str, Any]) -> str:
    """The document as JSON with one event per line (a tenth of the indented size, still readable in a diff)."""
    try:
        events = ",\n".join(orjson.dumps(event).decode() for event in document["traceEvents"])
        rest = orjson.dumps({k: v for k, v in document.items() if k != "traceEvents"}).decode()
    except orjson.JSONEncodeError:  # a name that is not UTF-8 (a file name's surrogates): json_text escapes it
        return json_text(document)
    return '{"traceEvents": [\n' + events + "\n],\n" + rest[1:] + "\n"
