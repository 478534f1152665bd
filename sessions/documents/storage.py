"""Reading and writing session files: atomic saves, strict loads, the default folder; and the one writer of every
file a command writes (`file_writer`, `session_writer`, `log_file`, `scratch_path`): no other module opens a file
for writing (tests/test_architecture.py checks it; the caches under builders/ write through `write_atomically`)."""

from __future__ import annotations

import contextlib
import copy
import errno
import fcntl
import os
import stat
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from sessions.documents.codec import ShapeError, build, builds_all
from sessions.documents.consistency import check_figures
from sessions.documents.errors import InputError, InspectError
from sessions.documents.gc_pause import gc_paused
from sessions.documents.input_files import read_regular_file
from sessions.documents.migrations import migrate
from sessions.documents.model import SCHEMA_VERSION, TOOL, Layer, Session, Variant
from sessions.documents.paths import ChosenPath, sessions_dir

ENCODING = orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS
LAYER_SLICE = 500  # layers encoded, and read back by the save check, at a time: a small document, its memory reused


@gc_paused()  # the encoder's work on a large session's dicts otherwise starts collector passes over all of it
def encode(session: Session) -> bytes:
    return orjson.dumps(session, option=ENCODING)


@dataclass(frozen=True)
class Encoded:
    """A session's bytes and the parts the save check reads them by (`check_encoded`).

    `data` is `encode(session)`, byte for byte. `rest` is the session encoded with every variant's layers left
    empty; `slices` are the variants' layers, `LAYER_SLICE` at a time, each slice encoded as a list: `data` is
    `rest` with each variant's empty list of layers replaced by the items of its slices, in order. A session whose
    variants are not a list of variants, each with a list of layers (it would not load), is not cut: its `rest` is
    its `data`, and it has no slices.
    """

    data: bytes
    rest: bytes
    slices: list[bytes]
    layer_counts: list[int] | None = None  # each variant's number of layers, where cut (the save check's)


@gc_paused()
def encode_in_slices(session: Session) -> Encoded:
    """`session` encoded, as `encode` encodes it, with the parts `check_encoded` reads (`Encoded`)."""
    if not _sliceable(session):
        data = encode(session)
        return Encoded(data, data, [])
    sliced = [_layer_slices(variant.layers) for variant in session.variants]
    segments = encode(_with_layers(session, [orjson.Fragment(LAYERS_MARK)] * len(sliced))).split(LAYERS_MARK)
    return Encoded(b"".join(_with_slices(segments, sliced)), b"[]".join(segments),
                   [piece for slices in sliced for piece in slices], [len(v.layers) for v in session.variants])


def _sliceable(session: Session) -> bool:
    """True where the session's variants are a list of variants, each with a list of layers: what is cut."""
    variants = session.variants
    return type(variants) is list and all(isinstance(variant, Variant) and type(variant.layers) is list
                                          for variant in variants)


LAYERS_MARK = b"\x00"  # where a variant's layers go: orjson writes this byte nowhere else (it escapes every control
# character in a string, and writes nothing but strings, ASCII punctuation, digits and letters besides)


def _layer_slices(layers: list[Layer]) -> list[bytes]:
    """`layers` encoded `LAYER_SLICE` at a time, each slice as a list."""
    return [orjson.dumps(layers[start:start + LAYER_SLICE], option=ENCODING)
            for start in range(0, len(layers), LAYER_SLICE)]


def _with_slices(segments: list[bytes], sliced: list[list[bytes]]) -> Iterator[bytes | memoryview]:
    """The parts of the session's bytes: the session's own `segments`, and between each two one variant's list of
    layers, the items of its slices (lists, none empty) in order. orjson writes a list as `[`, its items joined by
    `,`, then `]`: so the items' list is written as orjson writes it."""
    yield segments[0]
    for slices, segment in zip(sliced, segments[1:], strict=True):
        yield b"["
        for index, piece in enumerate(slices):
            if index:
                yield b","
            yield memoryview(piece)[1:-1]
        yield b"]"
        yield segment


def _with_layers(session: Session, layers: list[Any]) -> Session:
    """A shallow copy of `session` whose variants (shallow copies too) hold `layers`' values, one a variant, in place
    of their layers; every other attribute the same object, in the same order (what orjson writes)."""
    copied = copy.copy(session)
    copied.variants = []
    for variant, replacement in zip(session.variants, layers, strict=True):
        twin = copy.copy(variant)
        twin.layers = replacement
        copied.variants.append(twin)
    return copied


