"""Sessions joined into one comparison, keyed by the axes that differ between them.

A merged session is an ordinary session (schema 2): its variants are renamed `<axes>/<variant>`
(`senet154 b32/fp8-all`), carry their `axes` and the index of the job they came from, and each job
keeps its study (plan, command), environment and method in `Session.merge.jobs`. Every view opens it;
speed-ups compare a variant with its own job's baseline (`sessions.analyses.comparison`).
"""

from __future__ import annotations

import copy
import os
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

from sessions.documents.document import new_session
from sessions.documents.engines import engine_label, engine_options
from sessions.documents.errors import InputError
from sessions.documents.model import Environment, GpuInfo, Merge, MergedJob, Session, Variant
from sessions.documents.vocab import shared_gpu_state

VARIANT_AXIS = "variant"


def _level(s: Session) -> str | None:
    return engine_options(s.study).get("opt_level")


def _timing(s: Session) -> str:
    return f"{s.method.rounds}x{s.method.iters}"


# What may tell jobs apart, in the order the comparison names them; an axis is one whose value differs.
AXES: dict[str, Callable[[Session], str | None]] = {
    "model": lambda s: s.study.model,
    "gpu": lambda s: s.environment.gpu.name if s.environment.gpu else None,
    "backend": lambda s: s.study.backend,
    "device": lambda s: s.study.device,
    "engine": lambda s: engine_label(s.study, s.environment),  # the backend's own words, its version in them
    "opt_level": _level,
    "batch": lambda s: str(s.study.batch),
    "input": lambda s: "x".join(map(str, s.study.input_shape)),
    "weights": lambda s: s.study.weights,
    "calib_count": lambda s: str(s.study.plan.calib_count) if s.study.plan is not None else None,
    "seed": lambda s: str(s.study.plan.seed) if s.study.plan is not None else None,
    "tracer": lambda s: s.study.plan.tracer if s.study.plan is not None else None,
    "timing": _timing,
}
LABELS: dict[str, Callable[[str], str]] = {
    "model": lambda v: v,
    "gpu": lambda v: v.removeprefix("NVIDIA "),
    "batch": lambda v: f"b{v}",
    "opt_level": lambda v: f"L{v}",
    "backend": lambda v: v,
    "engine": lambda v: v,
    "device": lambda v: v,
    VARIANT_AXIS: lambda v: v,
}


def axis_values(session: Session) -> dict[str, str]:
    """`session`'s value on every axis of `AXES` ("-": none)."""
    return {axis: value if (value := get(session)) is not None else "-" for axis, get in AXES.items()}


def varying_axes(values: Sequence[dict[str, str]]) -> list[str]:
    """The axes whose value differs between jobs, in `AXES` order."""
    return [axis for axis in AXES if len({v[axis] for v in values}) > 1]


def axis_label(axis: str, value: str) -> str:
    return LABELS.get(axis, lambda v: f"{axis}={v}")(value)


def job_label(axes: dict[str, str]) -> str:
    return " ".join(axis_label(axis, value) for axis, value in axes.items())


def split_merged(session: Session, path: str) -> list[tuple[str, Session]]:
    """The sessions a merged session was joined from, as they were; a plain session is its own one job."""
    if session.merge is None:
        return [(path, session)]
    jobs = []
    for index, job in enumerate(session.merge.jobs):
        variants = [_unmerged(v) for v in session.variants if v.job == index]
        jobs.append((job.path, Session(study=job.study, environment=job.environment, method=job.method,
                                       variants=variants)))
    return jobs


def _unmerged(variant: Variant) -> Variant:
    return replace(variant, name=variant.axes.get(VARIANT_AXIS, variant.name), job=None, axes={})


