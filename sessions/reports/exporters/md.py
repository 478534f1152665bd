"""`md`: one session as README-ready Markdown sections (`--sections` picks them)."""

from __future__ import annotations

from sessions.documents.errors import InputError
from sessions.reports.exporters import Exporter, ExportRequest


def render(request: ExportRequest) -> str:
    from sessions.reports import export

    path, session = request.one()
    sections = [s.strip() for s in request.sections.split(",")] if request.sections else None
    unknown = [s for s in sections or [] if s not in export.SECTIONS]
    if unknown:
        raise InputError(f"unknown section {unknown[0]!r}; known: {', '.join(export.SECTIONS)}")
    return export.export_markdown(session, request.rules(), sections, path or None)


EXPORTER = Exporter("md", render)
