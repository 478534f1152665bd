"""One sweep job: a plan (or, resolved where the job runs, a request) written to the sweep's folder, run in a
process of its own.

Every executor (local, Ray, Slurm) runs the same `run_job`: it starts `python -m inspector.sweep.worker`
on the job's file, so a crash, a leak or a stuck GPU context ends with that process, and reads the
outcome the worker left in `status/<key>.json`. A job is finished when that says `done`; a rerun of
the sweep skips it. The key is a hash of the plan (of the request where the job resolves it), so an
edited matrix reruns only what changed.
"""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

import orjson

from inspector.request import StudyRequest
from sessions.documents.codec import ShapeError, build
from sessions.documents.errors import InputError
from sessions.documents.input_files import MAX_TEXT_FILE_BYTES, read_regular_file
from sessions.documents.plan import StudyPlan

State = Literal["done", "failed", "cancelled", "skipped"]


@dataclass(frozen=True)
class Job:
    key: str
    axes: dict[str, str]
    plan: StudyPlan | None  # out: the job's session in the sweep's folder; None: resolved where the job runs
    command: tuple[str, ...]  # the `trt-inspect run` command that asks for the same plan
    imports: tuple[str, ...] = ()
    request: StudyRequest | None = None  # what the job resolves where it runs (out: its session), when plan is None

    @property
    def device(self) -> str:
        """Where the job runs: the plan's device, or, resolved on the job's machine, the one asked for
        (a GPU unless the matrix says cpu)."""
        if self.plan is not None:
            return self.plan.device
        return self.request.device if self.request is not None and self.request.device else "cuda"


@dataclass
class Outcome:
    key: str
    state: State
    error: str | None = None  # one line; for `done`, the variants that failed, if any
    job_id: str | None = None  # the scheduler's id (Slurm)
    notes: list[str] = field(default_factory=list)


def plan_key(plan: StudyPlan | StudyRequest) -> str:
    """A hash of what the plan (or request) measures: where its files go is not part of it."""
    unplaced = replace(plan, out=None, raw_trace=None)
    if isinstance(unplaced, StudyRequest):
        unplaced = replace(unplaced, command=())
    return hashlib.sha256(orjson.dumps(unplaced, option=orjson.OPT_SORT_KEYS)).hexdigest()[:16]


@dataclass(frozen=True)
class SweepFolder:
    root: Path

    def job_file(self, key: str) -> Path:
        return self.root / "jobs" / f"{key}.json"

    def session(self, key: str) -> Path:
        return self.root / "sessions" / f"{key}.json"

    def status(self, key: str) -> Path:
        return self.root / "status" / f"{key}.json"

    def log(self, key: str) -> Path:
        return self.root / "logs" / f"{key}.log"

    @property
    def merged(self) -> Path:
        return self.root / "merged.json"

    def lock(self) -> AbstractContextManager[None]:
        """Held while a sweep runs jobs in this folder and merges them: a second sweep into it is refused."""
        from sessions.documents.storage import file_lock

        self.root.mkdir(parents=True, exist_ok=True)
        return file_lock(self.root / ".sweep.lock", f"{self.root} is in use by another trt-inspect sweep; wait for it "
                         "to end or give another --out")

    def write_job(self, job: Job) -> None:
        """The job's plan, for its worker: through the one writer, replacing the plan of an earlier sweep."""
        from sessions.documents.storage import LOCK_WAIT_S, file_writer

        with file_writer(self.job_file(job.key), "job file", True, LOCK_WAIT_S) as writer:
            writer.write(orjson.dumps(job, option=orjson.OPT_INDENT_2))

    def read_job(self, key: str) -> Job:
        try:
            return build(Job, orjson.loads(read_regular_file(self.job_file(key), "job file", MAX_TEXT_FILE_BYTES)))
        except (InputError, orjson.JSONDecodeError, ShapeError) as exc:
            raise InputError(f"cannot read job {self.job_file(key)}: {exc}") from None

    def write_status(self, outcome: Outcome) -> None:
        """The job's outcome, written by its worker through the one writer (atomic: the sweep reads it any time)."""
        from sessions.documents.storage import LOCK_WAIT_S, file_writer

        with file_writer(self.status(outcome.key), "status file", True, LOCK_WAIT_S) as writer:
            writer.write(orjson.dumps(outcome))

    def read_status(self, key: str) -> Outcome | None:
        try:
            return build(Outcome, orjson.loads(read_regular_file(self.status(key), "status file", MAX_TEXT_FILE_BYTES)))
        except (InputError, orjson.JSONDecodeError, ShapeError):
            return None

    def finished(self, key: str) -> bool:
        outcome = self.read_status(key)
        return outcome is not None and outcome.state == "done" and self.session(key).is_file()


def worker_command(root: str, key: str) -> tuple[list[str], dict[str, str]]:
    """The worker's command line and environment: Python with `-P` (the working folder is not put on the import
    path, so a `profilers.py` or `sessions.py` there is never imported) and this tool's own folder first on
    PYTHONPATH (the worker imports the same code as the command that started it)."""
    tool_root = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([tool_root, *filter(None, [env.get("PYTHONPATH")])])
    return [sys.executable, "-P", "-m", "inspector.sweep.worker", root, key], env


def run_job(root: str, key: str, cwd: str | None = None, gpu: str | None = None) -> Outcome:
    """Run job `key` of the sweep in `root` in a fresh process; its output goes to the job's log.

    `cwd` is where relative paths of the plan (images, checkpoints) are found; it is never on the import path.
    `gpu` sets CUDA_VISIBLE_DEVICES (the local executor); Ray and Slurm set it themselves.
    """
    folder = SweepFolder(Path(root))
    folder.status(key).unlink(missing_ok=True)
    command, env = worker_command(root, key)
    if gpu is not None:
        env["CUDA_VISIBLE_DEVICES"] = gpu
    from sessions.documents.storage import log_file

    log = folder.log(key)
    with log_file(log, "job log") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=cwd)
        try:
            code = process.wait()
        except BaseException:  # the sweep was interrupted or cancelled: stop the job too
            process.terminate()
            process.wait()
            raise
    outcome = folder.read_status(key)
    if outcome is not None:
        return outcome
    if code < 0:
        why = f"killed by {signal.Signals(-code).name}"
    else:
        why = f"exited with code {code} and no result"
    outcome = Outcome(key, "failed", f"{why}; log: {log}")
    folder.write_status(outcome)
    return outcome
