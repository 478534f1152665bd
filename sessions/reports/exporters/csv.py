"""`csv`: one session's variant table with raw values; with `--sections layers`, every layer; with `--sections
roofline`, every layer's work, achieved rates and bound (`sessions.analyses.roofline`)."""

from __future__ import annotations

from sessions.reports.exporters import Exporter, ExportRequest


def render(request: ExportRequest) -> str:
    _, session = request.one()
    if request.sections == "layers":
        from sessions.reports.layer_detail import layers_csv

        return layers_csv(session)
    if request.sections == "roofline":
        from sessions.reports.roofline_report import roofline_csv

        return roofline_csv(session)
    from sessions.reports.export import export_csv

    return export_csv(session)


EXPORTER = Exporter("csv", render)
