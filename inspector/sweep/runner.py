"""A sweep: matrix -> one resolved plan per job -> an executor -> each job's outcome -> one merged session.

Each request is resolved once, here, on the submitting machine (so a plan that cannot run fails before
anything is submitted), and the job runs that plan as it is; or, where the jobs run on other machines
(a Slurm login node without a GPU, a remote Ray cluster), each job resolves its request where it runs,
and only what needs no machine is checked here.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Literal

from inspector.sweep.executors import EXECUTORS, ExecutorOptions
from inspector.sweep.jobs import Job, Outcome, SweepFolder, plan_key
from inspector.sweep.matrix import Combination, Matrix, combinations
from sessions.documents.paths import data_home

Report = Callable[[str], None]
Resolve = Literal["here", "job"]


def default_folder(matrix: Matrix) -> Path:
    return data_home() / "sweeps" / matrix.name


PROGRESS_EVERY_S = 2.0  # planning a big matrix says how far it is at most this often


def plan_jobs(matrix: Matrix, origin: str, folder: SweepFolder, report: Report, where: Resolve = "here") -> list[Job]:
    """One job per distinct plan (bounded by `combinations`); progress reported while planning takes long."""
    jobs: dict[str, Job] = {}
    found = combinations(matrix, origin)
    last = time.monotonic()
    for index, combination in enumerate(found):
        if time.monotonic() - last >= PROGRESS_EVERY_S:
            report(f"planned {index} of {len(found)} combinations")
            last = time.monotonic()
        job = _job_resolved_here(combination, folder, report, index == 0) if where == "here" else \
            _job_resolved_there(combination, folder)
        if job.key in jobs:
            report(f"{label(combination.axes)} is the same plan as {label(jobs[job.key].axes)}: run once")
            continue
        jobs[job.key] = replace(job, imports=matrix.imports)
    if where == "job":
        report("each job resolves its plan (backend, device, tracer, defaults) on the machine it runs on")
    return list(jobs.values())


def _job_resolved_here(combination: Combination, folder: SweepFolder, report: Report, first: bool) -> Job:
    from inspector.resolve import resolve

    run = resolve(combination.request)
    if first:
        for note in run.notes:
            report(note)
    key = plan_key(run.plan)
    plan = replace(run.plan, out=str(folder.session(key).absolute()), raw_trace=None)
    return Job(key, combination.axes, plan, tuple(combination.request.run_argv()))


def _job_resolved_there(combination: Combination, folder: SweepFolder) -> Job:
    request = combination.request  # checked completely by `combinations`, variants and recipes included
    key = plan_key(request)
    request = replace(request, out=str(folder.session(key).absolute()), raw_trace=None)
    return Job(key, combination.axes, None, tuple(combination.request.run_argv()), request=request)


def label(axes: dict[str, str]) -> str:
    return " ".join(f"{name}={value}" for name, value in axes.items()) or "(no axes)"


def run_jobs(folder: SweepFolder, jobs: Sequence[Job], executor: str, options: ExecutorOptions,
             report: Report) -> tuple[dict[str, Outcome], bool]:
    """Run the jobs not finished earlier: every job's outcome by key (`skipped` for finished ones), and
    whether the sweep was interrupted (Ctrl-C reaches the running jobs too; queued ones never start)."""
    outcomes: dict[str, Outcome] = {}
    pending = []
    for job in jobs:
        folder.write_job(job)
        if folder.finished(job.key):
            outcomes[job.key] = Outcome(job.key, "skipped", notes=["finished earlier"])
        else:
            pending.append(job)
    report(f"{len(jobs)} jobs: {len(jobs) - len(pending)} finished earlier (skipped), "
           f"{len(pending)} to run ({executor})")

    def on_outcome(job: Job, outcome: Outcome) -> None:
        outcomes[job.key] = outcome
        report(f"{label(job.axes)}: {outcome.state}{': ' + outcome.error if outcome.error else ''}")

    if pending:
        try:
            EXECUTORS[executor](folder, pending, options, on_outcome)
        except KeyboardInterrupt:
            for job in pending:
                outcomes.setdefault(job.key, Outcome(job.key, "cancelled", "the sweep was interrupted"))
            return outcomes, True
    return outcomes, False


def merge_finished(folder: SweepFolder, jobs: Sequence[Job], command: list[str]) -> Path | None:
    """Every finished job's session joined into `merged.json`; None when no job has finished."""
    from sessions.analyses.merge import merge_sessions
    from sessions.documents.storage import load, save

    finished = [(str(folder.session(job.key)), load(folder.session(job.key)))
                for job in jobs if folder.finished(job.key)]
    if not finished:
        return None
    save(merge_sessions(finished, command), folder.merged)
    return folder.merged
