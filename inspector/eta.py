"""The time a study has left, estimated from the steps it has done (variants built, timing rounds run).

Front-end free: the live study screen and a headless run feed it every `Progress` and ask for its line after each
one (the screen also once a second between them, so the figure counts down while a step runs).

Where the study stated its plan's estimate per step (the CPU plan's line, an `inspector.cpu_defaults.PlanLine`
that carries the figures it states), the time left is the whole study's: the plan's seconds for the steps to go,
times the study's pace (the measured time of the steps done plus the plan's seconds for the steps to go, over the
plan's seconds for both: `Estimate._pace`). A change of load after the plan was made moves that pace more with each
variant that finishes, so the figure follows the machine. Once two timing rounds
have finished, the rounds to go are timed from the recent rounds themselves (`RECENT_ROUNDS`); after the first alone,
from the first, counted from the study's last report at round 0: where the study reports the warm-ups' end there
(`inspector.study.time_variants` does, and says so), the first round's time holds no warm-up. Without a plan's
estimate, each variant to go is timed as the finished variants of its backend took on average, where the study
reported its build order (`inspector.build_order.BuildOrder`), and not at all while none of its backend has finished
(the time left then waits for one); without the order, as the variants done took on average. The timing rounds are
counted once they start.
"""

from __future__ import annotations

import itertools
import statistics
import time
from collections.abc import Callable

from inspector.build_order import BuildOrder
from inspector.cpu_defaults import PlanLine, StepEstimate
from inspector.study import Progress

VARIANT_PHASES = ("build", "quality", "trace")
RECENT_ROUNDS = 3  # the rounds (after the first) whose median times the rounds to go: follows a change of load


def duration_words(seconds: float) -> str:
    seconds = max(0, round(seconds))
    return f"{seconds // 60} min {seconds % 60:02d} s" if seconds >= 60 else f"{seconds} s"


