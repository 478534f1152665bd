"""A stand-in for cupti-python's `cupti` module: the activity API that profilers.kernel_trace uses, fed by a script.

`FakeCupti.install(monkeypatch)` puts it in sys.modules; `run_once` (what the tracer times) emits one call's
activities: its call marker, one layer marker per layer, and inside each a kernel, the API call that launched it and
API calls that launch nothing (as PyTorch makes around every kernel). Flushing packs the buffered activities into a
buffer the tracer's buffer callback asked for, in record layouts of this module's own (`DTYPES`, names as C strings
in memory), and hands it back as libcupti does, walked by `cuptiActivityGetNextRecord`; the dropped-record count is
whatever the test sets.

API records follow CUPTI's documented switches: a kind switch (activity_enable/disable) turns every API of its kind on
or off and forgets the per-API switches made before it; a per-API switch (activity_enable_runtime_api/_driver_api)
then turns one API on or off. `filter_calls` says whether the per-API switches work, are missing from the module, or
are refused by CUPTI, or fail as a changed binding would (broken); `refused_apis` names single APIs CUPTI refuses to
switch.
"""

from __future__ import annotations

import ctypes
import enum
import functools
import itertools
import sys
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import pytest

from profilers import kernel_trace


class ActivityKind(enum.IntEnum):
    KERNEL = 1
    CONCURRENT_KERNEL = 2
    MARKER = 3
    RUNTIME = 4
    DRIVER = 5


class ActivityFlag(enum.IntFlag):
    MARKER_INSTANTANEOUS = 1
    MARKER_START = 2
    MARKER_END = 4


class RuntimeApiTraceCbid(enum.IntEnum):
    INVALID = 0
    cudaGetDevice_v3020 = 1
    cudaLaunch_v3020 = 2
    cudaGetLastError_v3020 = 3
    cudaLaunchKernel_v7000 = 4
    cudaStreamIsCapturing_v10000 = 5
    cudaGraphLaunch_v10000 = 6
    cudaLaunchKernelExC_v11060 = 7
    cudaEventRecord_v3020 = 8
    cudaGraphAddKernelNode_v10000 = 9
    SIZE = 10
    FORCE_INT = 0x7FFFFFFF


class DriverApiTraceCbid(enum.IntEnum):
    INVALID = 0
    cuCtxGetCurrent = 1
    cuLaunchKernel = 2
    cuFuncSetAttribute = 3
    cuLaunchKernelEx = 4
    cuGraphLaunch = 5
    cuStreamSynchronize = 6
    SIZE = 7
    FORCE_INT = 0x7FFFFFFF


API_KINDS = {ActivityKind.RUNTIME: RuntimeApiTraceCbid, ActivityKind.DRIVER: DriverApiTraceCbid}
MAX_LIMIT_REACHED = 12  # libcupti's answer when no record follows

KERNEL_DTYPE = np.dtype([("kind", "<i4"), ("pad", "<i4"), ("start", "<u8"), ("end", "<u8"), ("correlation_id", "<u4"),
                         ("stream_id", "<u4"), ("grid_x", "<i4"), ("grid_y", "<i4"), ("grid_z", "<i4"),
                         ("block_x", "<i4"), ("block_y", "<i4"), ("block_z", "<i4"), ("name", "<i8")])
MARKER_DTYPE = np.dtype([("kind", "<i4"), ("flags_", "<i4"), ("timestamp", "<u8"), ("id", "<u4"),
                         ("object_kind", "<i4"), ("object_id", [("pt", [("process_id", "<u4"), ("thread_id", "<u4")])]),
                         ("name", "<i8")])
API_DTYPE = np.dtype([("kind", "<i4"), ("cbid", "<u4"), ("start", "<u8"), ("end", "<u8"), ("process_id", "<u4"),
                      ("thread_id", "<u4"), ("correlation_id", "<u4"), ("return_value", "<u4")])
DTYPES = {ActivityKind.KERNEL: KERNEL_DTYPE, ActivityKind.CONCURRENT_KERNEL: KERNEL_DTYPE,
          ActivityKind.MARKER: MARKER_DTYPE, ActivityKind.RUNTIME: API_DTYPE, ActivityKind.DRIVER: API_DTYPE}


class CuptiError(Exception):
    pass


@dataclass
class Activity:
    kind: ActivityKind
    name: str = ""
    start: int = 0
    end: int = 0
    correlation_id: int = 0
    stream_id: int = 7
    grid_x: int = 1
    grid_y: int = 1
    grid_z: int = 1
    block_x: int = 32
    block_y: int = 1
    block_z: int = 1
    thread_id: int = 0
    cbid: int = 0
    flags_: int = 0
    id: int = 0
    timestamp: int = 0
    object_id: object = None


