"""Where a TensorRT engine's buffers and stream live: a CUDA GPU, or the host for the test stand-in.

TensorRT runs on CUDA only. `HostDevice` exists so that the same backend code runs in CI against
the stand-in in tests/fake_tensorrt, which executes engines on the CPU; nothing else uses it.
"""

from __future__ import annotations

import contextlib
import platform
from collections.abc import Callable, Iterator

import torch

from profilers.device import study_device
from sessions.documents.errors import InspectError, first_line
from sessions.documents.vocab import Device

Enqueue = Callable[[], None]


class CudaDevice:
    """A dedicated stream (TensorRT adds synchronisation on the legacy default stream) and CUDA buffers."""

    name: Device = "cuda"

    def __init__(self) -> None:
        self.stream = torch.cuda.Stream()

    @property
    def stream_handle(self) -> int:
        return self.stream.cuda_stream

    def key(self) -> str:
        """What a timing cache or a plan is only valid for."""
        major, minor = torch.cuda.get_device_capability()
        return f"{torch.cuda.get_device_name()} sm{major}{minor}"

    @contextlib.contextmanager
    def use(self) -> Iterator[None]:
        """PyTorch work (allocations, copies) inside runs on the dedicated stream, ordered with enqueues."""
        with torch.cuda.stream(self.stream):
            yield

    def empty(self, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
        return torch.empty(shape, dtype=dtype, device="cuda")

    def synchronize(self) -> None:
        self.stream.synchronize()

    def capture(self, enqueue: Enqueue) -> tuple[Callable[[], None], str | None]:
        """A replay of `enqueue` captured as a CUDA graph, or an eager step and why capture failed.

        As trtexec does: one enqueue first (TensorRT's lazy set-up must stay out of the graph),
        capture thread-local on the dedicated stream, and never keep a graph whose enqueue failed.
        The replay runs on the timer's stream, which records the events around it.
        """
        enqueue()
        self.synchronize()
        graph = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.graph(graph, stream=self.stream, capture_error_mode="thread_local"):
                enqueue()
        except (RuntimeError, InspectError) as exc:  # torch's capture errors; a failed enqueue
            torch.cuda.synchronize()
            return self.eager(enqueue), f"CUDA graph capture failed, timed eagerly: {first_line(exc)}"
        return graph.replay, None  # the bound method keeps the graph alive as long as the step

    def eager(self, enqueue: Enqueue) -> Callable[[], None]:
        """`enqueue` on the dedicated stream, ordered after and before the timer's events on its stream."""
        timer_stream = torch.cuda.current_stream()

        def run() -> None:
            self.stream.wait_stream(timer_stream)
            enqueue()
            timer_stream.wait_stream(self.stream)

        return run


class HostDevice:
    """CPU buffers and no stream: only the TensorRT stand-in for tests executes engines here."""

    name: Device = "cpu"
    stream_handle = 0

    def key(self) -> str:
        return f"host {platform.machine()}"

    def use(self) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()

    def empty(self, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
        return torch.empty(shape, dtype=dtype)

    def synchronize(self) -> None:
        pass

    def capture(self, enqueue: Enqueue) -> tuple[Callable[[], None], str | None]:
        return enqueue, "no CUDA graph on the host: timed eagerly"

    def eager(self, enqueue: Enqueue) -> Callable[[], None]:
        return enqueue


EngineDevice = CudaDevice | HostDevice


def engine_device(device: str) -> EngineDevice:
    return CudaDevice() if study_device(device).gpu else HostDevice()
