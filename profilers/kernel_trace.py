"""Kernel tracing with cupti-python: every kernel of the traced calls, with its NVTX layer range.

Set-up follows the CUPTI Python documentation: `NVTX_INJECTION64_PATH` must name the same libcupti
that cupti-python loads, before the first NVTX call of the process (`prepare_nvtx_injection`, called
by the CLI before torch or TensorRT is imported). Kernels replayed from a CUDA graph carry no NVTX
ranges, so traced calls run eagerly; timing uses graphs separately.

Runtime and driver API records serve only as launches (`Launch`: the kernel's launching thread and
time, joined to the kernel by correlation id). Most API calls launch nothing (PyTorch calls
cudaGetLastError, cudaStreamIsCapturing, cudaGetDevice and event functions around every kernel), so
the tracer switches the records of every API that `launches_kernels` rejects off in CUPTI for the
trace, and skips any such record that arrives all the same. The trace's note says how it went.
"""

from __future__ import annotations

import contextlib
import ctypes
import enum
import functools
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from profilers.attribution import KernelRecord, Launch, Range, TraceRecords
from profilers.cupti_buffers import ActivityBuffers, load_libcupti
from sessions.documents.errors import MissingEnvironment, first_line

RANGE_KIND = "nvtx"
INJECTION_ENV = "NVTX_INJECTION64_PATH"
DETACH_AFTER_TRACE = True  # CUPTI detached once a trace is read (`CuptiTracer._detach`); off: kept attached, as the
# benchmarks that measure what an attached CUPTI costs the timed rows run it (benchmarks/capture_levels.py)
KERNEL_COLUMNS = ("start", "end", "correlation_id", "stream_id", "grid_x", "grid_y", "grid_z", "block_x", "block_y",
                  "block_z")
# the fields `CuptiTracer._records` reads, by cupti-python's record layout (a dotted name: a field of a field)
LAYOUT_FIELDS = {"activity_kernel10_dtype": (*KERNEL_COLUMNS, "name"),
                 "activity_marker2_dtype": ("flags_", "id", "name", "timestamp", "object_id.pt.thread_id"),
                 "activity_api_dtype": ("cbid", "correlation_id", "thread_id", "start")}
LAUNCH_WORD = "Launch"
CBID_BOUNDS = frozenset({"INVALID", "SIZE", "FORCE_INT"})  # members of CUPTI's cbid enums that name no API


def launches_kernels(api: str) -> bool:
    """Whether the CUDA runtime or driver API named `api` (a member of cupti's cbid enums) can launch a kernel.

    The rule: the name contains "Launch". In cupti-python 13.4's enums that is, in the runtime API, cudaLaunch,
    cudaLaunchKernel, cudaLaunchKernelExC, cudaLaunchCooperativeKernel(MultiDevice), cudaGraphLaunch, CUDA 13's
    __cudaLaunchKernel (what a triple-chevron launch calls) and cudaLaunchHostFunc(_v2), with their _ptsz twins;
    in the driver API cuLaunch, cuLaunchGrid(Async), cuLaunchKernel(Ex), cuLaunchCooperativeKernel(MultiDevice),
    cuGraphLaunch and cuLaunchHostFunc(_v2), likewise. The other APIs that name kernels or graphs configure, query or
    edit them (cuFuncSet*, cuParamSet*, cudaGraphAddKernelNode, cudaGraphExecKernelNodeSetParams, cuKernelGet*,
    ...) and start nothing; memset and memcpy work is recorded as memset and memcpy activity, not as kernels.
    The host-function launches match and start no kernel: keeping their few records costs nothing.
    """
    return LAUNCH_WORD in api


@functools.cache
def non_launch_cbids(cbids: type[enum.IntEnum]) -> frozenset[int]:
    """The callback ids in `cbids` none of whose names (aliases included) `launches_kernels`.

    An id the enum does not name is not in it, so its records stay on and are kept, as in CUPTI's default.
    """
    launch: set[int] = set()
    other: set[int] = set()
    for name, member in cbids.__members__.items():
        if name not in CBID_BOUNDS:
            (launch if launches_kernels(name) else other).add(int(member))
    return frozenset(other - launch)


CBID_HEADERS = {"runtime": ("cupti_runtime_cbid.h", "CUPTI_RUNTIME_TRACE_CBID_"),
                "driver": ("cupti_driver_cbid.h", "CUPTI_DRIVER_TRACE_CBID_")}


