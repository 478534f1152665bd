"""A background load for the CPU benchmarks: N busy processes (each a Python loop that never sleeps) beside a study.

    with busy(2):
        ...  # two more runnable tasks on the host while the block runs

The processes are this benchmark's own children, ended by their handle when the block ends (or fails).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

LOOP = "while True:\n    pass\n"


@contextmanager
def busy(processes: int, settle_s: float = 0.0) -> Iterator[list[subprocess.Popen[bytes]]]:
    """`processes` busy loops for the block's duration, started `settle_s` before it (the 1-minute load average rises
    by about 1 - exp(-settle_s / 60) of them by then); ended (terminated, then killed) when it ends."""
    started = [subprocess.Popen([sys.executable, "-c", LOOP]) for _ in range(processes)]
    try:
        if processes and settle_s > 0:
            time.sleep(settle_s)
        yield started
    finally:
        for process in started:
            process.terminate()
        for process in started:
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def load_words() -> str:
    """The host's load average now, 1 / 5 / 15 minutes."""
    return " / ".join(f"{value:.2f}" for value in os.getloadavg())
