"""The CUDA-event timing the GPU benchmarks share: a call captured in a CUDA graph as the engine runs its steps
(`captured`), back-to-back calls timed between two CUDA events (`mean_ms`), and the longest kernels of one call named
by torch.profiler (`longest_kernels`)."""

from __future__ import annotations

from collections.abc import Callable

import torch


def captured(fn: Callable[[], object]) -> Callable[[], None]:
    """`fn` captured in a CUDA graph after three warm-up calls on a side stream; the graph's replay."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return graph.replay


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
