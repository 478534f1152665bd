"""Latency: interleaved rounds over all variants, warm-up by time, one sample per inference.

On CUDA each sample is the time between two CUDA events recorded on the inference stream around
one inference (a CUDA-graph replay where capture worked): device work only, no host-device copies,
the same static input every time. On the CPU the same loop reads a monotonic clock.
Rounds interleave the variants (A B C A B C ...) so that drift in clocks or temperature spreads
over all of them instead of favouring whichever ran first. After each switch of variant the first
inferences run cold (caches and the graph just came from another variant), so
`TimingPlan.switch_warmup` inferences are run and discarded before the round's samples.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol

from sessions.documents.plan import TimingPlan

Step = Callable[[], None]


class Clock(Protocol):
    """Where samples are read: the host's monotonic clock, or CUDA events on the inference stream."""

    def synchronize(self) -> None: ...

    def samples(self, step: Step, iters: int) -> list[float]: ...


class HostClock:
    def synchronize(self) -> None:
        pass

    def samples(self, step: Step, iters: int) -> list[float]:
        samples = []
        for _ in range(iters):
            t0 = time.perf_counter()
            step()
            samples.append((time.perf_counter() - t0) * 1e3)
        return samples


class Event(Protocol):
    def record(self) -> None: ...

    def synchronize(self) -> None: ...

    def elapsed_time(self, end: Event) -> float: ...


class EventClock:
    """Samples between events recorded back to back on the inference stream (CUDA events on a GPU)."""

    def __init__(self, new_event: Callable[[], Event], synchronize: Callable[[], None]) -> None:
        self.new_event, self.synchronize = new_event, synchronize

    def samples(self, step: Step, iters: int) -> list[float]:
        events = [self.new_event() for _ in range(iters + 1)]
        events[0].record()
        for i in range(iters):
            step()
            events[i + 1].record()
        events[-1].synchronize()
        return [events[i].elapsed_time(events[i + 1]) for i in range(iters)]


def clock_for(device: str) -> Clock:
    if device != "cuda":
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
    launch gap (a drained stream made every round's first sample 11-33 % slow on the H200:
    benchmarks/results/h200/senet154-b1.json)."""
    for _ in range(count):
        step()


def measure(
    steps: dict[str, Step],
    plan: TimingPlan,
    clock: Clock,
    on_round: Callable[[int, dict[str, list[float]]], None] | None = None,
) -> dict[str, list[float]]:
    """Samples in milliseconds per variant; `on_round` sees the samples so far after every round."""
    for step in steps.values():
        _warm(step, plan.warmup_s, clock)
    samples: dict[str, list[float]] = {name: [] for name in steps}
    for round_index in range(plan.rounds):
        for name, step in steps.items():
            _discard(step, plan.switch_warmup)
            samples[name].extend(clock.samples(step, plan.iters))
        if on_round is not None:
            on_round(round_index, samples)
    return samples


def describe(device: str, cuda_graph: bool, plan: TimingPlan) -> str:
    if device == "cuda":
        what = "one CUDA-graph replay" if cuda_graph else "one eager forward pass"
        return (
            f"GPU time between two CUDA events recorded on the inference stream around {what}; "
            "events recorded back to back, so a sample also holds any launch gap; no host-device copies; "
            f"static input; {plan.warmup_s:g} s warm-up per variant discarded; {plan.rounds} interleaved "
            f"rounds of {plan.iters} inferences per variant, each after {plan.switch_warmup} discarded inferences; "
            "GPU clocks as found (recorded, not locked)"
        )
    return (
        "host wall time (time.perf_counter) around one forward pass under torch.no_grad(); static input; "
        f"{plan.warmup_s:g} s warm-up per variant discarded; {plan.rounds} interleaved rounds of "
        f"{plan.iters} inferences per variant, each after {plan.switch_warmup} discarded inferences"
    )
