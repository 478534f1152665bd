"""Lowering diagnosis: layers whose kernel count shows a convolution split per group, or a jump.

TensorRT (and cuDNN under PyTorch) may lower a grouped convolution into one kernel per group; an
FP8 build may add a concat kernel per group on top. Both show as a layer whose kernels per call
reach its group count, or grow far past the same layer in the fp16 variant.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from sessions.groups import kernels_per_layer
from sessions.model import Variant

JUMP_FACTOR = 2.0  # kernels per call at least this many times the baseline's ...
JUMP_MIN = 8.0  # ... and at least this many more


@dataclass
class Flag:
    variant: str
    layer: str
    reason: str  # per-group split | kernel jump
    kernels_per_call: float
    groups: int | None
    baseline_kernels_per_call: float | None
    evidence: list[tuple[str, int]]  # (kernel name, count) most frequent first


def _evidence(variant: Variant, layer_index: int, top: int = 3) -> list[tuple[str, int]]:
    table = variant.kernels
    counts = Counter(table.name[i] for i, owner in enumerate(table.layer) if owner == layer_index)
    return [(table.names[name_id], n) for name_id, n in counts.most_common(top)]


def diagnose(variant: Variant, baseline: Variant | None = None, factor: float = JUMP_FACTOR, minimum: float = JUMP_MIN) -> list[Flag]:
    """Flags for `variant`; with a baseline (fp16, or the same variant of an older session) also jumps."""
    per_layer = kernels_per_layer(variant)
    if per_layer is None:
        return []
    base_counts: dict[str, float] = {}
    if baseline is not None and baseline is not variant:
        base_per_layer = kernels_per_layer(baseline)
        if base_per_layer is not None:
            base_counts = {layer.name: n for layer, n in zip(baseline.layers, base_per_layer)}
    flags = []
    for i, (layer, count) in enumerate(zip(variant.layers, per_layer)):
        base = base_counts.get(layer.name)
        reason = None
        if layer.groups and layer.groups > 1 and count >= layer.groups:
            reason = "per-group split"
        elif base is not None and count >= factor * base and count - base >= minimum:
            reason = "kernel jump"
        if reason:
            flags.append(Flag(variant.name, layer.name, reason, count, layer.groups, base, _evidence(variant, i)))
    return flags
