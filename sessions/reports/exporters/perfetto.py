"""`perfetto`: one traced call per variant as Chrome trace event JSON (ui.perfetto.dev, chrome://tracing)."""

from __future__ import annotations

from pathlib import PurePath

from sessions.documents.errors import InputError
from sessions.reports.exporters import Exporter, ExportRequest


def render(request: ExportRequest) -> str:
    """The trace of the one session asked for; a session with no kernel trace in any variant is refused (exit 2)."""
    from sessions.reports.perfetto import trace_document, trace_text

    path, session = request.one()
    document = trace_document(session, PurePath(path).name if path else None)
    if not document["traceEvents"]:
        raise InputError("no variant of this session has a kernel trace (start times and streams): nothing to draw")
    return trace_text(document)


EXPORTER = Exporter("perfetto", render, help="one traced call per variant as Chrome trace event JSON (ui.perfetto.dev)")
