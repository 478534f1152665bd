"""A stand-in for cupti-python's `cupti` module: the activity API that profilers.kernel_trace uses, fed by a script.

`FakeCupti.install(monkeypatch)` puts it in sys.modules; `run_once` (what the tracer times) emits one call's
activities: its call marker, one layer marker per layer, and inside each a kernel, the API call that launched it and
API calls that launch nothing (as PyTorch makes around every kernel). Flushing hands the buffered activities to the
tracer's callback; the dropped-record count is whatever the test sets.

API records follow CUPTI's documented switches: a kind switch (activity_enable/disable) turns every API of its kind on
or off and forgets the per-API switches made before it; a per-API switch (activity_enable_runtime_api/_driver_api)
then turns one API on or off. `filter_calls` says whether the per-API switches work, are missing from the module, or
are refused by CUPTI, or fail as a changed binding would (broken); `refused_apis` names single APIs CUPTI refuses to
switch.
"""

from __future__ import annotations

import ctypes
import enum
import itertools
import sys
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

import pytest


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
    buffered: list[Activity] = field(default_factory=list)
    enabled: set[ActivityKind] = field(default_factory=set)
    api_switches: dict[tuple[ActivityKind, int], bool] = field(default_factory=dict)  # per-API switches in force
    switch_log: list[tuple[ActivityKind, int, int]] = field(default_factory=list)  # every per-API switch accepted
    delivered: list[Activity] = field(default_factory=list)  # everything handed to the tracer's callback
    launch_correlations: list[int] = field(default_factory=list)  # the correlation id of every launch emitted
    _clock: itertools.count[int] = field(default_factory=lambda: itertools.count(1000, 10))
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    _completed: Callable[[list[Activity]], None] | None = None
    _calls: int = 0

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        inner = types.SimpleNamespace(
            ActivityKind=ActivityKind, ActivityFlag=ActivityFlag, cuptiError=CuptiError,
            RuntimeApiTraceCbid=RuntimeApiTraceCbid, DriverApiTraceCbid=DriverApiTraceCbid,
            activity_register_callbacks=self._register, activity_enable=self._enable_kind,
            activity_disable=self._disable_kind, activity_flush_all=self._flush,
            activity_get_num_dropped_records=self._num_dropped,
        )
        if self.filter_calls != "missing":
            inner.activity_enable_runtime_api = lambda cbid, on: self._switch(ActivityKind.RUNTIME, cbid, on)
            inner.activity_enable_driver_api = lambda cbid, on: self._switch(ActivityKind.DRIVER, cbid, on)
        monkeypatch.setitem(sys.modules, "cupti", types.SimpleNamespace(cupti=inner))
        monkeypatch.setenv("NVTX_INJECTION64_PATH", "/fake/libcupti.so")

    def switched_off(self, kind: ActivityKind) -> set[str]:
        """The names of the APIs of `kind` whose records are off now while their kind is on."""
        return {API_KINDS[kind](cbid).name for (k, cbid), on in self.api_switches.items() if k == kind and not on}

    def _enable_kind(self, kind: ActivityKind) -> None:
        self.enabled.add(kind)
        self._forget_switches(kind)

    def _disable_kind(self, kind: ActivityKind) -> None:
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

    def _register(self, requested: Callable[[], tuple[int, int]], completed: Callable[[list[Activity]], None]) -> None:
        self._completed = completed

    def _flush(self, forced: int) -> None:
        if self._completed is not None and self.buffered:
            self.delivered.extend(self.buffered)
            self._completed(list(self.buffered))
        self.buffered.clear()

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
