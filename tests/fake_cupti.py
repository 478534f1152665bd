"""A stand-in for cupti-python's `cupti` module: the activity API that profilers.kernel_trace uses, fed by a script.

`FakeCupti.install(monkeypatch)` puts it in sys.modules; `run_once` (what the tracer times) emits one call's
activities: its call marker, one layer marker per layer, a runtime launch and a kernel inside each. Flushing hands
the buffered activities to the tracer's callback; the dropped-record count is whatever the test sets.
"""

from __future__ import annotations

import ctypes
import enum
import itertools
import sys
import types
from dataclasses import dataclass, field


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
    flags_: int = 0
    id: int = 0
    timestamp: int = 0
    object_id: object = None


@dataclass
class FakeCupti:
    layers: tuple[str, ...] = ("conv1", "fc")
    dropped: int = 0
    thread: int = 11
    buffered: list[Activity] = field(default_factory=list)
    enabled: set[ActivityKind] = field(default_factory=set)
    _clock: itertools.count = field(default_factory=lambda: itertools.count(1000, 10))
    _ids: itertools.count = field(default_factory=lambda: itertools.count(1))
    _completed: object = None
    _calls: int = 0

    def install(self, monkeypatch) -> None:
        inner = types.SimpleNamespace(
            ActivityKind=ActivityKind, ActivityFlag=ActivityFlag, cuptiError=CuptiError,
            activity_register_callbacks=self._register, activity_enable=self.enabled.add,
            activity_disable=self.enabled.discard, activity_flush_all=self._flush,
            activity_get_num_dropped_records=self._num_dropped,
        )
        monkeypatch.setitem(sys.modules, "cupti", types.SimpleNamespace(cupti=inner))
        monkeypatch.setenv("NVTX_INJECTION64_PATH", "/fake/libcupti.so")

    def _register(self, requested, completed) -> None:
        self._completed = completed

    def _flush(self, forced: int) -> None:
        if self._completed is not None and self.buffered:
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

    def run_once(self) -> None:
        call = self._marker(f"trt-inspect/call/{self._calls}")
        self._calls += 1
        for layer in self.layers:
            marker = self._marker(layer)
            correlation = next(self._ids)
            launched = next(self._clock)
            self.buffered.append(Activity(ActivityKind.RUNTIME, correlation_id=correlation, thread_id=self.thread,
                                          start=launched))
            self.buffered.append(Activity(ActivityKind.CONCURRENT_KERNEL, name=f"{layer}_kernel", start=launched + 100,
                                          end=launched + 105, correlation_id=correlation))
            self._end(marker)
        self._end(call)
