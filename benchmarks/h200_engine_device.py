"""The TensorRT backend's CUDA stream and graph paths (builders/engine_device.CudaDevice) on a real GPU.

TensorRT cannot be installed on the lent GPU, so the enqueue here stands in for
`context.execute_async_v3(stream_handle)`: it receives the raw handle of the backend's dedicated stream and
launches real work on it through `torch.cuda.ExternalStream`, as TensorRT launches its kernels on the stream
it is given. What is checked is everything around that call: the CUDA-graph capture on the dedicated stream
(thread-local mode, one enqueue first), replays on the timer's stream, the eager fallback's stream ordering
against the timer's CUDA events, and a failed enqueue during capture never becoming a graph.
Prints one line per check; exits 1 if any fails. `python benchmarks/h200_engine_device.py` (CUDA GPU).
"""

from __future__ import annotations

import sys
from collections.abc import Callable

import torch

from builders.tensorrt.device import CudaDevice
from profilers.timing import EventClock
from sessions.documents.errors import InspectError

N = 4096
RESULTS: list[bool] = []


def check(what: str, ok: bool, detail: str) -> None:
    RESULTS.append(ok)
    print(f"{'PASS' if ok else 'FAIL'}  {what}: {detail}")


class StandInEnqueue:
    """execute_async_v3's part: work on the stream whose raw handle it is given; fails (as the backend raises on
    a False result) whenever `fails()` says so."""

    def __init__(self, device: CudaDevice, fails: Callable[[], bool] = lambda: False) -> None:
        self.device, self.fails = device, fails
        self.a = torch.randn(N, N, device="cuda", dtype=torch.float16)
        self.b = torch.randn(N, N, device="cuda", dtype=torch.float16)
        self.out = torch.zeros(N, N, device="cuda", dtype=torch.float16)
        self.calls = 0

    def __call__(self) -> None:
        self.calls += 1
        if self.fails():
            raise InspectError("TensorRT could not run the engine (execute_async_v3 failed)")
        with torch.cuda.stream(torch.cuda.ExternalStream(self.device.stream_handle)):
            for _ in range(8):
                torch.matmul(self.a, self.b, out=self.out)


def main() -> int:
    device = CudaDevice()
    check("dedicated stream",
          device.stream_handle != 0 and device.stream_handle != torch.cuda.current_stream().cuda_stream,
          f"handle {device.stream_handle:#x}, not the legacy default stream (0)")
    enqueue = StandInEnqueue(device)
    expected = (enqueue.a.float() @ enqueue.b.float()).half()
    replay, why = device.capture(enqueue)
    check("capture", why is None and enqueue.calls == 2,
          f"graph captured after one enqueue outside it (enqueues: {enqueue.calls})")
    enqueue.out.zero_()
    torch.cuda.synchronize()
    replay()
    torch.cuda.synchronize()
    error = (enqueue.out.float() - expected.float()).abs().max().item()
    check("replay computes", enqueue.calls == 2 and error < 1.0,
          f"no new enqueue, max error {error:.3g} against the reference")

    clock = EventClock(lambda: torch.cuda.Event(enable_timing=True), torch.cuda.synchronize)
    graphed = clock.samples(replay, 20)
    eager = clock.samples(device.eager(enqueue), 20)
    graphed_ms, eager_ms = sorted(graphed)[10], sorted(eager)[10]
    check("graph replays timed on the timer's stream", graphed_ms > 0.5,
          f"median {graphed_ms:.3f} ms per replay (8 matmuls {N}^2 fp16)")
    check("eager enqueues ordered between the timer's events", abs(eager_ms / graphed_ms - 1) < 0.2,
          f"median {eager_ms:.3f} ms, {eager_ms / graphed_ms:.2f}x the replay (an unordered enqueue times as ~0)")

    unordered = clock.samples(enqueue, 20)  # what a run on the dedicated stream alone would time
    check("control: without the ordering the events miss the work", sorted(unordered)[10] < 0.5 * graphed_ms,
          f"median {sorted(unordered)[10]:.3f} ms")

    try:
        step, why = device.capture(StandInEnqueue(device, fails=lambda: True))
        check("failed enqueue", False, f"capture returned {step}, {why}")
    except InspectError as exc:
        check("failed enqueue before capture", True, f"raised at the first enqueue, no graph: {exc.message}")
    step, why = device.capture(StandInEnqueue(device, fails=torch.cuda.is_current_stream_capturing))
    check("failed enqueue inside capture", why is not None and "timed eagerly" in why,
          f"eager step kept, never the empty graph: {why}")
    device.synchronize()
    print(f"{sum(RESULTS)} of {len(RESULTS)} checks passed on {torch.cuda.get_device_name()}")
    return 0 if all(RESULTS) else 1


if __name__ == "__main__":
    sys.exit(main())
