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


def _evidence(variant: Variant, layer_indices: set[int], top: int = 3) -> dict[int, list[tuple[str, int]]]:
    """The most frequent kernels of each of `layer_indices`, in one pass over the kernel table."""
    table = variant.kernels
    counts: dict[int, Counter[int]] = {i: Counter() for i in layer_indices}
    if counts:
        for (owner, name_id), n in Counter(zip(table.layer, table.name)).items():  # counted in C
            if owner in counts:
                counts[owner][name_id] = n
    return {i: [(table.names[name_id], n) for name_id, n in c.most_common(top)] for i, c in counts.items()}


_MEMO: dict[tuple, tuple[Variant, Variant | None, list[Flag]]] = {}
_MEMO_SIZE = 64


def diagnose(variant: Variant, baseline: Variant | None = None, factor: float = JUMP_FACTOR, minimum: float = JUMP_MIN) -> list[Flag]:
    """Flags for `variant`; with a baseline (fp16, or the same variant of an older session) also jumps.

    Remembered for the same variant objects while their layers and kernel table stay the same ones (the TUI asks
    for a 50,000-layer session's flags on every screen); callers must not change the list returned.
    """
    key = (id(variant), id(baseline), factor, minimum, len(variant.layers), id(variant.kernels),
           len(variant.kernels) if variant.kernels is not None else -1)
    held = _MEMO.get(key)
    if held is not None and held[0] is variant and held[1] is baseline:
        return held[2]
    flags = _diagnose(variant, baseline, factor, minimum)
    if len(_MEMO) >= _MEMO_SIZE:
        _MEMO.clear()
    _MEMO[key] = (variant, baseline, flags)
    return flags


def _diagnose(variant: Variant, baseline: Variant | None, factor: float, minimum: float) -> list[Flag]:
    per_layer = kernels_per_layer(variant)
    if per_layer is None:
        return []
    base_counts: dict[str, float] = {}
    if baseline is not None and baseline is not variant:
        base_per_layer = kernels_per_layer(baseline)
        if base_per_layer is not None:
            base_counts = {layer.name: n for layer, n in zip(baseline.layers, base_per_layer)}
    found: list[tuple[int, str, float | None]] = []
    for i, (layer, count) in enumerate(zip(variant.layers, per_layer)):
        base = base_counts.get(layer.name)
        if layer.groups and layer.groups > 1 and count >= layer.groups:
            found.append((i, "per-group split", base))
        elif base is not None and count >= factor * base and count - base >= minimum:
            found.append((i, "kernel jump", base))
    evidence = _evidence(variant, {i for i, _, _ in found})
    return [Flag(variant.name, variant.layers[i].name, reason, per_layer[i], variant.layers[i].groups, base, evidence[i])
            for i, reason, base in found]
