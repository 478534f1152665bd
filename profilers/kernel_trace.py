"""Kernel tracing with cupti-python: every kernel of the traced calls, with its NVTX layer range.

Set-up follows the CUPTI Python documentation: `NVTX_INJECTION64_PATH` must name the same libcupti
that cupti-python loads, before the first NVTX call of the process (`prepare_nvtx_injection`, called
by the CLI before torch or TensorRT is imported). Kernels replayed from a CUDA graph carry no NVTX
ranges, so traced calls run eagerly; timing uses graphs separately.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Callable

from profilers.attribution import KernelRecord, Launch, Range, TraceRecords
from sessions.documents.errors import MissingEnvironment

RANGE_KIND = "nvtx"
INJECTION_ENV = "NVTX_INJECTION64_PATH"
BUFFER_BYTES = 8 << 20


def prepare_nvtx_injection() -> str | None:
    """Point NVTX at CUPTI's library; returns why not where that is impossible."""
    if os.environ.get(INJECTION_ENV):
        return None
    try:
        import cupti  # noqa: F401  (the package must be there for the library to be useful)
        from cuda import pathfinder
    except ImportError:
        return "cupti-python is not installed (pip install 'trt-inspect[tensorrt]' or cupti-python)"
    try:
        os.environ[INJECTION_ENV] = pathfinder.load_nvidia_dynamic_lib("cupti").abs_path
    except Exception as exc:  # noqa: BLE001  (pathfinder raises its own DynamicLibNotFoundError and OSError)
        return f"libcupti was not found: {exc}"
    return None


class CuptiTracer:
    """Collects kernel, marker and launch activities between start() and stop()."""

    def __init__(self) -> None:
        try:
            from cupti import cupti
        except ImportError as exc:
            raise MissingEnvironment(f"CUPTI tracing needs cupti-python: {exc}") from None
        self._cupti = cupti
        self.kernels: list[KernelRecord] = []
        self.launches: list[Launch] = []
        self.open_markers: dict[int, tuple[str, int, int]] = {}
        self.ranges: list[Range] = []
        k = cupti.ActivityKind
        self._kinds = [k.CONCURRENT_KERNEL, k.MARKER, k.RUNTIME, k.DRIVER]
        self._start_flag = int(cupti.ActivityFlag.MARKER_START)
        self._instant_flag = int(cupti.ActivityFlag.MARKER_INSTANTANEOUS)

    def _requested(self):
        return BUFFER_BYTES, 0

    def _completed(self, activities) -> None:
        k = self._cupti.ActivityKind
        for a in activities:
            kind = a.kind
            if kind in (k.CONCURRENT_KERNEL, k.KERNEL):
                self.kernels.append(
                    KernelRecord(
                        name=a.name,
                        start=a.start,
                        end=a.end,
                        correlation=a.correlation_id,
                        stream=a.stream_id,
                        grid=(a.grid_x, a.grid_y, a.grid_z),
                        block=(a.block_x, a.block_y, a.block_z),
                    )
                )
            elif kind in (k.RUNTIME, k.DRIVER):
                self.launches.append(Launch(a.correlation_id, a.thread_id, a.start))
            elif kind == k.MARKER:
                self._marker(a)

    def _marker(self, a) -> None:
        flags = int(a.flags_)
        if flags & self._instant_flag:
            return
        if flags & self._start_flag:
            self.open_markers[a.id] = (a.name, a.object_id.pt.thread_id, a.timestamp)
            return
        opened = self.open_markers.pop(a.id, None)
        if opened is not None:
            name, thread, start = opened
            self.ranges.append(Range(name, thread, start, a.timestamp))

    def start(self) -> None:
        cupti = self._cupti
        try:
            cupti.activity_register_callbacks(self._requested, self._completed)
            for kind in self._kinds:
                cupti.activity_enable(kind)
        except cupti.cuptiError as exc:
            raise MissingEnvironment(
                f"CUPTI refused to trace ({exc}); another profiler may hold it: use --tracer torch"
            ) from None

    def stop(self) -> int:
        """Flush and disable; returns the number of records CUPTI dropped."""
        cupti = self._cupti
        cupti.activity_flush_all(1)
        dropped = ctypes.c_size_t(0)
        try:
            cupti.activity_get_num_dropped_records(0, 0, ctypes.addressof(dropped))
        except cupti.cuptiError:
            pass
        for kind in self._kinds:
            cupti.activity_disable(kind)
        cupti.activity_flush_all(1)
        return int(dropped.value)


def trace(run_once: Callable[[], None], calls: int, synchronize: Callable[[], None]) -> TraceRecords:
    """Trace `calls` eager inferences; `run_once` must run with NVTX layer ranges on."""
    from profilers.module_ranges import call_range

    if not os.environ.get(INJECTION_ENV):
        raise MissingEnvironment(
            f"{INJECTION_ENV} was not set before start-up, so NVTX ranges cannot reach CUPTI"
        )
    tracer = CuptiTracer()
    synchronize()
    tracer.start()
    try:
        for i in range(calls):
            with call_range(RANGE_KIND, i):
                run_once()
        synchronize()
    finally:
        dropped = tracer.stop()
    return TraceRecords(
        tracer="cupti",
        unit="kernel",
        calls=calls,
        kernels=tracer.kernels,
        launches=tracer.launches,
        ranges=tracer.ranges,
        dropped=dropped,
        note=f"{len(tracer.open_markers)} NVTX ranges left open" if tracer.open_markers else "",
    )
