"""A tracer for the stand-in: its recorded markers and synthetic kernels as trace records.

Registered when the stand-in is imported, so `--tracer auto` finds it for the TensorRT backend on
the host. The project's attribution code (profilers.attribution) then runs on these records as on
CUPTI's.
"""

from __future__ import annotations

from profilers.attribution import CALL_RANGE_PREFIX, KernelRecord, Launch, Range, TraceRecords
from profilers.tracers import Tracer, register_tracer
from tensorrt._markers import RECORDER


@register_tracer
class StandInTracer(Tracer):
    name = "trt-stand-in"
    range_kind = "nvtx"
    devices = frozenset({"cpu"})

    def trace(self, run_once, calls, device, synchronize) -> TraceRecords:
        RECORDER.clear()
        RECORDER.active = True
        try:
            for index in range(calls):
                with RECORDER.range(f"{CALL_RANGE_PREFIX}{index}"):
                    run_once()
            synchronize()
        finally:
            RECORDER.active = False
        return TraceRecords(
            tracer=self.name,
            unit="kernel",
            calls=calls,
            kernels=[KernelRecord(name, start, end, correlation) for name, start, end, correlation in RECORDER.kernels],
            launches=[Launch(correlation, thread, at) for correlation, thread, at in RECORDER.launches],
            ranges=[Range(message, thread, start, end) for message, thread, start, end in RECORDER.ranges],
        )

    def describe(self, calls: int) -> str:
        return (
            "markers and synthetic kernels of the TensorRT stand-in for tests (tests/fake_tensorrt), not CUPTI and "
            f"not TensorRT; each kernel attributed to the innermost marker range open at its launch; {calls} "
            "eager call(s) traced"
        )
