"""Reading and writing session files: atomic saves, strict loads, the default folder."""

from __future__ import annotations

import contextlib
import fcntl
import os
import stat
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import orjson

from sessions.codec import ShapeError, build
from sessions.errors import InputError, InspectError
from sessions.migrations import migrate
from sessions.model import SCHEMA_VERSION, TOOL, Session
from sessions.paths import sessions_dir


def encode(session: Session) -> bytes:
    return orjson.dumps(session, option=orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS)


def save(session: Session, path: Path) -> Path:
    """Write `session` to `path` atomically: a crash or a full disk never leaves a partial file."""
    path = Path(path)
    data = encode(session)
    try:
        decode(data, "the session")  # what is written must load: NaN, Inf or a wrong type fail here, old file intact
    except InputError as exc:
        raise InspectError(f"cannot save {path}: {exc.message}") from None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        _remove_stale_temporaries(path)
        fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise InspectError(f"cannot save session {path}: {exc.strerror or exc}") from exc
    try:
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "wb") as tmp:
            tmp.write(data)
            tmp.flush()
            os.fsync(tmp.fileno())
        os.replace(tmp_name, path)
    except OSError as exc:
        Path(tmp_name).unlink(missing_ok=True)
        raise InspectError(f"cannot save session {path}: {exc.strerror or exc}") from exc
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)
    return path


STALE_TEMPORARY_S = 60.0  # a save takes well under a second; older temporaries are orphans


def _remove_stale_temporaries(path: Path) -> None:
    """Temporary files of saves that were killed (SIGKILL, power loss); one writer holds the lock."""
    cutoff = time.time() - STALE_TEMPORARY_S
    for stale in path.parent.glob(f".{path.name}.*.tmp"):
        with contextlib.suppress(OSError):
            if stale.stat().st_mtime < cutoff:
                stale.unlink()


def check_writable(path: Path) -> None:
    """Fail now, with one line, if a session cannot be written at `path` (before hours of work)."""
    if path.is_dir():
        raise InputError(f"{path} is a folder; give a session file name")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".probe", dir=path.parent)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise InputError(f"cannot write a session at {path}: {exc.strerror or exc}") from None


@contextlib.contextmanager
def session_lock(path: Path) -> Iterator[None]:
    """Held while a study writes `path`: a second study writing the same file is refused."""
    lock_path = path.parent / f".{path.name}.lock"
    try:
        fd = os.open(lock_path, os.O_CREAT | os.O_RDWR, 0o644)
    except OSError as exc:
        raise InputError(f"cannot lock {path}: {exc.strerror or exc}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise InputError(f"{path} is being written by another trt-inspect run; use another --out") from None
    try:
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
        lock_path.unlink(missing_ok=True)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def decode(data: bytes, origin: str) -> Session:
    """Parse session bytes; every way they can be wrong becomes one InputError line."""
    if not data.strip():
        raise InputError(f"{origin} is empty, not a trt-inspect session")
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise InputError(f"{origin} is not valid JSON (corrupt or truncated): {exc}") from None
    if not isinstance(doc, dict) or doc.get("tool") != TOOL:
        raise InputError(f"{origin} is not a trt-inspect session")
    version = doc.get("schema_version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise InputError(f"{origin} has no valid schema_version")
    if version > SCHEMA_VERSION:
        raise InputError(
            f"{origin} uses session schema {version}, newer than this trt-inspect reads ({SCHEMA_VERSION}); upgrade trt-inspect"
        )
    if version < 1:
        raise InputError(f"{origin} has an unknown schema_version {version}")
    if version < SCHEMA_VERSION:
        try:
            doc = migrate(doc, version)
        except (TypeError, ValueError, AttributeError) as exc:
            raise InputError(f"{origin}: cannot bring schema {version} up to {SCHEMA_VERSION}: {exc}") from None
    try:
        session = build(Session, doc)
        for variant in session.variants:
            if variant.kernels is not None:
                variant.kernels.validate()
    except (ShapeError, ValueError) as exc:
        raise InputError(f"{origin} is not a valid session: {exc}") from None
    return session


MAX_SESSION_BYTES = 1 << 30  # 150k kernel records take about 7 MiB


def read_regular_file(path: Path, what: str, limit: int = MAX_SESSION_BYTES) -> bytes:
    """The bytes of a regular file no larger than `limit`; FIFOs, devices and folders refused with one line."""
    try:
        info = path.stat()
    except FileNotFoundError:
        raise InputError(f"no such {what}: {path}") from None
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}") from None
    if stat.S_ISDIR(info.st_mode):
        raise InputError(f"{path} is a folder, not a {what}")
    if not stat.S_ISREG(info.st_mode):
        raise InputError(f"{path} is not a regular file (a pipe or a device), not a {what}")
    if info.st_size > limit:
        raise InputError(f"{path} is {info.st_size / (1 << 20):.0f} MiB, over the {limit >> 20} MiB a {what} may have")
    try:
        return path.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}") from None


def load(path: Path | str) -> Session:
    path = Path(path)
    return decode(read_regular_file(path, "session file"), str(path))


@dataclass
class SessionEntry:
    path: Path
    model: str
    created: str
    gpu: str
    backend: str
    device: str
    variants: list[str]


def list_sessions(folder: Path | None = None) -> tuple[list[SessionEntry], list[str]]:
    """Saved sessions, newest first, and one line for each file that could not be read."""
    folder = folder or sessions_dir()
    entries: list[SessionEntry] = []
    problems: list[str] = []
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            session = load(path)
        except InputError as exc:
            problems.append(exc.message)
            continue
        gpu = session.environment.gpu.name if session.environment.gpu else session.environment.cpu
        entries.append(
            SessionEntry(
                path=path,
                model=session.study.model,
                created=session.study.created,
                gpu=gpu,
                backend=session.study.backend,
                device=session.study.device,
                variants=[v.name for v in session.variants],
            )
        )
    entries.sort(key=lambda e: e.created, reverse=True)
    return entries, problems


def resolve(name_or_path: str) -> Path:
    """A session named by path, or by file name / stem inside the default folder."""
    path = Path(name_or_path)
    if path.exists():
        return path
    for candidate in (sessions_dir() / name_or_path, sessions_dir() / f"{name_or_path}.json"):
        if candidate.is_file():
            return candidate
    raise InputError(f"no such session: {name_or_path} (see `trt-inspect sessions`)")
