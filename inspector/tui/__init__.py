"""The Textual front end; imported only when a terminal session opens it. It never imports the CLI."""

from __future__ import annotations

from inspector.request import StudyRequest


def open_tui(session: str | None = None, request: StudyRequest | None = None) -> int:
    """Open a saved session, run a study from a request, or show the session browser."""
    from inspector.tui.app import InspectorApp
    from sessions.storage import load, resolve

    if request is not None:
        app = InspectorApp(study=request)
    elif session is not None:
        path = resolve(session)
        app = InspectorApp(session=load(path), path=path)
    else:
        app = InspectorApp()
    app.run()
    return app.return_code or 0