def merge_sessions(sources: Sequence[tuple[str, Session]], command: list[str]) -> Session:
    """One session from `sources` ((path, session) pairs; merged ones are split into their jobs first)."""
    jobs = [job for path, session in sources for job in split_merged(session, path)]
    if not jobs:
        raise InputError("nothing to merge: no sessions given")
    values = [axis_values(session) for _, session in jobs]
    axes = varying_axes(values) or ["model"]
    keyed = [{axis: v[axis] for axis in axes} for v in values]
    labels = [job_label(k) for k in keyed]
    if len(set(labels)) < len(labels):
        axes.append("session")
        for k, (path, _) in zip(keyed, jobs, strict=False):
            k["session"] = path
        labels = [job_label(k) for k in keyed]
        if len(set(labels)) < len(labels):
            raise InputError("the same session is given twice; merge each session once")
    merged_jobs, variants = [], []
    for index, ((path, session), key, label) in enumerate(zip(jobs, keyed, labels, strict=False)):
        merged_jobs.append(MergedJob(path, label, key, session.study, session.environment, session.method))
        for variant in session.variants:
            renamed = copy.deepcopy(variant)
            renamed.name, renamed.job, renamed.axes = (f"{label}/{variant.name}", index,
                                                       {**key, VARIANT_AXIS: variant.name})
            variants.append(renamed)
    sessions = [session for _, session in jobs]
    first = sessions[0].study
    batches, devices = {s.study.batch for s in sessions}, {s.study.device for s in sessions}
    return new_session(
        model=_one([s.study.model for s in sessions], "merged"),
        source=first.source,
        input_shape=first.input_shape if len({tuple(s.study.input_shape) for s in sessions}) == 1 else [],
        batch=first.batch if len(batches) == 1 else None,  # None: several, each job's own in merge.jobs
        command=command,
        backend=_one([s.study.backend for s in sessions]),
        device=first.device if len(devices) == 1 else "cuda" if "cuda" in devices else first.device,
        made_by=_one([s.study.tool_version for s in sessions]),
        weights=_one([s.study.weights for s in sessions]),
        engine=_one([engine_label(s.study, s.environment) for s in sessions]),
        plan=None,  # a merged session reruns job by job (`rerun` on each job's session, or the sweep)
        environment=common_environment([s.environment for s in sessions]),
        method=sessions[0].method, variants=variants, merge=Merge(axes + [VARIANT_AXIS], merged_jobs),
    )


def _one(values: Sequence[str], several: str = "several") -> str:
    unique = list(dict.fromkeys(values))
    return unique[0] if len(unique) == 1 else f"{several}: {', '.join(unique)}"


def common_environment(environments: list[Environment]) -> Environment:
    """What every job shares; a field that differs says `several: ...` (each job keeps its own)."""
    first = environments[0]
    gpus = [e.gpu for e in environments]
    if all(g is not None for g in gpus) and len({g.name for g in gpus if g is not None}) == 1:
        gpu: GpuInfo | None = first.gpu
    elif any(g is not None for g in gpus):
        gpu = GpuInfo(name=_one([g.name if g is not None else "none" for g in gpus]))
    else:
        gpu = None
    versions = {name: version for name, version in first.versions.items()
                if all(e.versions.get(name) == version for e in environments)}
    return Environment(host=_one([e.host for e in environments]), os=_one([e.os for e in environments]),
                       cpu=_one([e.cpu for e in environments]), cpu_count=first.cpu_count,
                       python=_one([e.python for e in environments]), versions=versions, gpu=gpu,
                       gpu_state=shared_gpu_state(e.gpu_state for e in environments))


def collect(paths: Sequence[str], target: Path | None = None) -> tuple[list[tuple[str, Session]], list[str]]:
    """Sessions named by files or folders (a sweep's folder: its `sessions/`), and one line per skipped file.

    A file named on the command line must be a session; a file inside a folder that is not one is skipped.
    A merge never writes over one of its inputs: a named file that is `target` is refused, one found in a
    folder is skipped.
    """
    from sessions.documents.storage import load

    found: list[tuple[str, Session]] = []
    skipped: list[str] = []
    for name in paths:
        path = Path(name)
        if not path.is_dir():
            if _same_file(path, target):
                raise InputError(f"--out {target} is one of the sessions to merge; give another file")
            found.append((str(path), load(path)))
            continue
        folder = path / "sessions" if (path / "sessions").is_dir() else path
        for file in sorted(folder.glob("*.json")):
            if _same_file(file, target):
                skipped.append(f"{file} is the --out file")
                continue
            try:
                found.append((str(file), load(file)))
            except InputError as exc:
                skipped.append(exc.message)
    return found, skipped


def _same_file(path: Path, target: Path | None) -> bool:
    """Whether `path` and `target` name one file (through links, `..` or another spelling)."""
    if target is None:
        return False
    try:
        return os.path.samefile(path, target)
    except OSError:  # either is missing: a file that does not exist is not an input
        return path.absolute() == target.absolute()
