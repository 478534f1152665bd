"""Where the jobs run: worker processes here (one per GPU), Ray tasks, or Slurm jobs through submitit.

No scheduling of our own: the local executor hands each free GPU the next job; Ray and Slurm place
the jobs. Each job is `jobs.run_job` (a fresh process per plan); a job that fails or is cancelled is
an `Outcome` with its error, and the others go on.
"""

from __future__ import annotations

import os
import queue
import sys
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from inspector.sweep.jobs import Job, Outcome, SweepFolder, run_job
from profilers.device import study_device
from sessions.documents.errors import MissingEnvironment, first_line

OnOutcome = Callable[[Job, Outcome], None]
EXTRA = "pip install 'trt-inspect[sweep]'"


@dataclass(frozen=True)
class ExecutorOptions:
    gpus: int | None = None  # local: GPUs used (default: every visible one); ray: GPUs of a local cluster
    ray_address: str | None = None  # a running cluster; None starts a local one
    partition: str | None = None
    time_limit_min: int = 120
    submitit_cluster: str | None = None  # None: Slurm where submitit finds it; "local": processes here


def check_available(executor: str) -> None:
    """Fail now, with one line, when the executor's extra is missing (before any plan is resolved)."""
    module = {"ray": "ray", "slurm": "submitit"}.get(executor)
    if module is None:
        return
    try:
        __import__(module)
    except ImportError:
        raise MissingEnvironment(f"--executor {executor} needs {module}: {EXTRA}") from None


def visible_gpus(limit: int | None) -> list[str]:
    listed = os.environ.get("CUDA_VISIBLE_DEVICES")
    if listed is not None:
        ids = [g.strip() for g in listed.split(",") if g.strip()]
    else:
        import torch

        ids = [str(i) for i in range(torch.cuda.device_count())]
    return ids[:limit] if limit else ids


def run_local(folder: SweepFolder, jobs: Sequence[Job], options: ExecutorOptions, on_outcome: OnOutcome) -> None:
    """One worker thread per GPU, each running its jobs as processes pinned to its GPU; CPU jobs one at a time."""
    cuda = any(study_device(job.device).gpu for job in jobs)
    slots: queue.Queue[str | None] = queue.Queue()
    for gpu in visible_gpus(options.gpus) if cuda else [None]:
        slots.put(gpu)
    if slots.empty():
        raise MissingEnvironment("--executor local: the plans need a GPU and none is visible")
    cwd = os.getcwd()

    def work(job: Job) -> None:
        gpu = slots.get()
        try:
            on_outcome(job, run_job(str(folder.root), job.key, cwd, gpu))
        finally:
            slots.put(gpu)

    pool = ThreadPoolExecutor(max_workers=slots.qsize())
    try:
        for future in [pool.submit(work, job) for job in jobs]:
            future.result()
    finally:  # on Ctrl-C the running jobs (same process group) stop themselves; queued ones never start
        pool.shutdown(wait=True, cancel_futures=True)


def run_ray(folder: SweepFolder, jobs: Sequence[Job], options: ExecutorOptions, on_outcome: OnOutcome) -> None:
    """One Ray task per plan (num_gpus=1 for CUDA plans; a CPU plan takes a whole node's CPUs)."""
    try:
        import ray
    except ImportError:
        raise MissingEnvironment(f"--executor ray needs ray: {EXTRA}") from None
    started = not ray.is_initialized()
    if started:
        ray.init(address=options.ray_address, num_gpus=options.gpus if options.ray_address is None else None,
                 include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        node_cpus = min(n["Resources"].get("CPU", 1) for n in ray.nodes() if n["Alive"])
        task = ray.remote(run_job)
        pending = {}
        for job in jobs:
            resources = {"num_gpus": 1, "num_cpus": 1} if study_device(job.device).gpu else {"num_cpus": node_cpus}
            ref = task.options(max_retries=0, **resources).remote(str(folder.root), job.key, os.getcwd())
            pending[ref] = job
        while pending:
            (ref,), _ = ray.wait(list(pending), num_returns=1)
            job = pending.pop(ref)
            try:
                outcome = ray.get(ref)
            except ray.exceptions.TaskCancelledError:
                outcome = Outcome(job.key, "cancelled", "the Ray task was cancelled")
            except ray.exceptions.RayError as exc:
                outcome = Outcome(job.key, "failed", f"Ray: {first_line(exc)}")
            on_outcome(job, outcome)
    finally:
        if started:
            ray.shutdown()


def run_slurm(folder: SweepFolder, jobs: Sequence[Job], options: ExecutorOptions, on_outcome: OnOutcome) -> None:
    """The plans as one submitit job array (a GPU each for CUDA plans); job ids printed, results awaited."""
    try:
        import submitit
    except ImportError:
        raise MissingEnvironment(f"--executor slurm needs submitit: {EXTRA}") from None
    executor = submitit.AutoExecutor(folder=folder.root / "submitit", cluster=options.submitit_cluster)
    submitted = []
    for gpu in (True, False):  # the GPU jobs in one batch, the CPU jobs in another
        group = [job for job in jobs if study_device(job.device).gpu is gpu]
        if not group:
            continue
        parameters: dict = {"timeout_min": options.time_limit_min, "name": f"trt-inspect-{folder.root.name}"}
        if options.partition:
            parameters["slurm_partition"] = options.partition
        if gpu:
            parameters["slurm_gres"] = "gpu:1"
        executor.update_parameters(**parameters)
        with executor.batch():
            handles = [executor.submit(run_job, str(folder.root), job.key, os.getcwd()) for job in group]
        submitted += zip(group, handles, strict=False)
    for job, handle in submitted:
        print(f"trt-inspect: [sweep] {job.key}: job {handle.job_id}", file=sys.stderr, flush=True)
    for job, handle in submitted:
        try:
            outcome = handle.result()
        except submitit.core.utils.UncompletedJobError as exc:
            outcome = Outcome(job.key, "cancelled", f"{handle.job_id} did not finish: {first_line(exc)}")
        except Exception as exc:  # noqa: BLE001  submitit re-raises the job's failure as it was
            outcome = Outcome(job.key, "failed", f"{handle.job_id}: {first_line(exc)}")
        outcome.job_id = str(handle.job_id)
        on_outcome(job, outcome)


EXECUTORS: dict[str, Callable[[SweepFolder, Sequence[Job], ExecutorOptions, OnOutcome], None]] = {
    "local": run_local, "ray": run_ray, "slurm": run_slurm,
}
