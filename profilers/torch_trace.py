"""Tracing with torch.profiler: CUDA kernels, or CPU ops where there is no GPU.

The fallback where cupti-python is missing or CUPTI is taken. The profiler's Chrome trace holds the
module annotations (`user_annotation`), the launch calls (`cuda_runtime` / `cuda_driver`, with a
correlation id) and the kernels (`kernel`), which `profilers.attribution` joins like CUPTI records.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Callable, Iterator

import orjson
from torch.profiler import ProfilerActivity, profile

from profilers.attribution import CALL_RANGE_PREFIX, KernelRecord, Launch, Range, TraceRecords
from profilers.device import study_device
from profilers.module_ranges import call_range

RANGE_KIND = "annotation"


def _ns(us: float) -> int:
    return round(us * 1000)


def _dim3(value) -> tuple[int, int, int]:
    if isinstance(value, list) and len(value) == 3:
        return (int(value[0]), int(value[1]), int(value[2]))
    return (0, 0, 0)


KINETO_PREFIXES = (b"USDT:", b"STAGE:")


@contextlib.contextmanager
def kineto_lines_dropped() -> Iterator[None]:
    """Kineto writes `USDT: ... profiler_start` / `profiler_stop` and `STAGE:` lines to fd 2 whatever
    KINETO_LOG_LEVEL says, over the TUI and into a headless run's stderr. Fd 2 is caught while the
    profiler starts or stops; every other line is given back."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as caught:
        os.dup2(caught.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            caught.seek(0)
            kept = [line for line in caught.read().splitlines(keepends=True) if not line.startswith(KINETO_PREFIXES)]
            if kept:
                os.write(2, b"".join(kept))


def trace(run_once: Callable[[], None], calls: int, device: str) -> TraceRecords:
    """Profile `calls` inferences; `run_once` must run with annotation ranges on."""
    where = study_device(device)
    activities = [ProfilerActivity.CPU, *([ProfilerActivity.CUDA] if where.gpu else [])]
    prof = profile(activities=activities)
    with kineto_lines_dropped():
        prof.start()
    try:
        for i in range(calls):
            with call_range(RANGE_KIND, i):
                run_once()
        where.synchronize()
    finally:
        with kineto_lines_dropped():
            prof.stop()
    from sessions.documents.input_files import read_regular_file
    from sessions.documents.storage import scratch_path

    with scratch_path(".json") as path:  # torch.profiler writes its trace only to a file
        prof.export_chrome_trace(str(path))
        events = orjson.loads(read_regular_file(path, "profiler trace")).get("traceEvents", [])
    return parse_chrome_trace(events, device)


def parse_chrome_trace(events: list[dict], device: str) -> TraceRecords:
    ranges: list[Range] = []
    launches: list[Launch] = []
    kernels: list[KernelRecord] = []
    ops: list[dict] = []
    for e in events:
        if e.get("ph") != "X":
            continue
        cat = e.get("cat")
        start = _ns(e["ts"])
        end = start + _ns(e.get("dur", 0))
        args = e.get("args") or {}
        if cat == "user_annotation":
            ranges.append(Range(e["name"], int(e["tid"]), start, end))
        elif cat in ("cuda_runtime", "cuda_driver") and "correlation" in args:
            launches.append(Launch(int(args["correlation"]), int(e["tid"]), start))
        elif cat == "kernel":
            kernels.append(
                KernelRecord(
                    name=e["name"],
                    start=start,
                    end=end,
                    correlation=int(args.get("correlation", -1)),
                    stream=int(args.get("stream", 0)),
                    grid=_dim3(args.get("grid")),
                    block=_dim3(args.get("block")),
                )
            )
        elif cat == "cpu_op":
            ops.append(e)
    if study_device(device).gpu:
        return TraceRecords("torch-profiler", "kernel", _count_calls(ranges), kernels, launches, ranges)
    op_kernels, op_launches = _outermost_ops(ops)
    return TraceRecords(
        "cpu-ops",
        "op",
        _count_calls(ranges),
        op_kernels,
        op_launches,
        ranges,
        note="CPU: records are the outermost aten ops of each module, timed on the host",
    )


def _count_calls(ranges: list[Range]) -> int:
    return sum(1 for r in ranges if r.name.startswith(CALL_RANGE_PREFIX))


def _outermost_ops(ops: list[dict]) -> tuple[list[KernelRecord], list[Launch]]:
    """CPU ops not nested in another op on the same thread: aten::conv2d, not its inner calls."""
    kernels: list[KernelRecord] = []
    launches: list[Launch] = []
    ops.sort(key=lambda e: (int(e["tid"]), e["ts"], -e.get("dur", 0)))
    open_until: dict[int, int] = {}
    for e in ops:
        tid = int(e["tid"])
        start = _ns(e["ts"])
        end = start + _ns(e.get("dur", 0))
        if start < open_until.get(tid, -1):
            continue
        open_until[tid] = end
        correlation = len(kernels)
        kernels.append(KernelRecord(name=e["name"], start=start, end=end, correlation=correlation))
        launches.append(Launch(correlation, tid, start))
    return kernels, launches