@dataclass
class FakeCupti:
    layers: tuple[str, ...] = ("conv1", "fc")
    dropped: int = 0
    thread: int = 11
    filter_calls: Literal["work", "missing", "refused", "broken"] = "work"
    refused_apis: frozenset[str] = frozenset()
    register_status: int = 0  # what cuptiActivityRegisterCallbacks answers
    walk_stops_after: int | None = None  # cuptiActivityGetNextRecord answers `walk_status` after this many records
    walk_status: int = 0
    refused_kinds: frozenset[ActivityKind] = frozenset()  # kinds activity_enable refuses
    finalize_error: Exception | None = None  # what finalize raises, where it fails
    disable_error: Exception | None = None  # what activity_disable raises, where it fails
    attached: bool = False  # CUPTI attached to the process: by registering the buffer callbacks, until finalize
    events: list[str] = field(default_factory=list)  # "register", "flush", "disable", "finalize", in order
    buffered: list[Activity] = field(default_factory=list)
    enabled: set[ActivityKind] = field(default_factory=set)
    api_switches: dict[tuple[ActivityKind, int], bool] = field(default_factory=dict)  # per-API switches in force
    switch_log: list[tuple[ActivityKind, int, int]] = field(default_factory=list)  # every per-API switch accepted
    delivered: list[Activity] = field(default_factory=list)  # everything handed to the tracer's callback
    launch_correlations: list[int] = field(default_factory=list)  # the correlation id of every launch emitted
    _clock: itertools.count[int] = field(default_factory=lambda: itertools.count(1000, 10))
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    _callbacks: tuple[Callable[..., None], Callable[..., None]] | None = None  # the tracer's, as libcupti holds them
    _walk: list[int] = field(default_factory=list)  # the record addresses of the buffer being handed back
    _strings: list[ctypes.Array[ctypes.c_char]] = field(default_factory=list)  # the names the records point to
    _calls: int = 0

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        inner = types.SimpleNamespace(
            ActivityKind=ActivityKind, ActivityFlag=ActivityFlag, cuptiError=CuptiError,
            RuntimeApiTraceCbid=RuntimeApiTraceCbid, DriverApiTraceCbid=DriverApiTraceCbid,
            activity_kernel10_dtype=KERNEL_DTYPE, activity_marker2_dtype=MARKER_DTYPE, activity_api_dtype=API_DTYPE,
            activity_enable=self._enable_kind,
            activity_disable=self._disable_kind, activity_flush_all=self._flush,
            activity_get_num_dropped_records=self._num_dropped, finalize=self._finalize,
        )
        if self.filter_calls != "missing":
            inner.activity_enable_runtime_api = lambda cbid, on: self._switch(ActivityKind.RUNTIME, cbid, on)
            inner.activity_enable_driver_api = lambda cbid, on: self._switch(ActivityKind.DRIVER, cbid, on)
        monkeypatch.setitem(sys.modules, "cupti", types.SimpleNamespace(cupti=inner))
        monkeypatch.setenv("NVTX_INJECTION64_PATH", "/fake/libcupti.so")
        monkeypatch.setattr(kernel_trace, "load_libcupti", lambda path: self.library())
        fresh = functools.cache(kernel_trace._activity_buffers.__wrapped__)  # no reader of another test's library
        monkeypatch.setattr(kernel_trace, "_activity_buffers", fresh)

    def library(self) -> types.SimpleNamespace:
        """libcupti's two buffer functions the tracer calls through ctypes (plain functions: it sets their types)."""

        def register(requested: Callable[..., None], completed: Callable[..., None]) -> int:
            self.events.append("register")
            if self.register_status:
                return self.register_status
            self._callbacks, self.attached = (requested, completed), True
            return 0

        def next_record(buffer: int, valid: int, record: ctypes._Pointer[ctypes.c_void_p]) -> int:
            current = record.contents.value
            index = 0 if current is None else self._walk.index(current) + 1
            if self.walk_stops_after is not None and index >= self.walk_stops_after:
                return self.walk_status
            if index >= len(self._walk):
                return MAX_LIMIT_REACHED
            record.contents.value = self._walk[index]
            return 0

        return types.SimpleNamespace(cuptiActivityRegisterCallbacks=register, cuptiActivityGetNextRecord=next_record)

    def switched_off(self, kind: ActivityKind) -> set[str]:
        """The names of the APIs of `kind` whose records are off now while their kind is on."""
        return {API_KINDS[kind](cbid).name for (k, cbid), on in self.api_switches.items() if k == kind and not on}

    def _enable_kind(self, kind: ActivityKind) -> None:
        if kind in self.refused_kinds:
            raise CuptiError("CUPTI_ERROR_NOT_INITIALIZED")
        self.enabled.add(kind)
        self._forget_switches(kind)

    def _disable_kind(self, kind: ActivityKind) -> None:
        self.events.append("disable")
        if self.disable_error is not None:
            raise self.disable_error
        self.enabled.discard(kind)
        self._forget_switches(kind)

    def _forget_switches(self, kind: ActivityKind) -> None:
        self.api_switches = {key: on for key, on in self.api_switches.items() if key[0] != kind}

    def _switch(self, kind: ActivityKind, cbid: int, on: int) -> None:
        if self.filter_calls == "broken":
            raise TypeError("a changed binding: activity_enable_runtime_api() takes 1 argument")
        if self.filter_calls == "refused" or API_KINDS[kind](cbid).name in self.refused_apis:
            raise CuptiError("CUPTI_ERROR_NOT_SUPPORTED")
        self.api_switches[(kind, cbid)] = bool(on)
        self.switch_log.append((kind, cbid, on))

    def _records(self, kind: ActivityKind, cbid: int) -> bool:
        switch = self.api_switches.get((kind, cbid))
        return switch if switch is not None else kind in self.enabled

    def _flush(self, forced: int) -> None:
        self.events.append("flush")
        if self._callbacks is not None and self.buffered:
            self.delivered.extend(self.buffered)
            self.hand_back(self.buffered)
        self.buffered.clear()

    def hand_back(self, activities: list[Activity]) -> None:
        """Ask the tracer for a buffer, pack `activities` into it (8-byte aligned records) and hand it back."""
        requested, completed = self._callbacks or (None, None)
        assert requested is not None and completed is not None
        buffer, size, records = ctypes.c_void_p(), ctypes.c_size_t(), ctypes.c_size_t()
        requested(ctypes.byref(buffer), ctypes.byref(size), ctypes.byref(records))
        assert buffer.value is not None
        self._walk, offset = [], 0
        for activity in activities:
            packed = self._packed(activity)
            assert offset + len(packed) <= size.value
            ctypes.memmove(buffer.value + offset, packed, len(packed))
            self._walk.append(buffer.value + offset)
            offset += -(-len(packed) // 8) * 8
        completed(None, 0, buffer.value, size.value, offset)

    def _packed(self, a: Activity) -> bytes:
        record = np.zeros(1, DTYPES[a.kind])
        record["kind"] = int(a.kind)
        for name in record.dtype.names or ():
            if name not in ("kind", "name", "object_id", "pad", "process_id", "object_kind", "return_value"):
                record[name] = getattr(a, name)
        if "name" in record.dtype.names:
            text = ctypes.create_string_buffer(a.name.encode()) if a.name else None
            if text is not None:
                self._strings.append(text)
            record["name"] = ctypes.addressof(text) if text is not None else 0
        if a.object_id is not None:
            record["object_id"]["pt"]["thread_id"] = a.object_id.pt.thread_id
        return record.tobytes()

    def _finalize(self) -> None:
        """CUPTI detached, as cuptiFinalize does: what it had not handed back is lost, the buffer callbacks and
        every kind and per-API switch forgotten (registering the callbacks again attaches it anew)."""
        if self.finalize_error is not None:
            raise self.finalize_error
        self.events.append("finalize")
        self.attached = False
        self.buffered.clear()
        self._callbacks = None
        self.enabled.clear()
        self.api_switches.clear()

    def _num_dropped(self, context: int, stream: int, address: int) -> None:
        ctypes.c_size_t.from_address(address).value = self.dropped

    def _marker(self, name: str) -> int:
        marker_id = next(self._ids)
        pt = types.SimpleNamespace(pt=types.SimpleNamespace(thread_id=self.thread))
        self.buffered.append(Activity(ActivityKind.MARKER, name=name, flags_=int(ActivityFlag.MARKER_START),
                                      id=marker_id, timestamp=next(self._clock), object_id=pt))
        return marker_id

    def _end(self, marker_id: int) -> None:
        self.buffered.append(Activity(ActivityKind.MARKER, flags_=int(ActivityFlag.MARKER_END), id=marker_id,
                                      timestamp=next(self._clock)))

    def _api_call(self, api: RuntimeApiTraceCbid | DriverApiTraceCbid) -> int:
        kind = ActivityKind.RUNTIME if isinstance(api, RuntimeApiTraceCbid) else ActivityKind.DRIVER
        correlation = next(self._ids)
        if self._records(kind, int(api)):
            self.buffered.append(Activity(kind, correlation_id=correlation, thread_id=self.thread, cbid=int(api),
                                          start=next(self._clock)))
        return correlation

    def run_once(self) -> None:
        """Even layers launch through the runtime, odd ones through the driver."""
        call = self._marker(f"trt-inspect/call/{self._calls}")
        self._calls += 1
        for i, layer in enumerate(self.layers):
            marker = self._marker(layer)
            self._api_call(RuntimeApiTraceCbid.cudaStreamIsCapturing_v10000)
            launch = RuntimeApiTraceCbid.cudaLaunchKernel_v7000 if i % 2 == 0 else DriverApiTraceCbid.cuLaunchKernelEx
            correlation = self._api_call(launch)
            self.launch_correlations.append(correlation)
            launched = next(self._clock)
            self.buffered.append(Activity(ActivityKind.CONCURRENT_KERNEL, name=f"{layer}_kernel", start=launched + 100,
                                          end=launched + 105, correlation_id=correlation))
            self._api_call(RuntimeApiTraceCbid.cudaGetLastError_v3020)
            self._api_call(DriverApiTraceCbid.cuCtxGetCurrent)
            self._end(marker)
        self._end(call)
