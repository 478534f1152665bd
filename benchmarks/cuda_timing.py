"""The CUDA-event timing the GPU benchmarks share: a call captured in a CUDA graph as the engine runs its steps
(`captured`), back-to-back calls timed between two CUDA events (`mean_ms`), and the longest kernels of one call named
by torch.profiler (`longest_kernels`)."""

from __future__ import annotations

from collections.abc import Callable

import torch

from builders.pytorch.graph_capture import capture_graph


def captured(fn: Callable[[], object]) -> Callable[[], None]:
    """`fn` captured in a CUDA graph as the engines capture their forward (`capture_graph`, its warm-up call on a side
    stream), after two more warm-up calls (three in all, as the committed outputs were made); the graph's replay.
    RuntimeError where capture fails: these benchmarks time graphs only."""
    for _ in range(2):
        fn()
    capture = capture_graph(fn, fn)
    if capture.graph is None:
        raise RuntimeError(capture.step.note)
    return capture.graph.replay


def mean_ms(run: Callable[[], object], calls: int, warmup: int = 5) -> float:
    """Milliseconds per call of `run` over `calls` back-to-back calls between two CUDA events, after `warmup` calls."""
    for _ in range(warmup):
        run()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    for _ in range(calls):
        run()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / calls


def longest_kernels(run: Callable[[], object], count: int) -> list[tuple[float, str]]:
    """The `count` longest kernels of one call of `run`: (microseconds, name), longest first."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        run()
        torch.cuda.synchronize()
    events = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    events.sort(key=lambda e: -e.device_time)
    return [(e.device_time, e.name) for e in events[:count]]
