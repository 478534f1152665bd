"""One range per PyTorch module, so the tracers can attribute kernels to modules.

Every module gets a range, not only the leaves: kernels launched by a parent's own forward code
(a squeeze-excitation mean, a residual add) then land in the parent instead of outside every range.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

from profilers.attribution import CALL_RANGE_PREFIX, ROOT


def module_name(path: str) -> str:
    return path or ROOT


class _Annotations:
    """record_function ranges, which torch.profiler records as `user_annotation` events."""

    def __init__(self) -> None:
        self._open: list[torch.autograd.profiler.record_function] = []

    def push(self, name: str) -> None:
        r = torch.autograd.profiler.record_function(name)
        r.__enter__()
        self._open.append(r)

    def pop(self) -> None:
        self._open.pop().__exit__(None, None, None)


class _Nvtx:
    """NVTX push/pop ranges, which CUPTI records as marker activities."""

    @staticmethod
    def push(name: str) -> None:
        torch.cuda.nvtx.range_push(name)

    @staticmethod
    def pop() -> None:
        torch.cuda.nvtx.range_pop()


def _marker(kind: str) -> _Annotations | _Nvtx:
    if kind == "nvtx":
        return _Nvtx()
    if kind == "annotation":
        return _Annotations()
    raise ValueError(f"unknown range kind {kind!r}")


@contextlib.contextmanager
def module_ranges(model: torch.nn.Module, kind: str) -> Iterator[None]:
    """While active, each module's forward runs inside a range named by its module path."""
    marker = _marker(kind)
    handles = []
    for path, module in model.named_modules():
        name = module_name(path)

        def pre(_module, _inputs, name=name):  # returning None keeps the module's inputs
            marker.push(name)

        def post(_module, _inputs, _output):
            marker.pop()

        handles.append(module.register_forward_pre_hook(pre))
        handles.append(module.register_forward_hook(post))
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


@contextlib.contextmanager
def named_range(kind: str, name: str) -> Iterator[None]:
    """One range around whatever runs inside, for layers that are not modules (the FP8 probe's)."""
    marker = _marker(kind)
    marker.push(name)
    try:
        yield
    finally:
        marker.pop()


def call_range(kind: str, index: int) -> contextlib.AbstractContextManager[None]:
    """Marks one inference, so traces of several calls can be counted per call."""
    return named_range(kind, f"{CALL_RANGE_PREFIX}{index}")
