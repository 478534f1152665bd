"""What tracing a PyTorch variant with CUPTI costs, and where (why it matters: docs/engine.md, "The warm run").

For MODEL in fp16 on the GPU, with the tool's own NVTX module ranges and `profilers.kernel_trace.trace`, prints:
the wall seconds of CALLS calls untraced; of one trace as the study makes it, split into the calls, the flush
(`stop`) and the seconds inside the records' handler (`CuptiTracer._records`) with the records by kind, and the
seconds of each CUPTI function the tracer calls through cupti-python (`cupti.NAME`; the flush includes the buffers'
reading, `profilers.cupti_buffers`, and the handler); and of a trace whose handler only counts its records. With
`--also-calls N ...`, the study's trace again with N calls (what of the cost grows with the records).

    python benchmarks/cupti_trace_cost.py [MODEL] [--calls 7] [--also-calls 1 3]
"""

from __future__ import annotations

import argparse
import collections
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's code

from profilers.kernel_trace import prepare_nvtx_injection

if (why := prepare_nvtx_injection()) is not None:  # before torch loads CUDA
    raise SystemExit(f"cupti_trace_cost: {why}")

import timm
import torch

from profilers import kernel_trace
from profilers.module_ranges import module_ranges
from sessions.documents.options import default


class TimedCupti:
    """cupti-python's module with every function call's seconds added to `seconds` under `cupti.NAME`."""

    def __init__(self, cupti, seconds: collections.Counter[str]) -> None:
        self._cupti, self._seconds = cupti, seconds

    def __getattr__(self, name: str):
        value = getattr(self._cupti, name)
        if not callable(value) or isinstance(value, type):
            return value

        def timed(*args, **kwargs):
            started = time.perf_counter()
            try:
                return value(*args, **kwargs)
            finally:
                self._seconds[f"cupti.{name}"] += time.perf_counter() - started
        return timed


def timed_trace(model: torch.nn.Module, run_once, calls: int, counting_only: bool) -> dict[str, float]:
    """One `kernel_trace.trace` of `calls` calls; its seconds split as the docstring says."""
    tracer_class = kernel_trace.CuptiTracer
    handler, stop, init = tracer_class._records, tracer_class.stop, tracer_class.__init__
    seconds: collections.Counter[str] = collections.Counter()
    kinds: collections.Counter[str] = collections.Counter()

    def completed(self, kind, records, strings) -> None:
        kinds[str(kind)] += len(records)
        started = time.perf_counter()
        if not counting_only:
            handler(self, kind, records, strings)
        seconds["handler"] += time.perf_counter() - started

    def timed_stop(self) -> int:
        started = time.perf_counter()
        try:
            return stop(self)
        finally:
            seconds["stop (flush, disable)"] += time.perf_counter() - started

    def timed_init(self) -> None:
        init(self)
        self._cupti = TimedCupti(self._cupti, seconds)

    tracer_class._records, tracer_class.stop = completed, timed_stop  # type: ignore[method-assign]
    tracer_class.__init__ = timed_init  # type: ignore[method-assign]
    try:
        started = time.perf_counter()
        with module_ranges(model, "nvtx"):
            records = kernel_trace.trace(run_once, calls, torch.cuda.synchronize)
        seconds["whole trace"] = time.perf_counter() - started
    finally:
        tracer_class._records, tracer_class.stop = handler, stop  # type: ignore[method-assign]
        tracer_class.__init__ = init  # type: ignore[method-assign]
    result: dict[str, float] = dict(seconds)
    result.update({f"records {kind}": count for kind, count in sorted(kinds.items())})
    result["kernels kept"] = len(records.kernels)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", nargs="?", default="senet154")
    parser.add_argument("--calls", type=int, default=default("trace_calls"), help="as a study traces a variant")
    parser.add_argument("--also-calls", type=int, nargs="*", default=[], help="the study's trace again with N calls")
    args = parser.parse_args()
    model = timm.create_model(args.model, pretrained=False).eval().cuda().half()
    batch = torch.randn(1, 3, 224, 224, device="cuda", dtype=torch.half)

    @torch.no_grad()
    def run_once() -> None:
        model(batch)

    for _ in range(3):
        run_once()
    torch.cuda.synchronize()
    started = time.perf_counter()
    with module_ranges(model, "nvtx"):
        for _ in range(args.calls):
            run_once()
        torch.cuda.synchronize()
    print(f"{args.model} fp16, {args.calls} calls untraced (NVTX ranges on): {time.perf_counter() - started:.3f} s")
    runs = [("as the study traces", False, args.calls), ("handler counting only", True, args.calls),
            ("as the study traces, again", False, args.calls)]
    runs += [(f"as the study traces, {calls} calls", False, calls) for calls in args.also_calls]
    for label, counting_only, calls in runs:
        figures = timed_trace(model, run_once, calls, counting_only)
        print(f"{label}: " + ", ".join(f"{key} {value:.3f} s" if isinstance(value, float) else f"{key} {value}"
                                       for key, value in figures.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
