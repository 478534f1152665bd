"""Lowering diagnosis: layers whose kernel count shows a convolution split per group, or a jump, and FP8 layers
whose kernels cannot compute in FP8.

TensorRT (and cuDNN under PyTorch) may lower a grouped convolution into one kernel per group; an
FP8 build may add a concat kernel per group on top. Both show as a layer whose kernels per call
reach its group count, or grow far past the same layer in the fp16 variant. A layer that ran in FP8 on
kernels built for an architecture without FP8 tensor cores (NVIDIA's libraries name the target, `sm80_...`)
reads FP8 data but multiplies in a wider type: FP8 saves it memory traffic, not math.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from sessions.analyses.groups import kernels_per_layer
from sessions.documents.model import Variant

JUMP_FACTOR = 2.0  # kernels per call at least this many times the baseline's ...
JUMP_MIN = 8.0  # ... and at least this many more
FP8_TENSOR_CORES = (8, 9)  # compute capability from which GPUs have FP8 (e4m3, e5m2) tensor-core instructions
# The target architecture NVIDIA's libraries write into kernel names: sm80_xmma_...,
# cudnn_generated_fort_native_sm90_..., cutlass3x_sm90_..., sm90a_...; a token of its own (not inside a longer word
# or number).
_ARCH_TOKEN = re.compile(r"(?:^|[^a-z0-9])sm_?(\d{2,3})[af]?(?=[^a-z0-9]|$)", re.IGNORECASE)


@dataclass
class Flag:
    variant: str
    layer: str
    reason: str  # per-group split | kernel jump | fp8 on smNN kernels
    kernels_per_call: float
    groups: int | None
    baseline_kernels_per_call: float | None
    evidence: list[tuple[str, int]]  # (kernel name, count) most frequent first


def _evidence(variant: Variant, layer_indices: set[int], top: int = 3) -> dict[int, list[tuple[str, int]]]:
    """The most frequent kernels of each of `layer_indices`, in one pass over the kernel table."""
    table = variant.kernels
    counts: dict[int, Counter[int]] = {i: Counter() for i in layer_indices}
    if counts:
        for (owner, name_id), n in Counter(zip(table.layer, table.name, strict=False)).items():  # counted in C
            if owner in counts:
                counts[owner][name_id] = n
    return {i: [(table.names[name_id], n) for name_id, n in c.most_common(top)] for i, c in counts.items()}


_MEMO: dict[tuple, tuple[Variant, Variant | None, list[Flag]]] = {}
_MEMO_SIZE = 64


def diagnose(variant: Variant, baseline: Variant | None = None, factor: float = JUMP_FACTOR,
             minimum: float = JUMP_MIN) -> list[Flag]:
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
            base_counts = {layer.name: n for layer, n in zip(baseline.layers, base_per_layer, strict=False)}
    found: list[tuple[int, str, float | None]] = []
    below_fp8 = _fp8_layers_below_fp8_arch(variant)
    for i, (layer, count) in enumerate(zip(variant.layers, per_layer, strict=False)):
        base = base_counts.get(layer.name)
        if layer.groups and layer.groups > 1 and count >= layer.groups:
            found.append((i, "per-group split", base))
        elif base is not None and count >= factor * base and count - base >= minimum:
            found.append((i, "kernel jump", base))
        elif i in below_fp8:
            found.append((i, f"fp8 on sm{below_fp8[i][0]}{below_fp8[i][1]} kernels", base))
    evidence = _evidence(variant, {i for i, _, _ in found})
    return [Flag(variant.name, variant.layers[i].name, reason, per_layer[i], variant.layers[i].groups, base,
                 evidence[i])
            for i, reason, base in found]


def kernel_arch(name: str) -> tuple[int, int] | None:
    """The compute capability a kernel was built for, from the `smNN` token in its name; None without one."""
    found = _ARCH_TOKEN.search(name)
    return divmod(int(found.group(1)), 10) if found else None


def _fp8_layers_below_fp8_arch(variant: Variant) -> dict[int, tuple[int, int]]:
    """Layers that ran in FP8 (precision as run) whose kernels all name their architecture, every one below
    FP8_TENSOR_CORES: each such layer's index and the newest architecture among its kernels."""
    table = variant.kernels
    fp8 = {i for i, layer in enumerate(variant.layers) if layer.precision == "fp8"}
    if table is None or not fp8:
        return {}
    arch_of = [kernel_arch(name) for name in table.names]
    archs: dict[int, list[tuple[int, int]]] = {}
    unnamed: set[int] = set()  # layers with a kernel that names no architecture: nothing to conclude
    for owner, name_id in set(zip(table.layer, table.name, strict=False)):
        if owner in fp8:
            arch = arch_of[name_id]
            if arch is None:
                unnamed.add(owner)
            else:
                archs.setdefault(owner, []).append(arch)
    newest = {i: max(found) for i, found in archs.items() if i not in unnamed}
    return {i: arch for i, arch in newest.items() if arch < FP8_TENSOR_CORES}
