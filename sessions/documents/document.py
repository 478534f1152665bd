"""A new session document, whoever makes it (a study, the FP8 probe, imported files, a merge): the one
constructor, which stamps when it was made and by which version of this tool."""

from __future__ import annotations

import datetime as dt
import subprocess
from importlib import metadata
from pathlib import Path

from sessions.documents.model import Environment, Merge, Session, Study, TimingMethod, Variant
from sessions.documents.plan import StudyPlan
from sessions.documents.vocab import Device, Source

TOOL_ROOT = Path(__file__).resolve().parents[2]


def tool_version() -> str:
    try:
        return metadata.version("trt-inspect")
    except metadata.PackageNotFoundError:
        return "unknown"


def tool_commit(root: Path = TOOL_ROOT) -> str | None:
    """The git commit of the checkout at `root` (this code's), "-dirty" with local changes; None when installed."""
    if not (root / ".git").exists():
        return None
    try:
        head = _git(root, "rev-parse", "HEAD")
        changes = _git(root, "status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.SubprocessError):
        return None
    return f"{head}-dirty" if changes else head or None


def _git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=10,
                          check=True).stdout.strip()


def new_session(*, model: str, source: Source, input_shape: list[int], batch: int | None, command: list[str],
                backend: str, device: Device, weights: str, engine: str | None, environment: Environment,
                method: TimingMethod, created: dt.datetime | None = None, plan: StudyPlan | None = None,
                engine_options: dict[str, str] | None = None, variants: list[Variant] | None = None,
                merge: Merge | None = None, made_by: str | None = None) -> Session:
    """A session of the study these fields describe, made at `created` (UTC; default now), stamped to the second.

    `made_by`: the tool version of the sessions a merge joins; None: this tool, its version and commit.
    """
    moment = (created or dt.datetime.now(dt.UTC)).astimezone(dt.UTC)
    study = Study(
        model=model, source=source, input_shape=input_shape, batch=batch, command=command,
        created=moment.isoformat(timespec="seconds"), backend=backend, device=device,
        tool_version=made_by if made_by is not None else tool_version(),
        weights=weights, plan=plan, tool_commit=tool_commit() if made_by is None else None, engine=engine,
        engine_options=dict(engine_options or {}),
    )
    return Session(study=study, environment=environment, method=method, variants=list(variants or []), merge=merge)
