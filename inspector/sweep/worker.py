"""`python -m inspector.sweep.worker ROOT KEY`: run one job's plan and leave its outcome in the folder.

Progress goes to stderr (the job's log); the outcome to `status/KEY.json`, written last, so a job killed
on the way leaves none and its executor reports how it ended.
"""

from __future__ import annotations

import importlib
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from inspector.sweep.jobs import Job, Outcome, SweepFolder
from sessions.documents.errors import ExitCode, InspectError

if TYPE_CHECKING:
    from inspector.study import Progress
    from sessions.documents.model import Session


def main(argv: list[str]) -> int:
    from inspector.process import interrupt_on_sigterm, quiet_libraries

    quiet_libraries()
    with interrupt_on_sigterm():
        return _run_job(argv)


def _run_job(argv: list[str]) -> int:
    from inspector.study import one_line

    folder, key = SweepFolder(Path(argv[0])), argv[1]
    job = folder.read_job(key)

    def report(progress: Progress) -> None:
        print(f"[{progress.phase}] {progress.message}", file=sys.stderr, flush=True)

    try:
        from inspector import torch_stack

        torch_stack.check()  # as the CLI's model commands: a mismatched pair is the job's one-line reason
        for module in job.imports:
            importlib.import_module(module)
        session, path = run_job(job, report)
    except InspectError as exc:
        folder.write_status(Outcome(key, "failed", exc.message))
        return exc.exit_code
    except KeyboardInterrupt:
        folder.write_status(Outcome(key, "cancelled", "interrupted (SIGINT or SIGTERM)"))
        return ExitCode.INTERRUPTED
    except Exception as exc:  # noqa: BLE001  any crash of the study: the traceback stays in the log
        traceback.print_exc()
        folder.write_status(Outcome(key, "failed", one_line(exc)))
        return ExitCode.FAILURE
    failed = [f"{v.name}: {v.error}" for v in session.variants if v.status != "ok"]
    folder.write_status(Outcome(key, "done", "; ".join(failed) or None))
    print(f"saved {path}", file=sys.stderr)
    return ExitCode.OK


def run_job(job: Job, report: Callable[[Progress], None]) -> tuple[Session, Path]:
    """The job's study: its plan, checked here (`run_study`), or, for a job resolved where it runs, its request
    resolved here, on the job's machine."""
    from inspector.resolve import resolve
    from inspector.study import Progress, run_checked, run_study

    if job.plan is not None:
        return run_study(job.plan, list(job.command), report)
    if job.request is None:
        raise InspectError(f"job {job.key} holds neither a plan nor a request")
    run = resolve(job.request)
    for note in run.notes:
        report(Progress("setup", note))
    return run_checked(run, list(job.command), report)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
