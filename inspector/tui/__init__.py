"""The Textual front end; imported only when a terminal session opens it."""

from __future__ import annotations


def open_tui(session: str | None = None, model_args: list[str] | None = None) -> int:
    """Open a saved session, run a study from CLI-style arguments, or show the session browser."""
    from inspector.tui.app import InspectorApp
    from sessions.storage import load, resolve

    if model_args is not None:
        from inspector.cli import build_parser, study_options

        args = build_parser().parse_args(["run", *model_args])
        app = InspectorApp(study=(study_options(args), ["trt-inspect", *model_args]))
    elif session is not None:
        path = resolve(session)
        app = InspectorApp(session=load(path), path=path)
    else:
        app = InspectorApp()
    app.run()
    return app.return_code or 0
