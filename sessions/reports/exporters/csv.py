"""`csv`: one session's variant table with raw values; with `--sections layers`, every layer."""

from __future__ import annotations

from sessions.reports.exporters import Exporter, ExportRequest


def render(request: ExportRequest) -> str:
    _, session = request.one()
    if request.sections == "layers":
        from sessions.reports.layer_detail import layers_csv

        return layers_csv(session)
    from sessions.reports.export import export_csv

    return export_csv(session)


EXPORTER = Exporter("csv", render)
