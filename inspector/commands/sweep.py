"""`trt-inspect sweep MATRIX`: a matrix of studies, one job per plan (here, on Ray or on Slurm), merged."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, Literal

from inspector.commands.output import err, print_json
from sessions.documents.errors import ExitCode, InputError
from sessions.reports.tables import terminal_text

NAME = "sweep"
BUILDS_MODELS = True  # the CLI checks the torch / torchvision pair before it runs


def add_parser(sub: Any) -> None:
    p = sub.add_parser(NAME, help="run a matrix of studies, one job per plan (here, on Ray or on Slurm), "
                       "and merge them")
    p.add_argument("matrix", help="TOML file: [base] options, [axes] lists, [[exclude]] combinations")
    p.add_argument("--executor", default="local", choices=["local", "ray", "slurm"])
    p.add_argument("--gpus", type=int,
                   help="local: GPUs used (default: every visible one); ray: GPUs of a local cluster")
    p.add_argument("--out", type=_folder_name, help="the sweep's folder (default: <user data>/sweeps/<name>)")
    p.add_argument("--dry-run", action="store_true", help="print the plans and the job count; run nothing")
    p.add_argument("--allow-imports", action="store_true",
                   help="let the matrix's [sweep] imports run in every job (plug-in backends and tracers: code)")
    p.add_argument("--ray-address", help="a running Ray cluster (default: start a local one)")
    p.add_argument("--partition", help="Slurm partition")
    p.add_argument("--time-limit", type=int, default=120, metavar="MINUTES", help="Slurm time limit per job")
    p.add_argument("--resolve", choices=["here", "job"],
                   help="where each plan is resolved (backend, device, tracer, defaults): here, or on the machine each "
                        "job runs on (default: job for slurm and for a remote Ray cluster, here otherwise)")
    p.add_argument("--submitit-cluster", choices=["slurm", "local", "debug"],
                   help="submitit's executor (default: Slurm where found; local runs the jobs here)")
    p.add_argument("--json", action="store_true")


def _folder_name(text: str) -> str:
    """--out as given; an empty one is refused, never taken for the default folder."""
    if not text:
        raise argparse.ArgumentTypeError("the sweep's folder name is empty; give one, or leave --out out")
    return text


def run(args: argparse.Namespace) -> int:
    from inspector.sweep.executors import ExecutorOptions, check_available
    from inspector.sweep.jobs import SweepFolder
    from inspector.sweep.matrix import check_imports, load_matrix
    from inspector.sweep.runner import default_folder, merge_finished, plan_jobs, run_jobs

    if args.gpus is not None and args.gpus < 1:
        raise InputError("--gpus must be at least 1")
    if not args.dry_run:
        check_available(args.executor)
    matrix = load_matrix(Path(args.matrix))  # its name checked as a folder name, its options against the spec
    check_imports(matrix, args.matrix, args.allow_imports)
    folder = SweepFolder(Path(args.out) if args.out else default_folder(matrix))
    remote = args.executor == "slurm" or (args.executor == "ray" and args.ray_address)
    where: Literal["here", "job"] = args.resolve or ("job" if remote else "here")
    jobs = plan_jobs(matrix, args.matrix, folder, lambda line: err(f"[sweep] {line}"), where)
    if args.dry_run:
        return _print_plans(folder, jobs, args.json)
    options = ExecutorOptions(args.gpus, args.ray_address, args.partition, args.time_limit, args.submitit_cluster)
    with folder.lock():
        outcomes, interrupted = run_jobs(folder, jobs, args.executor, options, lambda line: err(f"[sweep] {line}"))
        merged = merge_finished(folder, jobs, args.argv)
    _print_outcomes(folder, jobs, outcomes, merged, args.json)
    if interrupted:
        return ExitCode.INTERRUPTED
    return (ExitCode.OK if all(o.state in ("done", "skipped") and not o.error for o in outcomes.values())
            else ExitCode.FAILURE)


def _print_plans(folder: Any, jobs: list[Any], as_json: bool) -> int:
    from sessions.reports.tables import render_text

    finished = [job for job in jobs if folder.finished(job.key)]
    if as_json:
        print_json({"folder": str(folder.root),
                    "jobs": [{**job.__dict__, "finished": job in finished} for job in jobs]})
        return ExitCode.OK
    axes = list(jobs[0].axes) if jobs else []
    rows = [[job.key, *job.axes.values(), *_plan_columns(job), "finished" if job in finished else "to run"]
            for job in jobs]
    print(render_text(["key", *axes, "backend", "device", "tracer", "variants", "state"], rows))
    print(terminal_text(f"{len(jobs)} jobs, {len(finished)} finished earlier; folder {folder.root}"))
    return ExitCode.OK


def _plan_columns(job: Any) -> list[str]:
    """backend, device, tracer, variants of a job's plan; for a job resolved where it runs, what it asked for."""
    if job.plan is not None:
        plan = job.plan
        return [plan.backend, plan.device, plan.tracer, ",".join(v.name for v in plan.variants)]
    request, there = job.request, "(on the job's machine)"
    return [request.backend if request.backend != "auto" else there, request.device or there,
            request.tracer if request.tracer != "auto" else there, request.variants or there]


def _print_outcomes(folder: Any, jobs: list[Any], outcomes: dict[str, Any], merged: Any, as_json: bool) -> None:
    from sessions.reports.tables import render_text

    if as_json:
        print_json({"folder": str(folder.root), "merged": str(merged) if merged else None,
                    "jobs": [{"axes": job.axes, "session": str(folder.session(job.key)), **outcomes[job.key].__dict__}
                             for job in jobs if job.key in outcomes]})
        return
    axes = list(jobs[0].axes) if jobs else []
    rows = [[job.key, *job.axes.values(), outcomes[job.key].state, outcomes[job.key].job_id,
             outcomes[job.key].error or str(folder.session(job.key))] for job in jobs if job.key in outcomes]
    print(render_text(["key", *axes, "state", "job id", "error or session"], rows))
    print(terminal_text(f"merged: {merged}" if merged else "merged: nothing (no job finished)"))
