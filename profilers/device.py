"""The device a study runs on, as one object: what code that builds, runs or measures asks instead of testing the
device's name.

`study_device(name)` turns a plan's device (`cuda`, `cpu`) into its object, and no other module of `builders/`,
`profilers/` or `inspector/` compares a device name (`tests/test_architecture.py`). What the object answers: `gpu`
(kernels run on a CUDA GPU: CUDA events, CUDA graphs, PyTorch's caching allocator, NVML), `synchronize()` (wait for
the work queued on it), `settle()` (the GPU state the rows are timed in), `capability()` (a GPU's compute
capability), `words` (how a sentence names it) and `timer` (where a latency sample is read). Sessions keep the
name as it was recorded (`Study.device`, `Variant.device`).
"""

from __future__ import annotations

from dataclasses import dataclass

from sessions.documents.errors import InputError
from sessions.documents.vocab import Device, Timer


@dataclass(frozen=True)
class StudyDevice:
    name: Device
    gpu: bool  # a CUDA GPU: events, graphs, the caching allocator; else the host
    words: str  # in a sentence: "PyTorch on CUDA", "runs on the CPU"
    timer: Timer  # what a latency sample is read from (profilers.timing)

    def synchronize(self) -> None:
        """Return once the work queued on this device has run (nothing to wait for on the host)."""
        if self.gpu:
            import torch

            torch.cuda.synchronize()

    def settle(self) -> str | None:
        """On a GPU: another process's CUDA context made and ended beside this process's, once every graph to be
        timed is made, so every row is timed in one GPU state whatever the builds did (`profilers.gpu_contexts`);
        what happened, in words. None on the host."""
        if not self.gpu:
            return None
        import torch

        from profilers.gpu_contexts import settle_gpu
        from sessions.documents.vocab import GPU_STATE_NOT_SETTLED

        try:
            torch.cuda.synchronize()
            index = torch.cuda.current_device()
        except Exception as exc:  # noqa: BLE001  (no driver answering: the rows are timed as found, and say so)
            return f"{GPU_STATE_NOT_SETTLED}CUDA did not answer ({type(exc).__name__})"
        return settle_gpu(index)

    def capability(self) -> tuple[int, int] | None:
        """The GPU's compute capability (major, minor); None on the host."""
        if not self.gpu:
            return None
        import torch

        major, minor = torch.cuda.get_device_capability()
        return major, minor


CUDA = StudyDevice("cuda", gpu=True, words="CUDA", timer="cuda-events")
CPU = StudyDevice("cpu", gpu=False, words="the CPU", timer="perf_counter")
DEVICES = {device.name: device for device in (CUDA, CPU)}


def study_device(name: str) -> StudyDevice:
    """The device object of a plan's device name; one line for a name no study runs on."""
    if name not in DEVICES:
        raise InputError(f"unknown device {name!r}; use {' or '.join(DEVICES)}")
    return DEVICES[name]


def device_for(gpu: bool) -> StudyDevice:
    """The GPU where `gpu`, else the host."""
    return CUDA if gpu else CPU
