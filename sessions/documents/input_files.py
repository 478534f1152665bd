"""The one check every file read from outside passes before it is parsed: sessions, trtexec files and logs,
metadata, sweep matrices, `--groups` rules files.

A reader calls `read_regular_file` (a regular file no larger than its limit: never a FIFO, a device or a folder,
so nothing hangs or fills memory) or `read_file_head` (the start of one, to tell what it is) and, for documents
parsed from it, `check_bounds` (nesting and integers in the range a session can hold); `read_toml_file` does both
for TOML. A reader that keeps what it read while the file is unchanged keys it by `file_identity`.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO, NamedTuple

from sessions.documents.errors import InputError

MAX_SESSION_BYTES = 1 << 30  # 150k kernel records take about 7 MiB
MAX_TEXT_FILE_BYTES = 1 << 20  # a matrix or a rules file of a few hundred lines takes a few kB
MAX_DEPTH = 64  # tables and arrays inside one another; a session nests about 8 deep
INTEGER_RANGE = (-(1 << 63), (1 << 64) - 1)  # what the session writer (orjson) can store


def read_regular_file(path: Path, what: str, limit: int = MAX_SESSION_BYTES) -> bytes:
    """The bytes of a regular file no larger than `limit`; FIFOs, devices and folders refused with one line.

    `what` names the file in the message ("session file", "matrix file"). The file is opened without blocking and
    checked on the descriptor before a byte is read: a FIFO never blocks, `/dev/zero` is never read, and nothing
    put at `path` between a check and the read gets past it.
    """
    with _opened_regular(path, what) as (file, size):
        if size > limit:
            raise InputError(f"{path} is {size / (1 << 20):.0f} MiB, over the {limit >> 20} MiB a {what} may have")
        data = _read(file, path, limit + 1)  # a file that grew since the check is still cut at the limit
    if len(data) > limit:
        raise InputError(f"{path} grew over the {limit >> 20} MiB a {what} may have while it was read")
    return data


def read_file_head(path: Path, what: str, size: int) -> bytes:
    """The first `size` bytes of a regular file of any length (all of a shorter one), under the checks of
    `read_regular_file`: for telling what a file is by how it starts, without reading the rest."""
    with _opened_regular(path, what) as (file, _):
        return _read(file, path, size)


@contextlib.contextmanager
def _opened_regular(path: Path, what: str) -> Iterator[tuple[BinaryIO, int]]:
    """`path` open for reading, with its size, where it is a regular file; one InputError line otherwise."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)  # O_NONBLOCK: opening a FIFO returns at once
    except FileNotFoundError:
        raise InputError(f"no such {what}: {path}") from None
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        if stat.S_ISDIR(info.st_mode):
            raise InputError(f"{path} is a folder, not a {what}")
        raise InputError(f"{path} is not a regular file (a pipe or a device), not a {what}")
    with open(fd, "rb") as file:  # a descriptor: builtins.open takes one
        yield file, info.st_size


def _read(file: BinaryIO, path: Path, size: int) -> bytes:
    try:
        return file.read(size)
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}") from None


def check_bounds(document: Any, origin: str) -> Any:
    """`document` (parsed JSON or TOML) itself, or an InputError where it nests deeper than MAX_DEPTH or holds an
    integer outside INTEGER_RANGE. Iterative: a deep document cannot exhaust the interpreter's stack."""
    low, high = INTEGER_RANGE
    pending: list[tuple[Any, int]] = [(document, 0)]
    while pending:
        value, depth = pending.pop()
        if isinstance(value, dict):
            children: Any = value.values()
        elif isinstance(value, list):
            children = value
        else:
            if isinstance(value, int) and not isinstance(value, bool) and not low <= value <= high:
                raise InputError(f"{origin}: the integer {value} is out of range")
            continue
        if depth >= MAX_DEPTH:
            raise InputError(f"{origin}: nested more than {MAX_DEPTH} deep")
        pending.extend((child, depth + 1) for child in children)
    return document


def read_toml_file(path: Path, what: str, limit: int = MAX_TEXT_FILE_BYTES) -> dict[str, Any]:
    """A TOML file as a dict, through `read_regular_file` and `check_bounds`; every failure one InputError line."""
    data = read_regular_file(path, what, limit)
    try:
        document = tomllib.loads(data.decode())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise InputError(f"{path} is not valid TOML: {exc}") from None
    except RecursionError:
        raise InputError(f"{path}: nested more than {MAX_DEPTH} deep") from None
    return check_bounds(document, str(path))  # type: ignore[no-any-return]


class FileIdentity(NamedTuple):
    """A file as the system stamps it: equal identities, the same file unchanged (every write moves the change time,
    which no program can set back; a write within one tick of the file clock, a few ms, may leave it as it was)."""

    device: int
    inode: int
    size: int
    modified_ns: int
    changed_ns: int


def file_identity(path: Path) -> FileIdentity | None:
    """The identity of the file `path` names (a symbolic link followed), or None where there is none: the one key
    under which a reader keeps what it read from a file (a log read once per import, a cache file hashed once)."""
    try:
        info = path.stat()
    except OSError:
        return None
    return FileIdentity(info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)
