"""Latency: interleaved rounds over all variants, warm-up by time, one sample per inference.

On CUDA each sample is the time between two CUDA events recorded on the inference stream around
one inference (a CUDA-graph replay where capture worked): device work only, no host-device copies,
the same static input every time. On the CPU the same loop reads a monotonic clock.
Rounds interleave the variants (A B C A B C ...) so that drift in clocks or temperature spreads
over all of them instead of favouring whichever ran first. After each switch of variant the first
inferences run cold (caches and the graph just came from another variant: 15-30 % slow on the H200),
so `TimingPlan.switch_warmup` inferences are run and discarded before the round's samples.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from sessions.plan import TimingPlan

Step = Callable[[], None]


def _warm(step: Step, seconds: float, synchronize: Callable[[], None]) -> None:
    deadline = time.perf_counter() + seconds
    step()
    synchronize()
    while time.perf_counter() < deadline:
        step()
        synchronize()


def _discard(step: Step, count: int, synchronize: Callable[[], None]) -> None:
    for _ in range(count):
        step()
    synchronize()


def _cpu_samples(step: Step, iters: int) -> list[float]:
    samples = []
    for _ in range(iters):
        t0 = time.perf_counter()
        step()
        samples.append((time.perf_counter() - t0) * 1e3)
    return samples


def _cuda_samples(step: Step, iters: int) -> list[float]:
    import torch

    events = [torch.cuda.Event(enable_timing=True) for _ in range(iters + 1)]
    events[0].record()
    for i in range(iters):
        step()
        events[i + 1].record()
    events[-1].synchronize()
    return [events[i].elapsed_time(events[i + 1]) for i in range(iters)]


def measure(
    steps: dict[str, Step],
    plan: TimingPlan,
    device: str,
    on_round: Callable[[int, dict[str, list[float]]], None] | None = None,
) -> dict[str, list[float]]:
    """Samples in milliseconds per variant; `on_round` sees the samples so far after every round."""
    if device == "cuda":
        import torch

        synchronize: Callable[[], None] = torch.cuda.synchronize
        sample = _cuda_samples
    else:
        synchronize = lambda: None
        sample = _cpu_samples
    for step in steps.values():
        _warm(step, plan.warmup_s, synchronize)
    samples: dict[str, list[float]] = {name: [] for name in steps}
    for round_index in range(plan.rounds):
        for name, step in steps.items():
            _discard(step, plan.switch_warmup, synchronize)
            samples[name].extend(sample(step, plan.iters))
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