class Estimate:
    """Seconds per finished variant (build, quality, trace) and per timing round, measured as they finish; what is
    left is the steps to go at that measured pace, less the time the current step has run so far."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.started = clock()
        self.last: Progress | None = None  # the last step that says where the study stands
        self.step_started = self.started  # when the last finished variant (or round) finished
        self.timing_started: float | None = None
        self.rounds_from: float | None = None  # the last report at round 0: the warm-ups' end, where reported
        self.rounds: list[float] = []  # when each timing round finished
        self.planned: StepEstimate | None = None  # the plan's seconds per step, where the study stated them
        self.variant_s: dict[str, float] = {}  # finished variants in order, each its seconds since the one before
        self.order: BuildOrder | None = None  # the variants and their backends, where the study reported them
        self.variants_time = 0.0  # seconds from the first variant's start to the last one's end

    def update(self, p: Progress) -> str:
        """Take in `p` (steps inside a build, which name no variant, leave the estimate as it stands); the line."""
        now = self.clock()
        if p.phase == "setup" and self.planned is None and isinstance(p.message, PlanLine):
            self.planned = p.message.steps
        elif p.phase == "setup" and isinstance(p.message, BuildOrder):
            self.order = p.message
        elif p.phase == "timing":
            if self.timing_started is None:
                self.timing_started = self.step_started = now
            if p.done == 0:  # the warm-ups start or end; after rounds, the rounds start again (a variant failed)
                self.rounds_from, self.rounds = now, []
            if self.last is None or p.done != self.last.done or self.last.phase != "timing":
                self.step_started = now
                if p.done > len(self.rounds):  # rounds not reported one by one share the time since the last
                    last, missing = (self.rounds or [self._rounds_from()])[-1], p.done - len(self.rounds)
                    self.rounds += [last + (now - last) * (i + 1) / missing for i in range(missing)]
            self.last = p
        elif p.phase in VARIANT_PHASES and p.variant is not None and p.total > 0:
            if self.last is None:  # the variants' time starts with the first of them, not with the set-up before
                self.started = now
            if self.last is None or p.done != self.last.done:
                if p.done > len(self.variant_s):  # `p` says its variant finished
                    self.variant_s[p.variant] = now - self.step_started
                    self.variants_time = now - self.started
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
                paced = self._paced_timing(now - self.timing_started)
                if paced is not None:
                    return f"timing: {p.total} rounds after the warm-up; {self._left(paced)}"
                return (f"timing: {p.total} rounds after the warm-up, {duration_words(now - self.timing_started)} "
                        "in; an estimate after the first round")
            left = self._round_s(p.done) * (p.total - p.done) - running
            return f"timing: round {p.done} of {p.total}; {self._left(left)}"
        if p.done <= 0:
            return (f"variant 1 of {p.total}: {duration_words(now - self.started)} so far; an estimate once it is "
                    "built, measured and traced")
        paced = self._paced_study()
        if paced is not None:
            return f"{p.done} of {p.total} variants done; {self._left(paced - running)} for the study"
        if p.done >= p.total:
            return f"{p.done} of {p.total} variants done; the timing rounds next"
        if self.order is not None:
            return self._by_backend(p, running)
        per_variant = (self.step_started - self.started) / p.done
        left = per_variant * (p.total - p.done) - running
        return f"{p.done} of {p.total} variants done; {self._left(left)} for the rest, then the timing rounds"

    def _by_backend(self, p: Progress, running: float) -> str:
        """The variants to go, each timed as the finished variants of its backend took on average; while a variant
        to go has no finished variant of its backend, no figure and the backend it waits for."""
        assert self.order is not None
        took: dict[str, list[float]] = {}
        for name, seconds in self.variant_s.items():
            took.setdefault(self.order.backends.get(name, ""), []).append(seconds)
        to_go = [backend for name, backend in self.order.backends.items() if name not in self.variant_s]
        waiting = [backend for backend in to_go if backend not in took]
        if waiting:
            return f"{p.done} of {p.total} variants done; the time left once one {waiting[0]} variant has been built"
        left = sum(statistics.fmean(took[backend]) for backend in to_go) - running
        return f"{p.done} of {p.total} variants done; {self._left(left)} for the rest, then the timing rounds"

    def _pace(self) -> float | None:
        """The study's pace against its plan: the measured time of the finished variants plus the plan's seconds for
        the steps to go, over the plan's seconds for both; None without a plan and a finished variant.

        The plan's own figure weighs as much as the steps it has yet to time: a variant's ratio to its plan is mostly
        the plan's error for that kind of variant (its fixed seconds), not the load, so the first variant moves the
        estimate by its share of the study (this pace against the pace of the variants done alone, replayed from
        studies' logs: docs/evidence.md ("Grounds of rules in the code"))."""
        if self.planned is None or not self.variant_s:
            return None
        expected = sum(self.planned.variants.get(name, 0.0) for name in self.variant_s)
        ahead = self._planned_to_go()
        if expected + ahead <= 0 or self.variants_time <= 0:
            return None
        return (self.variants_time + ahead) / (expected + ahead)

    def _planned_to_go(self) -> float:
        """The plan's seconds for the variants not finished and the timing rounds."""
        assert self.planned is not None
        to_go = [seconds for name, seconds in self.planned.variants.items() if name not in self.variant_s]
        return sum(to_go) + self.planned.timing

    def _paced_study(self) -> float | None:
        """The plan's seconds for the variants to go and the timing rounds, at the study's pace (`_pace`)."""
        pace = self._pace()
        if pace is None:
            return None
        return pace * self._planned_to_go()

    def _paced_timing(self, elapsed: float) -> float | None:
        """Before the first round has finished: the plan's timing seconds at the variants' pace, less `elapsed`."""
        pace = self._pace()
        return pace * self.planned.timing - elapsed if pace is not None and self.planned is not None else None

    def _rounds_from(self) -> float:
        """When the first round started, as far as the reports tell (`rounds_from`, else the timing's start)."""
        start = self.rounds_from if self.rounds_from is not None else self.timing_started
        assert start is not None
        return start

    def _round_s(self, done: int) -> float:
        """Seconds per round to go: the median of the last `RECENT_ROUNDS` rounds after the first (which holds the
        warm-ups where the study does not report their end); after the first round alone, its time."""
        ends = [self._rounds_from(), *self.rounds[:done]]
        durations = [b - a for a, b in itertools.pairwise(ends)]
        return statistics.median(durations[1:][-RECENT_ROUNDS:] or durations[:1])

    @staticmethod
    def _left(seconds: float) -> str:
        """`about N s left`; past the estimate, none left and that this step takes longer than the ones before."""
        return f"about {duration_words(seconds)} left" + ("" if seconds >= 0 else " (this step runs longer)")
