"""`matrix`: a merged session's tables per axis pair (sessions not yet merged are merged first)."""

from __future__ import annotations

from sessions.reports.exporters import Exporter, ExportRequest


def render(request: ExportRequest) -> str:
    from sessions.analyses.merge import merge_sessions
    from sessions.reports.matrix_tables import matrix_markdown

    sources = request.sources
    merged = sources[0][1] if len(sources) == 1 and sources[0][1].merge else merge_sessions(sources, [])
    return matrix_markdown(merged)


EXPORTER = Exporter("matrix", render, many=True, help="a merged session's tables per axis pair")
