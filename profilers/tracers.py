"""Kernel tracers behind one interface, by name: cupti, torch (torch.profiler), none.

A tracer records what `calls` eager inferences launched, with the layer ranges that the engine
opens of the tracer's `range_kind`; attribution is the same pure algorithm for every tracer
(`profilers.attribution`). A new tracer is one registered class.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import ClassVar

from profilers.attribution import TraceRecords
from sessions.documents.errors import InputError

Step = Callable[[], None]


class Tracer(ABC):
    """A way to record kernels. A subclass sets `name`, `range_kind` and `devices`, implements `trace` and `describe`,
    and is made available with `register_tracer`."""

    name: ClassVar[str]
    range_kind: ClassVar[str | None]  # the layer ranges it sees (nvtx | annotation); None: traces nothing
    devices: ClassVar[frozenset[str]] = frozenset({"cuda", "cpu"})

    def prepare(self) -> str | None:
        """Set-up needed before CUDA libraries load; returns why the tracer cannot work, or None."""
        return None

    @abstractmethod
    def trace(self, run_once: Step, calls: int, device: str, synchronize: Step) -> TraceRecords:
        """Record what `calls` eager inferences launch.

        Args:
            run_once: one eager inference; the engine opens its layer ranges of `range_kind` around each layer.
            calls: how many times to call `run_once` while recording (at least 1).
            device: the study's device (one of `devices`).
            synchronize: waits until the device has finished what was launched.

        Returns:
            The kernels (or ops), ranges and launches recorded, for `profilers.attribution`.

        Raises:
            MissingEnvironment: the tracer's library cannot record here (one line, with the fix).
        """

    def timing_words(self) -> str:
        """What tracing leaves in the process the timing rounds then run in, in the timing method's words (added to
        `profilers.timing.describe`'s); "" where it leaves nothing that could move a row."""
        return ""

    @abstractmethod
    def describe(self, calls: int) -> str:
        """How kernels were recorded and attributed, for the session's method."""


class CuptiTracer(Tracer):
    name = "cupti"
    range_kind = "nvtx"
    devices = frozenset({"cuda"})

    def prepare(self) -> str | None:
        from profilers.kernel_trace import prepare_nvtx_injection

        return prepare_nvtx_injection()

    def trace(self, run_once: Step, calls: int, device: str, synchronize: Step) -> TraceRecords:
        from profilers import kernel_trace

        return kernel_trace.trace(run_once, calls, synchronize)

    def timing_words(self) -> str:
        from profilers import kernel_trace

        if not kernel_trace.DETACH_AFTER_TRACE:
            return "CUPTI, which traced each variant's eager calls before the rounds, kept attached through them"
        return ("CUPTI, which traced each variant's eager calls before the rounds, detached from the process after "
                "each trace (attached, it slowed CUDA-graph replays; a trace's note says where it stayed)")

    def describe(self, calls: int) -> str:
        return (
            "cupti-python activity records (kernels, NVTX markers, runtime and driver launches), each kernel "
            f"attributed to the innermost NVTX range open on its launching thread at launch; {calls} eager "
            "call(s) traced, separately from the timed (graph) runs"
        )


class TorchProfilerTracer(Tracer):
    name = "torch"
    range_kind = "annotation"

    def trace(self, run_once: Step, calls: int, device: str, synchronize: Step) -> TraceRecords:
        from profilers import torch_trace

        return torch_trace.trace(run_once, calls, device)

    def describe(self, calls: int) -> str:
        return (
            "torch.profiler trace, each record attributed to the innermost record_function range open on its "
            f"launching thread at launch; {calls} eager call(s) traced, separately from the timed (graph) runs"
        )


class NoTracer(Tracer):
    name = "none"
    range_kind = None

    def trace(self, run_once: Step, calls: int, device: str, synchronize: Step) -> TraceRecords:
        raise NotImplementedError("the none tracer traces nothing")

    def describe(self, calls: int) -> str:
        return "not traced (--tracer none)"


_tracers: dict[str, type[Tracer]] = {}


def register_tracer(cls: type[Tracer]) -> type[Tracer]:
    _tracers[cls.name] = cls
    return cls


for _builtin in (CuptiTracer, TorchProfilerTracer, NoTracer):
    register_tracer(_builtin)


def tracer_names() -> list[str]:
    return list(_tracers)


def get_tracer(name: str) -> Tracer:
    if name not in _tracers:
        raise InputError(f"unknown tracer {name!r}; known: {', '.join(_tracers)}")
    return _tracers[name]()
