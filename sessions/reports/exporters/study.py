"""`study`: the FP8 study section of one or more sessions."""

from __future__ import annotations

from sessions.reports.exporters import Exporter, ExportRequest


def render(request: ExportRequest) -> str:
    from sessions.reports.study_export import study_markdown

    return study_markdown(request.sources, request.rules())


EXPORTER = Exporter("study", render, many=True, help="the FP8 study section of one or more sessions")
