"""What the stand-in "launches" while markers are recorded: NVTX-like ranges and synthetic kernels.

TensorRT opens an NVTX range per layer and launches the layer's kernels inside it; CUPTI records
both. The stand-in does the same into this recorder, on the host clock, with one synthetic kernel
per layer whose run time is the layer's synthetic time on a simulated device clock.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator


class Recorder:
    def __init__(self) -> None:
        self.active = False
        self.clear()

    def clear(self) -> None:
        self.ranges: list[tuple[str, int, int, int]] = []  # message, thread, start, end (ns)
        self.launches: list[tuple[int, int, int]] = []  # correlation, thread, time
        self.kernels: list[tuple[str, int, int, int]] = []  # name, start, end, correlation
        self._last = 0
        self._device_free = 0

    def now(self) -> int:
        self._last = max(time.perf_counter_ns(), self._last + 1)
        return self._last

    @contextlib.contextmanager
    def range(self, message: str) -> Iterator[None]:
        start = self.now()
        try:
            yield
        finally:
            self.ranges.append((message, threading.get_ident(), start, self.now()))

    def launch(self, kernel: str, duration_ns: int) -> None:
        correlation = len(self.kernels)
        launched = self.now()
        self.launches.append((correlation, threading.get_ident(), launched))
        start = max(self._device_free, launched + 1000)
        self._device_free = start + duration_ns
        self.kernels.append((kernel, start, self._device_free, correlation))


RECORDER = Recorder()
