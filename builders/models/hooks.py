"""One forward of a model while hooks record what it sees: the hooks are removed after it, whatever happens."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch.utils.hooks import RemovableHandle


def forward_once(model: torch.nn.Module, example: Any, handles: Sequence[RemovableHandle]) -> None:
    """Run `model` on `example` once without gradients, then remove every hook in `handles` (also where the forward
    raises, so a failed run leaves the model as it was)."""
    try:
        with torch.no_grad():
            model(example)
    finally:
        for handle in handles:
            handle.remove()
