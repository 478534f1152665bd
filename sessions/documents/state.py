"""What a saved session is: complete, interrupted (at which step), or still being written by a live study.

Read from the session against its own plan (variants planned, timing rounds planned), so sessions
written before this module load and say the same; "running" is the study's file lock held by a live
process (`sessions.documents.storage.session_lock`: a flock, released by the kernel when its process dies).
"""

from __future__ import annotations

import fcntl
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from sessions.documents.model import Session

Kind = Literal["complete", "interrupted", "running"]


@dataclass(frozen=True)
class SessionState:
    kind: Kind
    step: str | None  # the step it stopped at (interrupted) or has reached (running); None when complete

    @property
    def text(self) -> str:
        return self.kind if self.step is None else f"{self.kind} ({self.step})"


def lock_path(path: Path) -> Path:
    """The lock file `sessions.documents.storage.session_lock` holds beside a session while a study writes it."""
    return path.parent / f".{path.name}.lock"


def lock_held(path: Path) -> bool:
    """Whether a live process holds the study lock of `path` (probed shared and non-blocking; never created)."""
    try:
        fd = os.open(lock_path(path), os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


def unfinished_step(session: Session) -> str | None:
    """The first step of the session's plan that its file does not hold; None when every step is there."""
    plan = session.study.plan
    if plan is None:  # imported files and merged sessions: nothing was planned here
        return None
    present = {v.name for v in session.variants}
    missing = [v.name for v in plan.variants if v.name not in present]
    if missing:
        return f"building {missing[0]}: {len(plan.variants) - len(missing)} of {len(plan.variants)} variants built"
    ok = [v for v in session.variants if v.status == "ok"]
    rounds = plan.timing.rounds
    done = min((_rounds_done(v.latency.round_medians_ms, rounds) if v.latency else 0 for v in ok), default=rounds)
    if done < rounds:
        return f"timing: {done} of {rounds} rounds saved"
    return None


def _rounds_done(round_medians: list[float], planned: int) -> int:
    """Rounds a latency holds; one without round medians (older sessions) counts as all."""
    return len(round_medians) if round_medians else planned


def session_state(session: Session, path: Path | None) -> SessionState:
    step = unfinished_step(session)
    if step is None:
        return SessionState("complete", None)
    if path is not None and lock_held(Path(path)):
        return SessionState("running", step)
    return SessionState("interrupted", step)
