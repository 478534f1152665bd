"""Where a CUPTI trace's flush spends its time: CUPTI itself, or cupti-python's record objects.

For MODEL in fp16 on the GPU, traced as a study traces it (the tool's NVTX module ranges, kernel, marker, runtime and
driver records, the APIs that launch nothing switched off), prints the seconds of `cuptiActivityFlushAll` with
buffers read by ctypes straight from libcupti (records walked with `cuptiActivityGetNextRecord`, counted by kind),
then the same walk building cupti-python's objects (`ActivityKernel10.from_ptr` ...) and reading the fields the
tool's tracer reads, then the tool's own tracer (`profilers.kernel_trace.trace`) for comparison.

    python benchmarks/cupti_raw_records.py [MODEL] [--calls 7]
"""

from __future__ import annotations

import argparse
import collections
import ctypes
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's code

from profilers.kernel_trace import INJECTION_ENV, prepare_nvtx_injection

if (why := prepare_nvtx_injection()) is not None:  # before torch loads CUDA
    raise SystemExit(f"cupti_raw_records: {why}")

import timm
import torch
from cupti import cupti

from profilers import kernel_trace
from profilers.module_ranges import module_ranges
from sessions.documents.options import default

BUFFER_BYTES = 8 << 20
MAX_LIMIT_REACHED = 12  # CUPTI_ERROR_MAX_LIMIT_REACHED: no more records in the buffer
REQUESTED = ctypes.CFUNCTYPE(None, ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_size_t),
                             ctypes.POINTER(ctypes.c_size_t))
COMPLETED = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_uint32, ctypes.c_void_p, ctypes.c_size_t,
                             ctypes.c_size_t)


class RawCollector:
    """libcupti's buffer callbacks by ctypes, registered before each trace (CUPTI hands nothing to callbacks
    registered before its kinds were last switched off): records walked with cuptiActivityGetNextRecord and counted
    by kind; with `build_objects`, each also made a cupti-python object and the tracer's fields read."""

    def __init__(self, lib: ctypes.CDLL) -> None:
        kinds = cupti.ActivityKind
        self.lib, self.build_objects = lib, False
        self.buffers: dict[int, ctypes.Array] = {}
        self.counts: collections.Counter[str] = collections.Counter()
        self.seconds: collections.Counter[str] = collections.Counter()
        self.record = ctypes.c_void_p()
        self.classes = {int(kinds.CONCURRENT_KERNEL): cupti.ActivityKernel10, int(kinds.MARKER): cupti.ActivityMarker2,
                        int(kinds.RUNTIME): cupti.ActivityAPI, int(kinds.DRIVER): cupti.ActivityAPI}
        self.callbacks = (REQUESTED(self.requested), COMPLETED(self.completed))

    def requested(self, buffer, size, max_records) -> None:
        block = ctypes.create_string_buffer(BUFFER_BYTES)
        self.buffers[ctypes.addressof(block)] = block
        buffer[0] = ctypes.addressof(block)
        size[0] = BUFFER_BYTES
        max_records[0] = 0

    def completed(self, context, stream, buffer, size, valid) -> None:
        started = time.perf_counter()
        kernel, marker = int(cupti.ActivityKind.CONCURRENT_KERNEL), int(cupti.ActivityKind.MARKER)
        record, lib = self.record, self.lib
        while lib.cuptiActivityGetNextRecord(ctypes.c_void_p(buffer), ctypes.c_size_t(valid),
                                             ctypes.byref(record)) == 0:
            kind = ctypes.c_uint32.from_address(record.value).value
            self.counts[f"records {kind}"] += 1
            if self.build_objects and kind in self.classes:
                a = self.classes[kind].from_ptr(record.value, readonly=True)
                if kind == kernel:
                    self.fields = (a.name, a.start, a.end, a.correlation_id, a.stream_id, a.grid_x, a.block_x)
                elif kind == marker:
                    self.fields = (a.flags_, a.id, a.name, a.timestamp, a.object_id.pt.thread_id)
                else:
                    self.fields = (a.cbid, a.correlation_id, a.thread_id, a.start)
        self.seconds["reading records"] += time.perf_counter() - started
        self.buffers.pop(buffer, None)

    def trace(self, run_once, calls: int, build_objects: bool) -> dict[str, float]:
        """One trace as the study makes it; seconds of the flush, records by kind."""
        lib, kinds = self.lib, cupti.ActivityKind
        wanted = [kinds.CONCURRENT_KERNEL, kinds.MARKER, kinds.RUNTIME, kinds.DRIVER]
        self.build_objects = build_objects
        self.counts.clear()
        self.seconds.clear()
        skipped = kernel_trace.NonLaunchApis.of(cupti, os.environ.get(INJECTION_ENV))
        torch.cuda.synchronize()
        status = lib.cuptiActivityRegisterCallbacks(*self.callbacks)
        if status:
            raise SystemExit(f"cupti_raw_records: cuptiActivityRegisterCallbacks returned {status}")
        for kind in wanted:
            lib.cuptiActivityEnable(int(kind))
        for cbid in skipped.runtime:
            lib.cuptiActivityEnableRuntimeApi(cbid, 0)
        for cbid in skipped.driver:
            lib.cuptiActivityEnableDriverApi(cbid, 0)
        for _ in range(calls):
            run_once()
        torch.cuda.synchronize()
        started = time.perf_counter()
        lib.cuptiActivityFlushAll(1)
        self.seconds["flush"] = time.perf_counter() - started
        for kind in wanted:
            lib.cuptiActivityDisable(int(kind))
        lib.cuptiActivityFlushAll(1)
        return {**self.seconds, **self.counts}


def tool_trace(run_once, calls: int) -> float:
    started = time.perf_counter()
    kernel_trace.trace(run_once, calls, torch.cuda.synchronize)
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", nargs="?", default="senet154")
    parser.add_argument("--calls", type=int, default=default("trace_calls"), help="as a study traces a variant")
    args = parser.parse_args()
    model = timm.create_model(args.model, pretrained=False).eval().cuda().half()
    batch = torch.randn(1, 3, 224, 224, device="cuda", dtype=torch.half)
    lib = ctypes.CDLL(os.environ[INJECTION_ENV])

    @torch.no_grad()
    def run_once() -> None:
        model(batch)

    for _ in range(3):
        run_once()
    collector = RawCollector(lib)
    with module_ranges(model, "nvtx"):
        for label, objects in (("raw, records counted", False), ("raw, cupti-python objects", True),
                               ("raw, records counted, again", False)):
            figures = collector.trace(run_once, args.calls, objects)
            print(f"{label}: " + ", ".join(f"{k} {v:.3f} s" if isinstance(v, float) else f"{k} {v}"
                                           for k, v in figures.items()), flush=True)
        try:
            seconds = tool_trace(run_once, args.calls)
            print(f"the tool's trace (profilers.kernel_trace.trace): {seconds:.3f} s", flush=True)
        except Exception as exc:  # noqa: BLE001  (CUPTI may refuse a second registration)
            print(f"the tool's trace after the raw ones: {exc}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
