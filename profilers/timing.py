"""Latency: interleaved rounds over all variants, warm-up by time, one sample per inference or per few.

On CUDA each sample is the time between two CUDA events recorded on the inference stream around
back-to-back inferences (CUDA-graph replays where capture worked), divided by their count: device work only, no
host-device copies, the same static input every time. A sample spans at least `SAMPLE_MIN_MS` of inferences (one
inference where one lasts that long, at most `MAX_INFERENCES_PER_SAMPLE`): the mean of a few back-to-back
inferences narrows the GPU's own jitter from one inference to the next as a long model's length does (the count per
variant is stored with its latency; the measurements behind the rule: docs/method.md). On the CPU the same loop
reads a monotonic clock, one forward pass per sample.
Rounds interleave the variants, alternating their order (A B C, then C B A, `round_order`), so that drift in clocks or
temperature spreads over all of them instead of favouring whichever ran first (a drift linear in time falls alike on
every variant over each pair of rounds; with an odd count of rounds the last is unpaired). At each variant's turn in a
round, `TimingPlan.switch_warmup` samples' worth of inferences are run and discarded before its samples
(`discard_inferences`): after a switch of variant the first inferences run cold (caches and the graph just came from
another variant), and counted in samples the discard lasts as long for a short model as for a long one (what that
rests on: docs/evidence.md ("Why the timing defaults are what they are")); on a GPU it lasts at least `DISCARD_MIN_MS`
at every turn: the speed a GPU runs a variant at lags behind a switch, and behind the pause in which the round before
is reported, so a round that opens on the variant the round before closed on gets the same floor (what a shorter
discard there did: docs/evidence.md). The warm-ups all run before the first round, so each variant's first samples,
too, follow a discard of back-to-back inferences (a warm-up synchronises after every inference: docs/method.md,
"Latency"). The study's first turn follows seconds in which the GPU ran only such single inferences, and an idle GPU
runs slow for up to about 400 ms of work: that turn discards at least `FIRST_TURN_MIN_MS`.
Python's cyclic garbage collector is held off while the rounds run, as `timeit` holds it off (process-wide: every
thread's): a full pass over a study's objects stalls the host for milliseconds, which on the CPU lands in a sample and
on a GPU can let the queue of inferences run dry (a gap the events then time). Between rounds, after `on_round`, the
young generations are collected (milliseconds, outside every sample), so a live display's garbage does not pile up.
"""

from __future__ import annotations

import gc
import math
import statistics
import time
from collections.abc import Callable
from typing import Protocol

from profilers.device import study_device
from sessions.documents.plan import TimingPlan

Step = Callable[[], None]

SAMPLE_MIN_MS = 4.0  # on a GPU, one sample spans back-to-back inferences lasting at least this long together
MAX_INFERENCES_PER_SAMPLE = 16  # ... and at most this many of them
SIZING_INFERENCES = 5  # single inferences timed after the warm-up to choose how many one sample spans
DISCARD_MIN_MS = 250.0  # on a GPU, the inferences discarded at a variant's turn last at least this long ...
MAX_DISCARD_INFERENCES = 10_000  # ... in at most this many (launching a far shorter step takes the host longer)
FIRST_TURN_MIN_MS = 1000.0  # ... and at the first round's first turn (after seconds of a GPU all but idle) this long
# (both floors in at most MAX_DISCARD_INFERENCES: this one is shorter for an inference under 0.1 ms)


class Clock(Protocol):
    """Where samples are read: the host's monotonic clock, or CUDA events on the inference stream."""

    def synchronize(self) -> None: ...

    def samples(self, step: Step, iters: int, per_sample: int = 1) -> list[float]:
        """`iters` samples in ms, each the mean of `per_sample` back-to-back runs of `step`."""
        ...

    def inference_ms(self, step: Step) -> float | None:
        """One warm run of `step` in ms as this clock reads the GPU, or None where this clock times one forward pass
        a sample and sizes nothing (the host's clock: its forward passes last milliseconds and their spread is the
        host's, not a GPU's)."""
        ...


class HostClock:
    def synchronize(self) -> None:
        pass

    def samples(self, step: Step, iters: int, per_sample: int = 1) -> list[float]:
        samples = []
        for _ in range(iters):
            t0 = time.perf_counter()
            for _ in range(per_sample):
                step()
            samples.append((time.perf_counter() - t0) * 1e3 / per_sample)
        return samples

    def inference_ms(self, step: Step) -> float | None:
        return None


