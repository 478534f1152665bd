"""CUPTI's activity buffers read in bulk: no Python object per record.

cupti-python's own buffer callbacks hand the caller one Python object per activity record, so a large trace spends
seconds flushing them. Here libcupti's buffer callbacks are registered by ctypes on the library NVTX injects (the one
cupti-python drives), each completed buffer is walked with `cuptiActivityGetNextRecord` (CUPTI's own record sizes),
and each kind's records are decoded at once with numpy through cupti-python's record layouts (its
`activity_*_dtype`). The flush's time both ways: docs/evidence.md ("Grounds of rules in the code").
"""

from __future__ import annotations

import ctypes
import functools
import threading
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

BUFFER_BYTES = 8 << 20  # CUPTI advises 1-10 MiB
MAX_LIMIT_REACHED = 12  # CUPTI_ERROR_MAX_LIMIT_REACHED: cuptiActivityGetNextRecord's answer past the last record
KIND_DTYPE = np.dtype("<i4")  # every record starts with its CUpti_ActivityKind

# (kind, its records in buffer order, strings) -> None; `strings` reads the C strings a column of pointers names
RecordHandler = Callable[[int, np.ndarray, Callable[[np.ndarray], list[str]]], None]

_REQUESTED = ctypes.CFUNCTYPE(None, ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_size_t),
                              ctypes.POINTER(ctypes.c_size_t))
_COMPLETED = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_uint32, ctypes.c_void_p, ctypes.c_size_t,
                              ctypes.c_size_t)


@functools.cache
def load_libcupti(path: str) -> ctypes.CDLL:
    """The libcupti at `path`, loaded once (the loader hands back the library already mapped at that path)."""
    return ctypes.CDLL(path)


def c_strings(pointers: np.ndarray) -> list[str]:
    """The NUL-terminated strings `pointers` point to ('' for a null pointer), each distinct pointer read once.

    Valid only while the records that hold the pointers are (inside the buffer's handler)."""
    read: dict[int, str] = {0: ""}
    out = []
    for address in pointers.tolist():
        text = read.get(address)
        if text is None:
            text = read[address] = ctypes.string_at(address).decode("utf-8", "replace")
        out.append(text)
    return out


class ActivityBuffers:
    """libcupti's activity buffers, handed to `handler` a kind at a time.

    `register` (before the kinds are switched on, as CUPTI asks, and again before each trace) gives CUPTI this
    reader's callbacks; CUPTI then asks it for buffers and hands them back full, on a flush or when they fill. Each
    buffer's records of a kind in `dtypes` reach `handler` as one structured array, in buffer order, while the buffer
    is live; records of other kinds are skipped. A record shorter than its layout (a libcupti older than the
    layouts) is not decoded, and a walk CUPTI ends with an error leaves the buffer's later records unread: `errors`
    says so, as it says of anything else that went wrong inside a callback (CUPTI's thread cannot take an
    exception). Buffers handed back at once (CUPTI's thread and a flush) are read one at a time. `release` ends the
    handler's turn: records arriving after it are dropped, and the last trace is not kept alive by this reader.
    """

    def __init__(self, library: ctypes.CDLL, dtypes: Mapping[int, np.dtype]) -> None:
        self._register = library.cuptiActivityRegisterCallbacks
        self._register.argtypes = [_REQUESTED, _COMPLETED]
        self._register.restype = ctypes.c_int
        self._next = library.cuptiActivityGetNextRecord
        self._next.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_void_p)]
        self._next.restype = ctypes.c_int
        self._dtypes = dict(dtypes)
        self._buffers: dict[int, ctypes.Array[ctypes.c_uint64]] = {}
        self._reading = threading.Lock()
        self._callbacks = (_REQUESTED(self._requested), _COMPLETED(self._completed))  # alive as long as this reader
        self.handler: RecordHandler | None = None
        self.errors: list[str] = []

    def register(self, handler: RecordHandler) -> int:
        """Make `handler` the one records go to and give CUPTI the callbacks; returns CUPTI's status (0: done)."""
        self.handler = handler
        self.errors = []
        return int(self._register(*self._callbacks))

    def release(self) -> list[str]:
        """The handler's turn ended (call once the trace's records are flushed); returns what went wrong in it."""
        with self._reading:
            self.handler = None
            return list(self.errors)

    def _requested(self, buffer: Any, size: Any, max_records: Any) -> None:
        block = (ctypes.c_uint64 * (BUFFER_BYTES // 8))()  # 8-byte aligned, as CUPTI requires
        address = ctypes.addressof(block)
        self._buffers[address] = block
        buffer[0] = address
        size[0] = BUFFER_BYTES
        max_records[0] = 0  # as many as fit

    def _completed(self, context: int | None, stream: int, buffer: int | None, size: int, valid: int) -> None:
        try:
            if buffer and valid:
                with self._reading:
                    self._read(int(buffer), int(valid))
        except Exception as exc:  # noqa: BLE001  (CUPTI's callback cannot raise: the trace reports it)
            self.errors.append(f"{type(exc).__name__}: {exc}")
        finally:
            self._buffers.pop(int(buffer or 0), None)

    def _offsets(self, buffer: int, valid: int) -> np.ndarray:
        """Each record's offset in the buffer, in order, as CUPTI walks it; a walk CUPTI ends with another answer
        than the end of the buffer is said in `errors` (the records before it are kept)."""
        found = []
        record = ctypes.c_void_p()
        pointer = ctypes.pointer(record)
        while (status := self._next(buffer, valid, pointer)) == 0:
            found.append((record.value or 0) - buffer)
        if status != MAX_LIMIT_REACHED:
            self.errors.append(f"CUPTI stopped reading a buffer after {len(found)} records (status {status})")
        return np.asarray(found, dtype=np.int64)

    def _read(self, buffer: int, valid: int) -> None:
        if self.handler is None:  # after `release`: nothing is read
            return
        offsets = self._offsets(buffer, valid)
        if not len(offsets):
            return
        data = np.ctypeslib.as_array((ctypes.c_uint8 * valid).from_address(buffer))
        sizes = np.diff(offsets, append=valid)
        kinds = rows(data, offsets, KIND_DTYPE)
        for kind in np.unique(kinds).tolist():
            dtype = self._dtypes.get(kind)
            if dtype is None:
                continue
            chosen = kinds == kind
            if (sizes[chosen] < dtype.itemsize).any():
                self.errors.append(f"records of CUPTI kind {kind} are {int(sizes[chosen].min())} bytes, shorter "
                                   f"than the {dtype.itemsize} of cupti-python's layout: install the cupti-python "
                                   "that matches this libcupti")
                continue
            self.handler(kind, rows(data, offsets[chosen], dtype), c_strings)


def rows(data: np.ndarray, offsets: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """The records of `dtype` at `offsets` in the bytes `data`, copied into one structured array."""
    gathered = data[offsets[:, None] + np.arange(dtype.itemsize)]
    return np.ascontiguousarray(gathered).view(dtype).reshape(-1)