@functools.cache
def header_cbids(api: str, library: str | None) -> type[enum.IntEnum] | None:
    """CUPTI's callback-id enum of the `api` (runtime | driver) as its own C header declares it, read from the
    `include/` folder beside `library` (the libcupti NVTX loads: nvidia-cuda-cupti ships both), for a cupti-python
    that names no ids (13.0 does not; 13.4 does); member names as cupti-python gives them (the header's prefix off).
    None where no header is found or it declares nothing."""
    if not library:
        return None
    name, prefix = CBID_HEADERS[api]
    header = os.path.join(os.path.dirname(os.path.dirname(library)), "include", name)
    try:
        with open(header, encoding="utf-8", errors="replace") as file:
            text = file.read(4 << 20)
    except OSError:
        return None
    members = {m.group(1): int(m.group(2), 0)
               for m in re.finditer(rf"\b{prefix}(\w+)\s*=\s*(0x[0-9a-fA-F]+|\d+)", text)}
    return enum.IntEnum(f"{api.capitalize()}ApiTraceCbid", members) if members else None  # type: ignore[return-value]


@dataclass(frozen=True)
class NonLaunchApis:
    """The runtime and driver callback ids whose activity records the tracer switches off and skips."""

    runtime: frozenset[int]
    driver: frozenset[int]

    @classmethod
    def of(cls, cupti: Any, library: str | None = None) -> NonLaunchApis:
        """From cupti-python's RuntimeApiTraceCbid and DriverApiTraceCbid, else from CUPTI's headers beside `library`
        (`header_cbids`); empty where neither names the ids."""
        runtime = getattr(cupti, "RuntimeApiTraceCbid", None) or header_cbids("runtime", library)
        driver = getattr(cupti, "DriverApiTraceCbid", None) or header_cbids("driver", library)
        return cls(
            non_launch_cbids(runtime) if runtime is not None else frozenset(),
            non_launch_cbids(driver) if driver is not None else frozenset(),
        )


def _has_field(dtype: Any, dotted: str) -> bool:
    """Whether the structured numpy dtype `dtype` has the field `dotted` ("object_id.pt.thread_id": nested)."""
    for name in dotted.split("."):
        names = getattr(dtype, "names", None) or ()
        if name not in names:
            return False
        dtype = dtype[name]
    return True


