"""The time a study has left, estimated from the steps it has done (variants built, timing rounds run).

Front-end free: the live study screen feeds it every `Progress` and shows its line.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from inspector.study import Progress


def duration_words(seconds: float) -> str:
    seconds = max(0, round(seconds))
    return f"{seconds // 60} min {seconds % 60:02d} s" if seconds >= 60 else f"{seconds} s"


class Estimate:
    """Seconds per finished variant (build, quality, trace) and per timing round, measured as they finish."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.started = clock()
        self.timing_started: float | None = None

    def update(self, p: Progress) -> str:
        """One line for `p`: what is left and about how long; before a step has finished, that it is estimating."""
        now = self.clock()
        if p.phase == "timing":
            if self.timing_started is None:
                self.timing_started = now
            if p.done <= 0 or p.total <= 0:
                return f"timing: {p.total} rounds; an estimate after the first round"
            left = (now - self.timing_started) / p.done * (p.total - p.done)
            return f"timing: round {p.done} of {p.total}; about {duration_words(left)} left"
        if p.phase in ("build", "quality", "trace") and p.variant is not None and p.total > 0:
            if p.done <= 0:
                return f"variant 1 of {p.total}; an estimate once it is built, measured and traced"
            left = (now - self.started) / p.done * (p.total - p.done)
            return (f"{p.done} of {p.total} variants done; about {duration_words(left)} left to build the rest, "
                    "then the timing rounds")
        return ""