def save(session: Session, path: Path) -> Path:
    """Write `session` to `path` atomically: a crash or a full disk never leaves a partial file; nor does it write
    what would not load (`check_encoded`, `check_loads`'s verdict): a NaN, an Inf or a wrong type fails here, and
    the old file stays whole."""
    path = Path(path)
    encoded = encode_in_slices(session)
    try:
        check_encoded(encoded, "the session")
    except InputError as exc:
        raise InspectError(f"cannot save {path}: {exc.message}") from None
    return write_atomically(path, encoded.data, "session")


def write_atomically(path: Path, data: bytes, what: str = "file") -> Path:
    """Write `data` to `path` through a temporary file, fsync and rename: never a partial file.

    The new file gets the mode of the regular file it replaces, else what the umask leaves of 0666. Whatever is
    at `path` and is not a regular file (a symbolic link, a device, a FIFO, a folder) is never renamed over.
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        mode = _replaceable_mode(path, what)
        _remove_stale_temporaries(path)
        fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise InspectError(f"cannot save {what} {path}: {exc.strerror or exc}") from exc
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as tmp:
            tmp.write(data)
            tmp.flush()
            os.fsync(tmp.fileno())
        _replaceable_mode(path, what)  # again, just before the rename: something may have been put there meanwhile
        os.replace(tmp_name, path)
    except OSError as exc:
        Path(tmp_name).unlink(missing_ok=True)
        raise InspectError(f"cannot save {what} {path}: {exc.strerror or exc}") from exc
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)
    return path


def _replaceable_mode(path: Path, what: str) -> int:
    """The mode a new file at `path` gets; an InputError where `path` is anything but a regular file or nothing."""
    try:
        info = path.lstat()
    except FileNotFoundError:
        return 0o666 & ~_umask()
    if stat.S_ISLNK(info.st_mode):
        raise InputError(f"{path} is a symbolic link; trt-inspect never writes through one: "
                         f"name the {what} file itself")
    if stat.S_ISDIR(info.st_mode):
        raise InputError(f"{path} is a folder; give a {what} file name")
    if not stat.S_ISREG(info.st_mode):
        raise InputError(f"{path} is a device, a pipe or a socket, not a {what} file trt-inspect may replace")
    return stat.S_IMODE(info.st_mode)


STALE_TEMPORARY_S = 60.0  # a save takes well under a second; older temporaries are orphans


def _remove_stale_temporaries(path: Path) -> None:
    """Temporary files of saves that were killed (SIGKILL, power loss); one writer holds the lock."""
    cutoff = time.time() - STALE_TEMPORARY_S
    for stale in path.parent.glob(f".{path.name}.*.tmp"):
        with contextlib.suppress(OSError):
            if stale.stat().st_mtime < cutoff:
                stale.unlink()


def check_writable(path: Path, what: str = "session") -> None:
    """Fail now, with one line, if a `what` file cannot be written at `path` (before hours of work)."""
    if path.is_dir():
        raise InputError(f"{path} is a folder; give a {what} file name")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".probe", dir=path.parent)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise InputError(f"cannot write a {what} at {path}: {exc.strerror or exc}") from None


LOCK_WAIT_S = 60.0  # how long a short writer (import --into, merge) waits for another one to finish
_LOCK_POLL_S = 0.05


class LockBusy(InputError):
    """Another process holds the lock (`file_lock`): the one refusal a writer choosing its own name steps past."""


@contextlib.contextmanager
def file_lock(lock_path: Path, busy: str, wait_s: float = 0.0) -> Iterator[None]:
    """Hold an exclusive lock on `lock_path` (created, removed on release) for the `with` block.

    The lock file is opened with O_NOFOLLOW: a symbolic link planted there is refused, never followed, and
    anything but a regular file is refused. Where another process holds it, wait up to `wait_s` seconds, then
    raise LockBusy(`busy`). A lock file removed by its last holder while this one waited is opened again.
    """
    deadline = time.monotonic() + wait_s
    while True:
        fd = _open_lock_file(lock_path)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            if time.monotonic() >= deadline:
                raise LockBusy(busy) from None
            time.sleep(_LOCK_POLL_S)
            continue
        if _is_same_file(fd, lock_path):
            break
        os.close(fd)
    try:
        yield
    finally:
        lock_path.unlink(missing_ok=True)  # before the release: a waiter then sees the file is gone and opens anew
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def _open_lock_file(lock_path: Path) -> int:
    try:
        fd = os.open(lock_path, os.O_CREAT | os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, 0o644)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise InputError(f"{lock_path} is a symbolic link; trt-inspect never follows one: remove it") from None
        raise InputError(f"cannot lock {lock_path}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise InputError(f"{lock_path} is not a regular file; remove it")
    return fd


def _is_same_file(fd: int, path: Path) -> bool:
    try:
        named = path.lstat()
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (named.st_dev, named.st_ino) == (held.st_dev, held.st_ino)


def lock_path_of(path: Path) -> Path:
    """The lock file of the session file `path`: `.NAME.lock` beside it."""
    return path.parent / f".{path.name}.lock"


@contextlib.contextmanager
def session_lock(path: Path, wait_s: float = 0.0) -> Iterator[None]:
    """Held while a command writes the session file `path`: a second writer waits up to `wait_s`, then is refused."""
    with file_lock(lock_path_of(path), _busy_line(path, "session"), wait_s):
        yield


def _busy_line(path: Path, what: str) -> str:
    where = "use another --out or try again when it is done" if what == "session" else "try again when it is done"
    return f"{path} is being written by another trt-inspect command; {where}"


def partial_path(path: Path) -> Path:
    """Where a study that replaces the finished session `path` keeps its steps until it is done: NAME.partial.json."""
    return path.with_name(f"{path.stem}.partial{path.suffix}")


class FileWriter:
    """Writes one file for a command that holds its lock (see `file_writer`): every write atomic."""

    def __init__(self, path: Path, what: str, replacing: bool) -> None:
        self.path, self.what, self.replacing = path, what, replacing

    def write(self, data: bytes) -> Path:
        """`data` at `path`, atomically (`write_atomically`); the file it replaces stays whole until the rename."""
        return write_atomically(self.path, data, self.what)


class SessionWriter(FileWriter):
    """Writes one session file for a command that holds its lock (see `session_writer`).

    A writer that replaces a session found at its path saves its steps to `partial_path(path)` and replaces the
    path only in `finish`: a killed rerun never leaves a partial study where a finished one was.
    """

    def __init__(self, path: Path, replacing: bool) -> None:
        super().__init__(path, "session", replacing)
        self.done = False

    @property
    def current(self) -> Path:
        """The file the last step went to: the partial file until a replacing writer finishes."""
        return partial_path(self.path) if self.replacing and not self.done else self.path

    def save_step(self, session: Session) -> Path:
        """Save a step of work; the finished session at `path`, if any, stays until `finish`."""
        return save(session, self.current)

    def finish(self, session: Session) -> Path:
        """Save the finished session at `path`; the partial file, if any, is removed."""
        saved = save(session, self.path)
        if self.replacing and not self.done:
            partial_path(self.path).unlink(missing_ok=True)
        self.done = True
        return saved


MAX_NUMBERED_NAMES = 1000  # `name-2` ... `name-1000`: far more commands than start within one second


@contextlib.contextmanager
def file_writer(path: Path, what: str, force: bool, wait_s: float = 0.0) -> Iterator[FileWriter]:
    """The one way a command writes a file (sessions through `session_writer`; exports; the TUI's Markdown).

    Before any work: the folder must be writable; the file's lock (`.NAME.lock` beside it) is taken (a second
    writer waits up to `wait_s`, then is refused with one line) and held until the block ends; a symbolic link,
    a device, a FIFO or a folder at `path` is refused, and an existing file too unless `force`.

    A `paths.ChosenPath` (trt-inspect chose the name; the user named none) never replaces a file and `force` is
    not read: the first of `path`, `NAME-2.EXT`, `NAME-3.EXT`, ... that neither exists nor is being written is
    taken, so two commands started in one second get two files. The writer's `path` is the one taken.
    """
    with _locked_target(path, what, force, wait_s) as (target, exists):
        yield FileWriter(target, what, exists)


@contextlib.contextmanager
def session_writer(path: Path, force: bool, wait_s: float = 0.0) -> Iterator[SessionWriter]:
    """The one way a command writes a session file: run, rerun, probe, import (--out and --into), merge, sweep jobs.

    The rules of `file_writer` (lock, no replacing without `force`, never over a link, a device, a FIFO or a
    folder, a free numbered name for a `paths.ChosenPath`), checked before any work; import --into passes `force`:
    it adds to the file. Every save is atomic, and a replaced session stays until `SessionWriter.finish`.
    """
    with _locked_target(path, "session", force, wait_s) as (target, exists):
        yield SessionWriter(target, exists)


@contextlib.contextmanager
def _locked_target(path: Path, what: str, force: bool, wait_s: float) -> Iterator[tuple[Path, bool]]:
    """The path to write, locked until the block ends, and whether a file there will be replaced."""
    chosen, path = isinstance(path, ChosenPath), Path(path)
    check_writable(path, what)
    if not chosen:
        with file_lock(lock_path_of(path), _busy_line(path, what), wait_s):
            yield path, check_replaceable(path, what, force)
        return
    for n in range(1, MAX_NUMBERED_NAMES + 1):
        candidate = path if n == 1 else path.with_name(f"{path.stem}-{n}{path.suffix}")
        with contextlib.ExitStack() as held:
            try:
                held.enter_context(file_lock(lock_path_of(candidate), _busy_line(candidate, what)))
            except LockBusy:
                continue  # another command is writing this name now: the next one
            if os.path.lexists(candidate):
                continue
            yield candidate, False
            return
    raise InputError(f"{path} and {MAX_NUMBERED_NAMES - 1} numbered names beside it are taken; give a file name")


@contextlib.contextmanager
def log_file(path: Path, what: str) -> Iterator[BinaryIO]:
    """A log a child process writes as it runs (a sweep job's output), replaced and held under its lock: the one
    file not written atomically, since it grows while it is read. Never opened through a symbolic link, nor over
    anything but a regular file."""
    with file_writer(path, what, force=True) as writer:
        try:
            fd = os.open(writer.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666)
        except OSError as exc:
            raise InputError(f"cannot write {what} {writer.path}: {exc.strerror or exc}") from None
        with os.fdopen(fd, "wb") as out:
            yield out


@contextlib.contextmanager
def scratch_path(suffix: str) -> Iterator[Path]:
    """A path in a private temporary folder (mode 0700) for a library that can only write a file (torch.profiler's
    Chrome trace); the folder and whatever was written there are removed when the block ends."""
    with tempfile.TemporaryDirectory(prefix="trt-inspect-") as folder:
        yield Path(folder) / f"scratch{suffix}"


def check_target(path: Path, what: str, force: bool, wait_s: float = 0.0) -> None:
    """What the writer checks, checked already when the arguments are read (before a model loads): the folder
    writable, the file not being written now, nothing but a replaceable file there, and an existing one only
    with `force`. The writer checks again when it opens the file."""
    with _locked_target(Path(path), what, force, wait_s):
        pass


def check_replaceable(path: Path, what: str, force: bool) -> bool:
    """The rule for every file trt-inspect writes, checked before the work: a symbolic link, a device, a FIFO or a
    folder at `path` is refused (never followed, never renamed over); an existing file only with `force`.

    Returns whether a file is there (then it will be replaced).
    """
    _replaceable_mode(path, what)
    exists = path.exists()
    if exists and not force:
        raise InputError(f"{path} exists; pass --force to replace it")
    return exists


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


@gc_paused()
def decode(data: bytes, origin: str) -> Session:
    """Parse session bytes; every way they can be wrong becomes one InputError line."""
    return _session(_document(data, origin), origin)


@gc_paused()
def check_loads(data: bytes, origin: str) -> None:
    """Raise the InputError `decode(data, origin)` raises, with its line, and nothing where `decode` returns a
    session: what `save` writes is read back, as `load` reads it, before the old file is replaced.

    The bytes are parsed as `decode` parses them (orjson, the tool and schema checks, the migration). The
    parsed document's values are then checked column by column (`codec.builds_all`: every layer's fields
    across all the layers at once, no object made), and where that shows they build, the session is built and
    checked (`_session`) with its variants' layers left out: they are the only part not built, and the checks
    after the build (kernel tables, jobs) do not read them. So a 100,000-layer session is not built a second
    time; where the columns cannot show it, the whole document is built as `decode` builds it.
    """
    doc = _document(data, origin)
    if builds_all(Session, [doc]):
        variants = doc.get("variants", [])
        doc = {**doc, "variants": [{**variant, "layers": []} for variant in variants]}
        _session(doc, origin, [len(variant.get("layers", [])) for variant in variants])
    else:
        _session(doc, origin)


@gc_paused()
def check_encoded(encoded: Encoded, origin: str) -> None:
    """Raise what `check_loads(encoded.data, origin)` raises, with its line, and nothing where it raises nothing;
    the layers read one slice at a time.

    Each slice of layers is parsed, shown to build by its columns (`codec.builds_all`) and let go of before the
    next, so the check's memory is reused, not a 100,000-layer document held at once. The columns of all the
    layers pass exactly where those of every slice do (each column check holds for a whole column where it holds
    for each part of it); the rest of the session is then parsed and checked as `check_loads` checks a document
    whose layers are shown, and its layers, empty, are the ones `check_loads` leaves out. Where a slice or the rest
    is not shown (a value that fails, a schema to migrate), `check_loads` reads `encoded.data` whole and decides.
    """
    doc = _shown_rest(encoded)
    if doc is None:
        check_loads(encoded.data, origin)
    else:
        _session(doc, origin, encoded.layer_counts)


def _shown_rest(encoded: Encoded) -> dict[str, Any] | None:
    """The document of `encoded.rest` where every slice of layers and the rest are shown to build by their columns
    and `_document` takes the rest as it is (`_as_written`); None where not."""
    if not all(builds_all(Layer, orjson.loads(piece)) for piece in encoded.slices):
        return None
    doc = orjson.loads(encoded.rest)
    return doc if _as_written(doc) and builds_all(Session, [doc]) else None


def _as_written(doc: Any) -> bool:
    """True where `_document` returns the parsed `doc` as it is: a trt-inspect session of this schema, nothing to
    migrate and nothing it refuses."""
    if not isinstance(doc, dict) or doc.get("tool") != TOOL:
        return False
    version = doc.get("schema_version")
    return type(version) is int and version == SCHEMA_VERSION


def _document(data: bytes, origin: str) -> dict[str, Any]:
    """Session bytes parsed into the document of this schema: a trt-inspect session's JSON, migrated where older."""
    if not data.strip():
        raise InputError(f"{origin} is empty, not a trt-inspect session")
    try:
        doc: dict[str, Any] = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise InputError(f"{origin} is not valid JSON (corrupt or truncated): {exc}") from None
    if not isinstance(doc, dict) or doc.get("tool") != TOOL:
        raise InputError(f"{origin} is not a trt-inspect session")
    version = doc.get("schema_version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise InputError(f"{origin} has no valid schema_version")
    if version > SCHEMA_VERSION:
        raise InputError(
            f"{origin} uses session schema {version}, newer than this trt-inspect reads ({SCHEMA_VERSION}); "
            "upgrade trt-inspect"
        )
    if version < 1:
        raise InputError(f"{origin} has an unknown schema_version {version}")
    if version < SCHEMA_VERSION:
        try:
            doc = migrate(doc, version)
        except (TypeError, ValueError, AttributeError) as exc:
            raise InputError(f"{origin}: cannot bring schema {version} up to {SCHEMA_VERSION}: {exc}") from None
    return doc


def _session(doc: dict[str, Any], origin: str, layer_counts: list[int] | None = None) -> Session:
    """The session a parsed document holds, built and checked; one InputError line where it is not one.
    `layer_counts`: each variant's number of layers where the document's were left out (`check_figures`)."""
    try:
        session = build(Session, doc)
        check_figures(session, layer_counts)
        _check_names(session)
        _check_jobs(session)
    except (ShapeError, ValueError) as exc:
        raise InputError(f"{origin} is not a valid session: {exc}") from None
    return session


def _check_names(session: Session) -> None:
    """Each variant of a session has a name no other variant has: views, baselines and diffs find variants by name."""
    seen: set[str] = set()
    for variant in session.variants:
        if variant.name in seen:
            raise ValueError(f"two variants are named {variant.name!r}; each variant needs a name of its own")
        seen.add(variant.name)


def _check_jobs(session: Session) -> None:
    """A merged session's variants each name a job of `merge.jobs`; a plain session's name none."""
    jobs = len(session.merge.jobs) if session.merge is not None else 0
    for variant in session.variants:
        if variant.job is not None and not 0 <= variant.job < jobs:
            raise ValueError(f"variant {variant.name!r} names job {variant.job}, but the session merges {jobs} jobs")


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
    """Saved sessions, newest first, and one line for each file that could not be read.

    A folder that is not there holds no sessions; one that cannot be listed (no read or search permission),
    or a file where the folder should be, is an InputError: never "no sessions" for sessions that may be there.
    """
    folder = folder or sessions_dir()
    entries: list[SessionEntry] = []
    problems: list[str] = []
    for path in _session_files(folder):
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


def _session_files(folder: Path) -> list[Path]:
    """The `*.json` files in `folder`, sorted; [] where there is no folder."""
    try:
        with os.scandir(folder) as listing:
            names = [entry.name for entry in listing if entry.name.endswith(".json")]
    except FileNotFoundError:
        return []
    except NotADirectoryError:
        raise InputError(f"the sessions folder {folder} is not a folder") from None
    except OSError as exc:
        raise InputError(f"cannot read the sessions folder {folder}: {exc.strerror or exc}") from None
    return sorted(folder / name for name in names)


def resolve(name_or_path: str) -> Path:
    """A session named by path, or by file name / stem inside the default folder."""
    path = Path(name_or_path)
    if path.exists():
        return path
    for candidate in (sessions_dir() / name_or_path, sessions_dir() / f"{name_or_path}.json"):
        if candidate.is_file():
            return candidate
    raise InputError(f"no such session: {name_or_path} (see `trt-inspect sessions`)")
