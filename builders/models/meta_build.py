"""Building a model on the meta device: its modules, parameters and buffers with shapes and dtypes, no values.

Under `torch.device("meta")` a model's constructor still runs its initialisation, and PyTorch computes random
fills of meta tensors through its Python references (`torch._refs`), and a forward pass runs batch normalisation
through its Python decomposition, slow for a large model (docs/evidence.md ("Grounds of rules in the code")).
Values do not exist there, so `meta_device` skips the in-place value ops (fills, random fills and the arithmetic
that initialisers apply in place) on meta tensors and gives batch normalisation's result as an empty tensor shaped
like its input; ops that change a tensor's shape or strides still run.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

VALUE_OPS = frozenset({
    "normal_", "uniform_", "fill_", "zero_", "random_", "exponential_", "bernoulli_", "log_normal_", "cauchy_",
    "geometric_", "erfinv_", "mul_", "add_", "sub_", "div_", "clamp_", "clamp_min_", "clamp_max_", "copy_",
})  # in place, and leave the tensor's shape, dtype and strides as they were
LIKE_INPUT_OPS = frozenset({"batch_norm"})  # return a tensor of their input's shape, dtype and strides


class _ShapesOnly(TorchFunctionMode):
    def __torch_function__(self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None) -> Any:
        name = getattr(func, "__name__", "")
        if args and isinstance(args[0], torch.Tensor) and args[0].is_meta:
            if name in VALUE_OPS:
                return args[0]
            if name in LIKE_INPUT_OPS:
                return torch.empty_like(args[0])
        return func(*args, **(kwargs or {}))


@contextmanager
def meta_device() -> Iterator[None]:
    """Tensors made inside are made on the meta device; in-place value ops on meta tensors do nothing, and batch
    normalisation of a meta tensor gives an empty tensor like it."""
    with torch.device("meta"), _ShapesOnly():
        yield