class Event(Protocol):
    def record(self) -> None: ...

    def synchronize(self) -> None: ...

    def elapsed_time(self, end: Event) -> float: ...


class EventClock:
    """Samples between events recorded back to back on the inference stream (CUDA events on a GPU)."""

    def __init__(self, new_event: Callable[[], Event], synchronize: Callable[[], None]) -> None:
        self.new_event, self.synchronize = new_event, synchronize

    def samples(self, step: Step, iters: int, per_sample: int = 1) -> list[float]:
        events = [self.new_event() for _ in range(iters + 1)]
        events[0].record()
        for i in range(iters):
            for _ in range(per_sample):
                step()
            events[i + 1].record()
        events[-1].synchronize()
        return [events[i].elapsed_time(events[i + 1]) / per_sample for i in range(iters)]

    def inference_ms(self, step: Step) -> float | None:
        """The median of `SIZING_INFERENCES` single runs of `step`."""
        return statistics.median(self.samples(step, SIZING_INFERENCES))


def inferences_per_sample(single_ms: float | None) -> int:
    """How many back-to-back inferences of `single_ms` (`Clock.inference_ms`) one sample spans: enough to last at
    least `SAMPLE_MIN_MS`, at least one, at most `MAX_INFERENCES_PER_SAMPLE`; one where the clock sizes nothing."""
    if single_ms is None:
        return 1
    if single_ms <= 0:
        return MAX_INFERENCES_PER_SAMPLE
    return max(1, min(MAX_INFERENCES_PER_SAMPLE, math.ceil(SAMPLE_MIN_MS / single_ms)))


def round_order(names: list[str], round_index: int) -> list[str]:
    """The variants in the order round `round_index` (from 0) times them: as given in even rounds, reversed in odd
    ones (A B C, C B A, A B C, ...)."""
    return list(names) if round_index % 2 == 0 else list(reversed(names))


def discard_inferences(
    samples_worth: int, per_sample: int, single_ms: float | None, floor_ms: float = DISCARD_MIN_MS
) -> int:
    """How many inferences of `single_ms` are run and dropped at a variant's turn in a round, before its samples:
    `samples_worth` samples' worth (`per_sample` each) and, where that is more than none and the clock sized the
    inference, enough to last `floor_ms` (at most `MAX_DISCARD_INFERENCES` for that). On an H100 a variant ran at
    the speed the variant before had left the GPU in for a while after a switch, then stepped to its own speed; the
    floor is past most of those lags but not the longest (the lags and what the floor left: docs/evidence.md ("Why
    the timing defaults are what they are")). A GPU left idle ran a short model slower for over 100 ms after it, too,
    and a round opens after a pause (the round before is reported), so the floor holds at every turn. `floor_ms` is
    `DISCARD_MIN_MS` but at the study's first turn, which follows seconds in which the GPU ran little but the
    warm-ups' single synchronised inferences: there an H100 ran short models slow for up to about 400 ms of work, and
    `FIRST_TURN_MIN_MS` is past that (benchmarks/results/h100/first-turn-floor/README.md)."""
    counted = samples_worth * per_sample
    if counted == 0 or single_ms is None or single_ms <= 0:
        return counted
    return max(counted, min(MAX_DISCARD_INFERENCES, math.ceil(floor_ms / single_ms)))


def clock_for(device: str) -> Clock:
    """Where the samples of a study on `device` are read: CUDA events on a GPU, else the host's clock."""
    if not study_device(device).gpu:
        return HostClock()
    import torch

    return EventClock(lambda: torch.cuda.Event(enable_timing=True), torch.cuda.synchronize)


def _warm(step: Step, seconds: float, clock: Clock) -> None:
    deadline = time.perf_counter() + seconds
    step()
    clock.synchronize()
    while time.perf_counter() < deadline:
        step()
        clock.synchronize()


def _discard(step: Step, count: int) -> None:
    """Run and drop `count` inferences. No synchronisation after them: the timer's first event then
    queues behind them, so the first sample starts with the GPU busy instead of idle, and holds no
    launch gap (what a drained stream did to a round's first sample: docs/evidence.md ("Why the timing defaults are
    what they are"))."""
    for _ in range(count):
        step()


