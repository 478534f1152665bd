"""The time a study has left, estimated from the steps it has done (variants built, timing rounds run).

Front-end free: the live study screen feeds it every `Progress` and asks for its line after each one and once a
second between them, so the figure counts down while a step runs instead of standing still until the next finishes.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from inspector.study import Progress

VARIANT_PHASES = ("build", "quality", "trace")


def duration_words(seconds: float) -> str:
    seconds = max(0, round(seconds))
    return f"{seconds // 60} min {seconds % 60:02d} s" if seconds >= 60 else f"{seconds} s"


class Estimate:
    """Seconds per finished variant (build, quality, trace) and per timing round, measured as they finish; what is
    left is that rate times the steps to go, less the time the current step has run so far."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.started = clock()
        self.last: Progress | None = None  # the last step that says where the study stands
        self.step_started = self.started  # when the last finished variant (or round) finished
        self.timing_started: float | None = None
        self.first_round_done: float | None = None  # the first round holds every variant's warm-up; the rest do not

    def update(self, p: Progress) -> str:
        """Take in `p` (steps inside a build, which name no variant, leave the estimate as it stands); the line."""
        now = self.clock()
        if p.phase == "timing":
            if self.timing_started is None:
                self.timing_started = self.step_started = now
            if self.last is None or p.done != self.last.done or self.last.phase != "timing":
                self.step_started = now
            if p.done == 1 and self.first_round_done is None:
                self.first_round_done = now
            self.last = p
        elif p.phase in VARIANT_PHASES and p.variant is not None and p.total > 0:
            if self.last is None:  # the variants' time starts with the first of them, not with the set-up before
                self.started = now
            if self.last is None or p.done != self.last.done:
                self.step_started = now
            self.last = p
        return self.line()

    def line(self) -> str:
        """What is left and about how long, as of now; before a step has finished, how long this one has run."""
        p, now = self.last, self.clock()
        if p is None:
            return f"setting up: {duration_words(now - self.started)} so far; an estimate once a variant is built"
        running = now - self.step_started
        if p.phase == "timing":
            assert self.timing_started is not None
            if p.done <= 0 or p.total <= 0:
                return (f"timing: {p.total} rounds after the warm-up, {duration_words(now - self.timing_started)} "
                        "in; an estimate after the first round")
            if p.done >= 2 and self.first_round_done is not None:  # rounds without the warm-up
                per_round = (self.step_started - self.first_round_done) / (p.done - 1)
            else:
                per_round = (self.step_started - self.timing_started) / p.done
            return f"timing: round {p.done} of {p.total}; {self._left(per_round * (p.total - p.done) - running)}"
        if p.done <= 0:
            return (f"variant 1 of {p.total}: {duration_words(now - self.started)} so far; an estimate once it is "
                    "built, measured and traced")
        per_variant = (self.step_started - self.started) / p.done
        left = per_variant * (p.total - p.done) - running
        return f"{p.done} of {p.total} variants done; {self._left(left)} for the rest, then the timing rounds"

    @staticmethod
    def _left(seconds: float) -> str:
        """`about N s left`; past the estimate, none left and that this step takes longer than the ones before."""
        return f"about {duration_words(seconds)} left" + ("" if seconds >= 0 else " (this step runs longer)")
