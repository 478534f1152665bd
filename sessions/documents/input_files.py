"""The one check every file read from outside passes before it is parsed: sessions, trtexec files and logs,
metadata, sweep matrices, `--groups` rules files.

A reader calls `read_regular_file` (a regular file no larger than its limit: never a FIFO, a device or a folder,
so nothing hangs or fills memory) and, for documents parsed from it, `check_bounds` (nesting and integers in the
range a session can hold); `read_toml_file` does both for TOML.
"""

from __future__ import annotations

import stat
import tomllib
from pathlib import Path
from typing import Any

from sessions.documents.errors import InputError

MAX_SESSION_BYTES = 1 << 30  # 150k kernel records take about 7 MiB
MAX_TEXT_FILE_BYTES = 1 << 20  # a matrix or a rules file of a few hundred lines takes a few kB
MAX_DEPTH = 64  # tables and arrays inside one another; a session nests about 8 deep
INTEGER_RANGE = (-(1 << 63), (1 << 64) - 1)  # what the session writer (orjson) can store


def read_regular_file(path: Path, what: str, limit: int = MAX_SESSION_BYTES) -> bytes:
    """The bytes of a regular file no larger than `limit`; FIFOs, devices and folders refused with one line.

    `what` names the file in the message ("session file", "matrix file"). The file is never opened unless it is
    a regular file (opening a FIFO blocks; `/dev/zero` never ends).
    """
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
        with path.open("rb") as file:
            data = file.read(limit + 1)  # a file that grew since the check is still cut at the limit
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}") from None
    if len(data) > limit:
        raise InputError(f"{path} grew over the {limit >> 20} MiB a {what} may have while it was read")
    return data


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
