"""`json`: one session's summary with its verdicts; with `--sections layers`, every layer; with `--sections
roofline`, every layer's work, achieved rates and bound (`sessions.analyses.roofline`)."""

from __future__ import annotations

from sessions.documents.json_text import json_text
from sessions.reports.exporters import Exporter, ExportRequest


def render(request: ExportRequest) -> str:
    path, session = request.one()
    if request.sections == "layers":
        from sessions.reports.layer_detail import layers_document

        return json_text(layers_document(session, path or None))
    if request.sections == "roofline":
        from sessions.reports.roofline_report import roofline_records

        return json_text({"session": path or None, "layers": roofline_records(session)})
    from sessions.reports.export import export_json

    return json_text(export_json(session, path or None, request.rules()))


EXPORTER = Exporter("json", render)
