"""Every file the importers read, and every number they take from one, passes here first.

A file must be a regular file under a size bound (`sessions.documents.input_files.read_regular_file`, the same
check `show` applies to sessions: devices, FIFOs and folders are refused before any read). A JSON
document must be one the session writer can write back (orjson: integers within 64 bits, nesting
within its depth limit), so a file that would fail at save is refused at import. A number must be
finite, in range, and non-negative where it is a time or a count.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import orjson

from sessions.documents.codec import MIN_TIME_MS
from sessions.documents.errors import InputError
from sessions.documents.input_files import file_identity, read_regular_file

MAX_JSON_BYTES = 1 << 30  # a 100,000-layer detailed layer file is about 100 MiB
MAX_LOG_BYTES = 1 << 28  # trtexec's verbose logs run to a few MiB; DETR's is 4 MiB or more
MAX_TIME_MS = 1e9  # 11 days: anything larger is a corrupt or forged file
MAX_COUNT = 1 << 53  # inferences, iterations, layers: exact in a float, far beyond any real run
MAX_PERCENT = 100.0 + 1e-6


def read_json(path: Path, what: str) -> Any:
    """The JSON document in `path`, refused (InputError, one line) unless the session writer could write it back."""
    return parse_json(read_regular_file(Path(path), what, limit=MAX_JSON_BYTES), str(path), what)


def text_of(data: bytes) -> str:
    """`data` decoded as a JSON text may be written: UTF-8, or the UTF-16 or UTF-32 that a byte-order mark or the zero
    bytes around its first characters show (`json.detect_encoding`, as the standard library reads JSON); bytes that
    do not decode replaced."""
    return data.decode(json.detect_encoding(data), "replace")


def parse_json(data: bytes | str, origin: str, what: str) -> Any:
    """A JSON document the session writer could write back, in UTF-8 or (with or without a byte-order mark) UTF-16
    or UTF-32 (`text_of`); InputError (one line) for anything else."""
    if isinstance(data, bytes) and json.detect_encoding(data) != "utf-8":
        data = text_of(data)
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise InputError(f"{origin} is not valid JSON ({what}): {exc}") from None
    try:
        orjson.dumps(doc)
    except TypeError as exc:  # orjson.JSONEncodeError: an integer past 64 bits, nesting past orjson's depth limit
        raise InputError(f"{origin}: {exc} ({what}); not a file TensorRT writes") from None
    return doc


def read_text(path: Path, what: str) -> str:
    """The text of a log file, in UTF-8 or the UTF-16 or UTF-32 its first bytes show (`text_of`: a log PowerShell's
    `>` wrote is UTF-16 with a byte-order mark; undecodable bytes replaced), under the same regular-file and size
    check. The last log read is kept while its file is unchanged (`file_identity`): an import reads a log for its
    roles, its options and summary, its layers and its table, and a 100 MB log is read from the disk once."""
    path = Path(path)
    key = file_identity(path)
    if key is not None and _LAST_TEXT[0] == key:
        return _LAST_TEXT[1]
    text = text_of(read_regular_file(path, what, limit=MAX_LOG_BYTES))
    if key is not None:
        _LAST_TEXT[:] = [key, text]
    return text


_LAST_TEXT: list[Any] = [None, ""]  # [file_identity, text] of the last log read


def forget_text() -> None:
    """Let go of the last log `read_text` kept: the next read of it reads the file again."""
    _LAST_TEXT[:] = [None, ""]


def _finite(value: Any, where: str) -> float:
    if type(value) is float:  # most numbers of a file: nothing to convert
        number = value
    elif isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError(f"{where} is {value!r}, not a number")
    else:
        number = float(value)
    if not math.isfinite(number):
        raise InputError(f"{where} is {value}, not a finite number")
    return number


def plain_time_ms(value: Any) -> float | None:
    """`value` where `time_ms` would return it as it is (a float from 0 to MAX_TIME_MS), else None: the common case
    of a file's times, checked without building the message a refusal would need."""
    return value if type(value) is float and (value == 0.0 or MIN_TIME_MS <= value <= MAX_TIME_MS) else None


def time_ms(value: Any, where: str, *, positive: bool = False) -> float:
    """A time in ms: finite, 0 or at least a nanosecond (what a session holds; positive where a zero would be divided
    by), at most MAX_TIME_MS."""
    number = _finite(value, where)
    if number < 0 or number > MAX_TIME_MS or (positive and number == 0) or 0 < number < MIN_TIME_MS:
        bound = "above 0" if positive else "0 or at least a nanosecond"
        raise InputError(f"{where} = {number:g} ms, not a time a run measures ({bound} and at most {MAX_TIME_MS:g} ms)")
    return number


def count(value: Any, where: str, *, positive: bool = False) -> int:
    """A count (inferences, iterations, multiprocessors): a whole number from 0 (or 1) to MAX_COUNT."""
    number = _finite(value, where)
    low = 1 if positive else 0
    if number != int(number) or not low <= number <= MAX_COUNT:
        raise InputError(f"{where} = {number:g}, not a count (a whole number from {low} to 2^53)")
    return int(number)


def percent(value: Any, where: str) -> float:
    """A share of the run in percent: finite, 0 to 100."""
    number = _finite(value, where)
    if not 0 <= number <= MAX_PERCENT:
        raise InputError(f"{where} = {number:g} %, not a share of a run (0 to 100)")
    return number