def measure(
    steps: dict[str, Step],
    plan: TimingPlan,
    clock: Clock,
    on_round: Callable[[int, dict[str, list[float]]], None] | None = None,
    on_sized: Callable[[dict[str, int]], None] | None = None,
) -> dict[str, list[float]]:
    """Samples in milliseconds per inference, per variant (each the mean of the inferences one sample spans:
    `inferences_per_sample`, chosen per variant after its warm-up and given to `on_sized` before the rounds);
    `on_round` sees the samples so far after every round. The garbage collector is off, in every thread, from the
    warm-ups to the last round (back as it was after); the young generations are collected after each round."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _measured(steps, plan, clock, on_round, on_sized)
    finally:
        if was_enabled:
            gc.enable()


def _measured(
    steps: dict[str, Step],
    plan: TimingPlan,
    clock: Clock,
    on_round: Callable[[int, dict[str, list[float]]], None] | None,
    on_sized: Callable[[dict[str, int]], None] | None,
) -> dict[str, list[float]]:
    per_sample: dict[str, int] = {}
    discards: dict[str, int] = {}
    first_turn: dict[str, int] = {}  # the study's first turn: the first round's first variant, where there is one
    names = list(steps)
    for name in names:
        _warm(steps[name], plan.warmup_s, clock)
        single_ms = clock.inference_ms(steps[name])
        per_sample[name] = inferences_per_sample(single_ms)
        discards[name] = discard_inferences(plan.switch_warmup, per_sample[name], single_ms)
        if not first_turn:
            first_turn[name] = discard_inferences(plan.switch_warmup, per_sample[name], single_ms, FIRST_TURN_MIN_MS)
    if on_sized is not None:
        on_sized(per_sample)
    samples: dict[str, list[float]] = {name: [] for name in steps}
    for round_index in range(plan.rounds):
        for turn, name in enumerate(round_order(names, round_index)):
            _discard(steps[name], first_turn[name] if round_index == turn == 0 else discards[name])
            samples[name].extend(clock.samples(steps[name], plan.iters, per_sample[name]))
        if on_round is not None:
            on_round(round_index, samples)
        gc.collect(1)
    return samples


def _discard_floor(plan: TimingPlan) -> str:
    """The GPU discard's floor in the method's words; nothing where no discard is asked."""
    if not plan.switch_warmup:
        return ""
    return f", lasting at least {DISCARD_MIN_MS:g} ms (the first round's first turn at least {FIRST_TURN_MIN_MS:g} ms)"


ROUND_ORDER_WORDS = " in alternating order (A B C, then C B A)"  # `round_order` in a method's words


def describe(device: str, cuda_graph: bool, plan: TimingPlan, tracing: str = "") -> str:
    """The timed region of a study on `device` in the method's words; `tracing`: what the tracer left in the process
    the rounds run in (`Tracer.timing_words`), added at the end where there is any."""
    return _timed_region(device, cuda_graph, plan) + (f"; {tracing}" if tracing else "")


def _timed_region(device: str, cuda_graph: bool, plan: TimingPlan) -> str:
    if study_device(device).gpu:
        what = "CUDA-graph replays" if cuda_graph else "eager forward passes"
        return (
            f"GPU time between two CUDA events recorded on the inference stream around back-to-back {what}, "
            f"divided by their count: a sample spans at least {SAMPLE_MIN_MS:g} ms of inferences (1 to "
            f"{MAX_INFERENCES_PER_SAMPLE}; each variant's count is stored with its latency), so its percentiles are "
            "of such means; events recorded back to back, so a sample also holds any launch gap; no host-device "
            f"copies; static input; {plan.warmup_s:g} s warm-up per variant discarded; {plan.rounds} interleaved "
            f"rounds{ROUND_ORDER_WORDS} of {plan.iters} samples per variant, each after discarding the inferences of "
            f"{plan.switch_warmup} sample(s){_discard_floor(plan)}; Python's garbage collector off during warm-ups and "
            "rounds; GPU clocks as found (recorded, not locked); once every graph is made, before the rounds, another "
            "process makes and ends a CUDA context on the GPU (until one did, a graph's replays ran about 10 % slower "
            "on the H200: profilers/gpu_contexts.py; the environment's CUDA-graph state says whether it did)"
        )
    return (
        "host wall time (time.perf_counter) around one forward pass under torch.no_grad(); static input; "
        f"{plan.warmup_s:g} s warm-up per variant discarded; {plan.rounds} interleaved rounds{ROUND_ORDER_WORDS} of "
        f"{plan.iters} inferences per variant, each after {plan.switch_warmup} discarded inferences; Python's "
        "garbage collector off during warm-ups and rounds"
    )
