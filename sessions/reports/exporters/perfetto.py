"""`perfetto`: one traced call per variant as Chrome trace event JSON (ui.perfetto.dev, chrome://tracing)."""

from __future__ import annotations

from pathlib import PurePath

from sessions.reports.exporters import Exporter, ExportRequest


def render(request: ExportRequest) -> str:
    from sessions.reports.perfetto import trace_document, trace_text

    path, session = request.one()
    return trace_text(trace_document(session, PurePath(path).name if path else None))


EXPORTER = Exporter("perfetto", render, help="one traced call per variant as Chrome trace event JSON (ui.perfetto.dev)")
