"""What commands print: one error or progress line on stderr, data (JSON, a session's summary) on stdout."""

from __future__ import annotations

import datetime
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sessions.documents.errors import ExitCode, InputError, InspectError
from sessions.documents.json_text import json_text
from sessions.reports.tables import terminal_text

if TYPE_CHECKING:
    from sessions.analyses.groups import Rules


def err(message: str) -> None:
    """One line on stderr; what a session or a file put in it is escaped for the terminal."""
    print(f"trt-inspect: {terminal_text(message)}", file=sys.stderr, flush=True)


def print_json(document: Any) -> None:
    sys.stdout.write(json_text(document))


def _print_summary(session: Any, path: Path | str | None) -> None:
    from sessions.analyses.groups import load_rules
    from sessions.analyses.precision_choice import variant_notes
    from sessions.analyses.summary import simulation_lines
    from sessions.analyses.verdict import verdict_lines
    from sessions.reports import views
    from sessions.reports.tables import table_text

    gpu = session.environment.gpu.name if session.environment.gpu else (session.environment.cpu or "GPU unknown")
    batch = session.study.batch or "several"  # 0: a merged session of several batch sizes
    print(terminal_text(f"{session.study.model}  batch {batch}  "
                        f"{session.study.backend} on {session.study.device} ({gpu})"))
    print(table_text(views.session_variant_table(session)))
    from sessions.analyses.layer_verdict import layer_time_lines

    rules = load_rules()
    for line in (verdict_lines(session, rules) or layer_time_lines(session, rules)) + simulation_lines(session):
        print(terminal_text(line))
    for variant in session.variants:
        for note in variant_notes(variant):
            print(terminal_text(f"note ({variant.name}): {note}"))
    if path is not None:
        print(terminal_text(f"session: {path}"))


def print_session(session: Any, path: Path | str | None, as_json: bool) -> None:
    """A session's summary: its variant table, verdict and notes, or with `as_json` the summary document."""
    if as_json:
        from sessions.analyses.summary import summary_document

        print_json(summary_document(session, str(path)))
    else:
        _print_summary(session, path)


def run_headless(run: Callable[[Callable[[Any], None]], tuple[Any, Path]],
                 as_json: bool) -> tuple[int, Any, Path | None]:
    """Run a study, printing progress on stderr, with the time left (`inspector.eta.Estimate`) after each variant built
    and each timing round; Ctrl-C keeps what is saved and exits 130.

    Returns the exit code, the session and its path (None, None after an interrupt).
    """
    from inspector.eta import Estimate

    saved: list[Path] = []
    started = time.monotonic()
    estimate = Estimate()  # what is left, updated as each variant and each timing round finishes

    def report(progress: Any) -> None:
        if progress.session_path is not None:
            saved[:] = [progress.session_path]
        counted = progress.total > 0 and (progress.phase == "timing"
                                          or (progress.phase == "build" and progress.variant))
        left = estimate.update(progress)  # every step: the plan's line in set-up holds its estimate per step
        left = left if counted else ""
        err(f"[{progress.phase} {time.monotonic() - started:.1f} s] {progress.message}"
            + (f" ({left})" if left else ""))

    try:
        session, path = run(report)
    except KeyboardInterrupt:
        where = f"; finished variants are saved in {saved[-1]}" if saved else ""
        err(f"interrupted{where}")
        return ExitCode.INTERRUPTED, None, None
    except InspectError as exc:
        if saved:
            exc.message += f" (measured so far: {saved[-1]})"
        raise
    print_session(session, path, as_json)
    # a study returns once a variant measured (its failed ones marked in the table); where every one failed it raises
    return ExitCode.OK, session, path


def rules(path: str | None) -> Rules:
    """The grouping rules: the built-in ones, after those of the TOML file at `path` where one is given."""
    from sessions.analyses.groups import load_rules

    return load_rules(Path(path) if path else None)


def check_out(out: str | None, what: str, force: bool, wait_s: float = 0.0) -> None:
    """The file a command will write, checked as soon as its arguments are read, before any work (a model loading,
    a GPU step): `sessions.documents.storage.check_target`'s rules for a named file (another writer waited for
    up to `wait_s`); for a default name (`out` None) the sessions folder writable. An empty `out` is refused,
    never taken for one not given."""
    from sessions.documents.paths import session_file
    from sessions.documents.storage import check_target, check_writable

    if out is None:
        check_writable(session_file(None, "check", datetime.datetime.now()), what)
        return
    if not out:
        raise InputError(f"the {what} file name is empty; give one")
    check_target(Path(out), what, force, wait_s)


def interactive() -> bool:
    return sys.stdin.isatty() and sys.stdout.isatty()