@functools.cache
def _activity_buffers(library: str, dtypes: tuple[tuple[int, np.dtype], ...]) -> ActivityBuffers:
    return ActivityBuffers(load_libcupti(library), dict(dtypes))


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
    """Collects kernel, marker and launch activities between start() and stop().

    Records arrive through `cupti_buffers.ActivityBuffers` (libcupti's buffers decoded in bulk with cupti-python's
    record layouts), not through cupti-python's one-object-a-record callbacks. `api_note` says, once started,
    whether CUPTI recorded launch APIs only or every API.
    """

    def __init__(self) -> None:
        try:
            from cupti import cupti
        except ImportError as exc:
            raise MissingEnvironment(f"CUPTI tracing needs cupti-python: {exc}") from None
        self._cupti: Any = cupti
        self.kernels: list[KernelRecord] = []
        self.launches: list[Launch] = []
        self.open_markers: dict[int, tuple[str, int, int]] = {}
        self.ranges: list[Range] = []
        self.api_note = ""
        k = cupti.ActivityKind
        self._kinds = [k.CONCURRENT_KERNEL, k.MARKER, k.RUNTIME, k.DRIVER]
        self._kernel_kinds = {int(k.CONCURRENT_KERNEL), int(k.KERNEL)}
        self._marker_kind = int(k.MARKER)
        self._start_flag = int(cupti.ActivityFlag.MARKER_START)
        self._instant_flag = int(cupti.ActivityFlag.MARKER_INSTANTANEOUS)
        self._skipped = NonLaunchApis.of(cupti, os.environ.get(INJECTION_ENV))
        self._api_kinds = {int(k.RUNTIME), int(k.DRIVER)}
        self._skipped_by_kind = {int(k.RUNTIME): np.fromiter(self._skipped.runtime, np.int64),
                                 int(k.DRIVER): np.fromiter(self._skipped.driver, np.int64)}
        self._switched_off: list[tuple[Callable[[int, int], object], int]] = []
        self._reader: ActivityBuffers | None = None  # the buffers' reader, from `start`
        self.detach_note = ""  # from `stop`: why CUPTI stayed attached, where it did

    def _buffers(self) -> ActivityBuffers:
        """The reader of libcupti's buffers, one for the process (CUPTI may call its callbacks until it is done).
        `MissingEnvironment` where cupti-python's record layouts lack a field `_records` reads (`LAYOUT_FIELDS`)."""
        library = os.environ.get(INJECTION_ENV) or ""
        k = self._cupti.ActivityKind
        layouts = {name: getattr(self._cupti, name, None) for name in LAYOUT_FIELDS}
        for name, fields in LAYOUT_FIELDS.items():
            missing = [field for field in fields if not _has_field(layouts[name], field)]
            if missing:
                raise MissingEnvironment(f"cupti-python's {name} lacks {', '.join(missing)}, which the tracer reads: "
                                         "install the cupti-python the trace extra pins (pip install 'trt-inspect"
                                         "[trace]')")
        dtypes = {int(k.CONCURRENT_KERNEL): layouts["activity_kernel10_dtype"],
                  int(k.KERNEL): layouts["activity_kernel10_dtype"],
                  int(k.MARKER): layouts["activity_marker2_dtype"],
                  int(k.RUNTIME): layouts["activity_api_dtype"], int(k.DRIVER): layouts["activity_api_dtype"]}
        return _activity_buffers(library, tuple(sorted(dtypes.items(), key=lambda item: item[0])))

    def _records(self, kind: int, records: np.ndarray, strings: Callable[[np.ndarray], list[str]]) -> None:
        """One buffer's records of `kind`, in order, kept as the attribution needs them."""
        if kind in self._kernel_kinds:
            columns = (records[name].tolist() for name in KERNEL_COLUMNS)
            self.kernels.extend(
                KernelRecord(name=name, start=start, end=end, correlation=correlation, stream=stream,
                             grid=(gx, gy, gz), block=(bx, by, bz))
                for name, (start, end, correlation, stream, gx, gy, gz, bx, by, bz)
                in zip(strings(records["name"]), zip(*columns, strict=True), strict=True)
            )
        elif kind in self._api_kinds:
            kept = records[~np.isin(records["cbid"], self._skipped_by_kind[kind])]
            self.launches.extend(map(Launch, kept["correlation_id"].tolist(), kept["thread_id"].tolist(),
                                     kept["start"].tolist()))
        elif kind == self._marker_kind:
            threads = records["object_id"]["pt"]["thread_id"].tolist()
            for flags, marker_id, name, thread, timestamp in zip(records["flags_"].tolist(), records["id"].tolist(),
                                                                 strings(records["name"]), threads,
                                                                 records["timestamp"].tolist(), strict=True):
                self._marker(flags, marker_id, name, thread, timestamp)

    def _marker(self, flags: int, marker_id: int, name: str, thread: int, timestamp: int) -> None:
        if flags & self._instant_flag:
            return
        if flags & self._start_flag:
            self.open_markers[marker_id] = (name, thread, timestamp)
            return
        opened = self.open_markers.pop(marker_id, None)
        if opened is not None:
            name, thread, start = opened
            self.ranges.append(Range(name, thread, start, timestamp))

    def start(self) -> None:
        """Records on: the buffer callbacks registered, the kinds switched on, the APIs that launch nothing off.
        `MissingEnvironment` where CUPTI refuses, with the kinds switched on before the refusal off again and, where it
        had taken the callbacks, CUPTI detached (`_detach`). Where it refuses the callbacks, another profiler may hold
        CUPTI, and nothing is detached from under it."""
        cupti = self._cupti
        buffers = self._reader = self._buffers()
        status = buffers.register(self._records)
        if status:
            buffers.release()
            raise MissingEnvironment(f"CUPTI refused the activity buffer callbacks (status {status}); another "
                                     "profiler may hold it: use --tracer torch")
        enabled = []
        try:
            for kind in self._kinds:
                cupti.activity_enable(kind)
                enabled.append(kind)
        except cupti.cuptiError as exc:
            for kind in enabled:
                with contextlib.suppress(cupti.cuptiError):  # the refusal is what the trace reports
                    cupti.activity_disable(kind)
            buffers.release()
            stayed = self._detach()  # the callbacks registered: CUPTI attached for this trace
            raise MissingEnvironment(
                f"CUPTI refused to trace ({exc}); another profiler may hold it: use --tracer torch{_also(stayed)}"
            ) from None
        self.api_note = self._switch_off_non_launch_apis()

    def _switch_off_non_launch_apis(self) -> str:
        """After the API kinds are on (CUPTI's contract: the kind switches every API on, later per-API calls
        switch single APIs off), switch off each API that launches no kernel; returns the note for the trace.

        A switch that cupti-python lacks, or a call CUPTI refuses (an older CUPTI), leaves that API recorded:
        its records are skipped on arrival instead.
        """
        cupti = self._cupti
        refusal = "" if self._skipped.runtime or self._skipped.driver else ("neither cupti-python nor CUPTI's headers "
                                                                             "name the API callback ids")
        refused = 0
        for switch_name, cbids in (
            ("activity_enable_runtime_api", self._skipped.runtime),
            ("activity_enable_driver_api", self._skipped.driver),
        ):
            switch = getattr(cupti, switch_name, None)
            if switch is None:
                refusal = refusal or f"cupti-python has no {switch_name}"
                refused += len(cbids)
                continue
            for cbid in sorted(cbids):
                try:
                    switch(cbid, 0)
                except Exception as exc:  # noqa: BLE001  (cuptiError; RuntimeError: a function this libcupti lacks;
                    # any other error of a changed binding: the API stays recorded, its records skipped on arrival)
                    refusal = refusal or f"{switch_name}: {exc}"
                    refused += 1
                else:
                    self._switched_off.append((switch, cbid))
        if not self._switched_off:
            return f"API records: all, those of no launch skipped on arrival (CUPTI switched none off: {refusal})"
        off = f"API records: kernel launches only (CUPTI switched {len(self._switched_off)} other APIs off"
        return f"{off}; {refused} it would not are skipped on arrival: {refusal})" if refused else f"{off})"

    def _switch_apis_back_on(self) -> None:
        """Undo `_switch_off_non_launch_apis`, while the API kinds are still on, so that a later trace in this
        process starts from CUPTI's default. A refusal here is harmless: enabling a kind resets its APIs."""
        for switch, cbid in self._switched_off:
            try:
                switch(cbid, 1)
            except Exception:  # noqa: BLE001, S110  (harmless: enabling a kind resets its APIs)
                pass
        self._switched_off.clear()

    def stop(self) -> int:
        """Flush and disable (after `start`), then detach CUPTI from the process (`_detach`, whatever happened before
        it; `detach_note` says where it stayed); returns the number of records CUPTI dropped. `MissingEnvironment`
        where the records could not be read (`ActivityBuffers.errors`), with the detach's note."""
        cupti = self._cupti
        assert self._reader is not None, "stop() before start()"
        try:
            cupti.activity_flush_all(1)
            dropped = ctypes.c_size_t(0)
            try:
                cupti.activity_get_num_dropped_records(0, 0, ctypes.addressof(dropped))
            except cupti.cuptiError:
                pass
            self._switch_apis_back_on()
            for kind in self._kinds:
                cupti.activity_disable(kind)
            cupti.activity_flush_all(1)
            errors = self._reader.release()
        finally:
            self.detach_note = self._detach()
        if errors:
            raise MissingEnvironment(f"CUPTI's records could not be read: {errors[0]}{_also(self.detach_note)}")
        return int(dropped.value)

    def _detach(self) -> str:
        """CUPTI detached from the process (cuptiFinalize) once every record is read, unless `DETACH_AFTER_TRACE` is
        off; "" where it was (or is not to be), else the note that says it stayed. Attached, with every activity off,
        CUPTI still slowed each later CUDA-graph replay of the process (benchmarks/results/h100/cupti-detach/), so
        the timing rounds that follow a study's traces would time it. The next `start` attaches it again (CUPTI's
        dynamic attach). Called on the thread that traced, once the traced calls have synchronized (or failed): a
        finalize that races another thread's CUDA call can crash (CUPTI's notes on dynamic detach), and no other
        thread of a study makes one."""
        if not DETACH_AFTER_TRACE:
            return ""
        try:
            self._cupti.finalize()
        except Exception as exc:  # noqa: BLE001  (cuptiError; a binding without finalize: the trace stands)
            return f"CUPTI stayed attached after the trace ({first_line(exc)}): later CUDA-graph replays may run slower"
        return ""


def _also(note: str) -> str:
    """`note` (`CuptiTracer.detach_note`) as the end of an error's line; "" where there is none."""
    return f"; {note}" if note else ""


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
    except BaseException:
        with contextlib.suppress(Exception):  # the calls' own failure is the one to report
            synchronize()  # what they launched has run before CUPTI detaches (`CuptiTracer._detach`)
        with contextlib.suppress(Exception):
            tracer.stop()
        raise
    dropped = tracer.stop()
    if calls and not tracer.kernels:
        raise MissingEnvironment(f"CUPTI delivered no kernel of {calls} traced call(s): {INJECTION_ENV} may name "
                                 f"another libcupti than the one cupti-python loads{_also(tracer.detach_note)}")
    notes = [tracer.api_note, *([tracer.detach_note] if tracer.detach_note else [])]
    if tracer.open_markers:
        notes.append(f"{len(tracer.open_markers)} NVTX ranges left open")
    return TraceRecords(
        tracer="cupti",
        unit="kernel",
        calls=calls,
        kernels=tracer.kernels,
        launches=tracer.launches,
        ranges=tracer.ranges,
        dropped=dropped,
        note="; ".join(notes),
    )
