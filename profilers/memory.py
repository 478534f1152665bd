"""The device memory of running one variant, as PyTorch's caching allocator counts it (CUDA only).

`peak_bytes` is the contract every session's `Variant.peak_memory_bytes` holds: the peak of the bytes
allocated through PyTorch's caching allocator during one eager inference on the study's static input,
counted from what was allocated before the variant was built. So it holds what the build left allocated
for the variant (weights, buffers, static inputs and outputs, workspaces made with `torch.empty`, a
captured CUDA graph's live tensors) plus the activations and workspaces of the forward pass; it leaves
out the other variants, which are resident too (the timing rounds interleave them), and memory that a
library allocates itself: TensorRT's engine and activation memory, the internal buffers of cuDNN and
cuBLAS handles. cuDNN workspaces that PyTorch's own convolutions request go through the allocator and
count. One eager inference, not the timed ones: a CUDA-graph replay allocates nothing, and the timed rounds
mix every variant. On the CPU nothing is recorded (None): the process's resident size is shared by every
variant and never falls, so no honest per-variant figure is cheap there.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from profilers.device import study_device


class CudaAllocatorStats(Protocol):
    """The part of `torch.cuda` read here."""

    def synchronize(self) -> None: ...

    def memory_allocated(self) -> int: ...

    def reset_peak_memory_stats(self) -> None: ...

    def max_memory_allocated(self) -> int: ...


class DeviceMemory:
    """Marks what is allocated before a variant's build, then measures the peak of one inference from there."""

    def __init__(self, cuda: CudaAllocatorStats) -> None:
        self.cuda = cuda
        self.before = 0

    def mark(self) -> None:
        """Call before the variant is built: what the other variants and the study hold."""
        self.cuda.synchronize()
        self.before = self.cuda.memory_allocated()

    def peak_bytes(self, run_once: Callable[[], None]) -> int:
        """The peak allocated bytes during `run_once` (one eager inference), counted from the mark (never below 0)."""
        self.cuda.synchronize()
        self.cuda.reset_peak_memory_stats()
        run_once()
        self.cuda.synchronize()
        return max(0, self.cuda.max_memory_allocated() - self.before)


def device_memory(device: str, through_torch: bool) -> DeviceMemory | None:
    """The meter for a variant on `device`; None on the CPU, and where the engine allocates outside PyTorch."""
    if not study_device(device).gpu or not through_torch:
        return None
    import torch

    cuda: Any = torch.cuda
    return DeviceMemory(cuda)
