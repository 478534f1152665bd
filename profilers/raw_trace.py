"""Raw tracer records as JSON, so attribution can be rerun and tested away from the GPU."""

from __future__ import annotations

from pathlib import Path

import orjson

from profilers.attribution import KernelRecord, Launch, Range, TraceRecords
from sessions.documents.errors import InputError
from sessions.documents.input_files import read_regular_file

FORMAT = "trt-inspect-raw-trace/1"


def dump(records: TraceRecords, path: Path) -> None:
    doc = {
        "format": FORMAT,
        "tracer": records.tracer,
        "unit": records.unit,
        "calls": records.calls,
        "dropped": records.dropped,
        "note": records.note,
        "kernels": [[k.name, k.start, k.end, k.correlation, k.stream, list(k.grid), list(k.block)]
                    for k in records.kernels],
        "launches": [[x.correlation, x.thread, x.time] for x in records.launches],
        "ranges": [[r.name, r.thread, r.start, r.end] for r in records.ranges],
    }
    from sessions.documents.storage import file_writer

    with file_writer(path, "raw trace", True) as writer:  # --raw-trace DIR: a rerun replaces its records
        writer.write(orjson.dumps(doc))


def load(path: Path) -> TraceRecords:
    try:
        doc = orjson.loads(read_regular_file(Path(path), "raw trace"))
        if doc.get("format") != FORMAT:
            raise ValueError(f"format is {doc.get('format')!r}, expected {FORMAT}")
        return TraceRecords(
            tracer=doc["tracer"],
            unit=doc["unit"],
            calls=doc["calls"],
            kernels=[KernelRecord(n, s, e, c, st, tuple(g), tuple(b)) for n, s, e, c, st, g, b in doc["kernels"]],
            launches=[Launch(c, t, tm) for c, t, tm in doc["launches"]],
            ranges=[Range(n, t, s, e) for n, t, s, e in doc["ranges"]],
            dropped=doc.get("dropped", 0),
            note=doc.get("note", ""),
        )
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise InputError(f"{path} is not a raw trace: {exc}") from None
