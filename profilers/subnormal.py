"""Subnormal values in what a variant computes, sampled: the counts `sessions.analyses.subnormals` judges.

A value below the smallest normal of the dtype a CPU computes it in (torch.finfo(dtype).tiny: 1.18e-38 in fp32, and
for fp16 and bf16, which PyTorch's CPU kernels widen to fp32) is subnormal there; a CPU's arithmetic on such values
runs many times slower (docs/evidence.md ("Grounds of rules in the code")). `Sampler.visit` takes each layer output
of one forward (as the engine's hooks pass them) and the variant's output, and keeps up to SAMPLE values of each,
evenly strided, so the cost stays far below the forward's. Zeros and NaN/Inf are not counted: a ReLU's zeros are
exact and cost nothing.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sessions.documents.model import SubnormalValues

SAMPLE = 4096  # values kept per tensor, evenly strided over it


def _computed_as(dtype: Any) -> Any:
    """The dtype a CPU computes `dtype`'s arithmetic in: fp32 for the 16-bit floats (PyTorch's CPU kernels widen
    them, so an fp16 value below fp16's smallest normal, 6.1e-5, is a normal fp32 value and costs nothing extra)."""
    import torch

    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype


class Sampler:
    """Counts the nonzero finite values of the tensors it visits and those below their dtype's smallest normal."""

    def __init__(self) -> None:
        self.values = self.subnormal = self.tensors = 0
        self.smallest_normal: float | None = None
        self.dtype: str | None = None

    def visit(self, tensor: Any) -> None:
        """Count a floating-point torch tensor or numpy array (any device); anything else is passed over."""
        if isinstance(tensor, np.ndarray):
            if not np.issubdtype(tensor.dtype, np.floating):
                return
            computed = np.float32 if tensor.dtype == np.float16 else tensor.dtype
            flat, tiny, dtype = tensor.reshape(-1), float(np.finfo(computed).tiny), str(np.dtype(computed))
        else:
            import torch

            if not isinstance(tensor, torch.Tensor) or not tensor.is_floating_point():
                return
            flat, tiny = tensor.detach().reshape(-1), float(torch.finfo(_computed_as(tensor.dtype)).tiny)
            dtype = str(_computed_as(tensor.dtype)).removeprefix("torch.")
        sample = flat[::max(1, flat.shape[0] // SAMPLE)]
        if not isinstance(sample, np.ndarray):
            # float64 holds every float dtype exactly (numpy has no bf16; float32 would zero a float64 subnormal)
            sample = sample.double().cpu().numpy()
        magnitude = np.abs(sample.astype(np.float64))
        counted = (magnitude > 0) & np.isfinite(magnitude)
        self.values += int(counted.sum())
        self.subnormal += int((counted & (magnitude < tiny)).sum())
        self.tensors += 1
        if self.smallest_normal is None or tiny < self.smallest_normal:
            self.smallest_normal, self.dtype = tiny, dtype

    def result(self) -> SubnormalValues | None:
        """What was counted; None where no tensor was visited."""
        if not self.tensors or self.smallest_normal is None or self.dtype is None:
            return None
        return SubnormalValues(self.values, self.subnormal, self.tensors, self.smallest_normal, self.dtype)
