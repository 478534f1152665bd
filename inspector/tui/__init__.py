"""The Textual front end; imported only when a terminal session opens it. It never imports the CLI."""

from __future__ import annotations

import os
import sys
import threading

from inspector.process import run_exit_finalizers
from inspector.request import StudyRequest
from sessions.documents.errors import ExitCode


def open_tui(session: str | None = None, request: StudyRequest | None = None, force: bool = False) -> int:
    """Open a saved session, run a study from a request (`force`: it may replace the session at its --out), or
    show the session browser."""
    from inspector.tui.app import InspectorApp
    from inspector.tui.output import LibraryOutput
    from sessions.documents.storage import load, resolve

    output = None
    if request is not None:
        if sys.platform != "win32" and sys.__stderr__ is not None and sys.__stderr__.isatty():
            output = LibraryOutput()  # what C libraries print goes to the study's log, not over the screen
        app = InspectorApp(study=request, force=force, output=output)
        if output is not None:  # redirected once the app is made: an error making it still reaches the terminal
            output.start()
    elif session is not None:
        path = resolve(session)
        app = InspectorApp(session=load(path), path=path)
    else:
        app = InspectorApp()
    try:
        app.run()
    finally:
        if output is not None:
            output.stop()
    code = app.return_code or 0
    if app.exit_note:
        print(f"trt-inspect: {app.exit_note}", file=sys.stderr, flush=True)
    if code == ExitCode.INTERRUPTED and threading.active_count() > 1:
        try:
            run_exit_finalizers()
        finally:  # a study step still unwinding: its session file is already saved (atomic writes)
            os._exit(code)
    return code
