"""The one way trt-inspect reads its caches back (the cuDNN engine's timing cache and plan files, the FP8 calibration
cache, the seeded weights), and the checks of what they hold.

Every cache file is read by `read_cache_bytes` (or `read_cache_json` for JSON): a regular file no larger than its
cap, read through `sessions.documents.input_files.read_regular_file` (never a FIFO, a device or a folder: nothing
hangs or fills memory), and parsed inside one guard, `miss_on_failure`, that turns any failure into a miss: the
caller builds what the file would have held and writes it again. A value is used only where it also means what it
should (`timing_entry`, `scale_ok`, `stored_array`), not only where it parses.

Links: the cache folder itself (`sessions.documents.paths.cache_dir`) may be a symbolic link, but inside it a cache
file, or a cache's own folder (`*.plans/`, `fp8-twins/`, `seeded-weights/`), that is a symbolic link is neither read
(a miss) nor written through (`cache_folder` refuses it): a cache is written where it is, never into a link's target.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import re
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import orjson

from builders.fp8.format import MIN_SCALE
from sessions.documents.errors import InputError
from sessions.documents.input_files import check_bounds, read_regular_file

MAX_JSON_BYTES = 256 << 20  # a timing cache of thousands of graphs, a calibration cache with its outputs: a few MiB
MAX_PLAN_BYTES = 64 << 20  # a serialized cuDNN plan with its compiled kernels: tens to hundreds of kB
MAX_ENGINE_BYTES = 16 << 30  # a cached TensorRT engine: its weights and kernels, a few GiB at most
MAX_TRT_TIMING_CACHE_BYTES = 1 << 30  # TensorRT's timing cache: one entry per tactic timed, tens of MiB
MAX_WEIGHTS_BYTES = 64 << 30  # seeded weights: the largest catalog models' fp32 parameters and buffers
PLAN_NAME = re.compile(r"[0-9a-f]{64}")  # a plan file's name: the SHA-256 of its bytes, nothing that names a path
MAX_SCALE = 2.0**60  # far past any amax / 448, and the product of two (the engine's descale) stays finite in fp32
MAX_NAME_CHARS = 512  # a cuDNN plan name ("eng4_k24=36 ...") is tens of characters

T = TypeVar("T")


def miss_on_failure(read: Callable[[], T | None]) -> T | None:
    """`read()`, or None (a miss) where it raises anything at all: the one guard every cache is parsed inside.

    A damaged cache never ends a study: whatever the bytes make the parser or a check raise (a wrong type, a
    missing key, a nesting too deep, an array that does not reshape, memory), the cache answers nothing.
    """
    try:
        return read()
    except Exception:  # noqa: BLE001  (any failure of a cache is a miss: the caller builds and replaces it)
        return None


def _is_link(path: Path) -> bool:
    try:
        return stat.S_ISLNK(path.lstat().st_mode)
    except OSError:
        return False


def read_cache_bytes(path: Path, what: str, limit: int) -> bytes | None:
    """The bytes of the cache file `path`, or None (a miss) where it is absent, a symbolic link, in a folder that is
    a symbolic link, not a regular file (a FIFO, a device, a folder), larger than `limit`, or cannot be read."""
    if _is_link(path) or _is_link(path.parent):
        return None
    try:
        info = path.lstat()
    except OSError:
        return None
    if not stat.S_ISREG(info.st_mode) or info.st_size > limit:
        return None
    try:
        return read_regular_file(path, what, info.st_size)  # a file that grew since is refused, not read on
    except InputError:
        return None


def read_cache_json(path: Path, what: str, limit: int = MAX_JSON_BYTES) -> Any:
    """The JSON document in the cache file `path` (`read_cache_bytes`), or None where there is none or it does not
    parse: strict JSON (no NaN or Infinity), nested at most `check_bounds`' depth, integers in its range."""
    data = read_cache_bytes(path, what, limit)
    if data is None:
        return None
    return miss_on_failure(lambda: check_bounds(orjson.loads(data), str(path)))


def document_digest(value: Any) -> str:
    """SHA-256 of `value` (JSON) as canonical JSON text: keys sorted, no spaces, non-ASCII escaped. A cache file
    holds it beside what it covers and is read back only where it matches: a flipped bit is a miss, never a wrong
    value that still means something (a scale, an output, a time)."""
    return hashlib.sha256(json.dumps(value, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def cache_folder(folder: Path) -> bool:
    """Whether a cache may write into `folder`: made where missing, and a folder of its own, not a symbolic link
    (nor anything else); never raises."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        return not _is_link(folder) and stat.S_ISDIR(folder.lstat().st_mode)
    except OSError:
        return False


def is_count(value: Any) -> bool:
    """Whether `value` is a JSON integer (an int, never a bool)."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: Any) -> bool:
    """Whether `value` is a finite JSON number (int or float, never a bool)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def timing_entry(raw: Any) -> dict[str, Any] | None:
    """`raw` as a timing-cache entry the engine may use, or None where any field does not mean what it should:
    `offered` (plans cuDNN offered) an integer >= 1; `index` an integer with 0 <= index < offered; `tried` an integer
    with 1 <= tried <= offered; `name` a printable, non-empty plan name; `time_us` None or a finite time >= 0;
    `plan`, where present, a plan file's name (64 lowercase hex digits). Other fields are kept as they are."""
    if not isinstance(raw, dict):
        return None
    offered, index, tried, name, time_us = (raw.get(k) for k in ("offered", "index", "tried", "name", "time_us"))
    if not (is_count(offered) and offered >= 1 and is_count(index) and 0 <= index < offered):
        return None
    if not (is_count(tried) and 1 <= tried <= offered):
        return None
    if not (isinstance(name, str) and 0 < len(name) <= MAX_NAME_CHARS and name.isprintable()):
        return None
    if not (time_us is None or (is_number(time_us) and time_us >= 0)):
        return None
    if "plan" in raw and not (isinstance(raw["plan"], str) and PLAN_NAME.fullmatch(raw["plan"])):
        return None
    return dict(raw)


def scale_ok(value: Any) -> bool:
    """Whether `value` is an FP8 scale the engine may divide by: a finite number in [MIN_SCALE, MAX_SCALE]."""
    return is_number(value) and MIN_SCALE <= value <= MAX_SCALE


def stored_array(stored: Any) -> np.ndarray | None:
    """A float32 array of at least one dimension kept as {"dtype": "<f4", "shape": [...], "data": base64}, every
    value finite; None where it is anything else (another dtype, a shape that does not hold the data, a NaN)."""
    if not isinstance(stored, dict) or stored.get("dtype") != "<f4" or not isinstance(stored.get("data"), str):
        return None
    shape = stored.get("shape")
    if not (isinstance(shape, list) and shape and all(is_count(n) and n >= 0 for n in shape)):
        return None
    raw = base64.b64decode(stored["data"], validate=True)
    if len(raw) != 4 * math.prod(shape):
        return None
    array = np.frombuffer(raw, dtype="<f4").reshape(shape).astype(np.float32)
    return array if bool(np.isfinite(array).all()) else None
