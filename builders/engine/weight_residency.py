"""Where a layer's weights are when the engine runs it, so that its tactics are timed with them there.

In an engine's graph every layer reads its weights once a call. Where the model's weights take more than the GPU's
L2, the other layers' weights pass through L2 between two reads of one layer's, so each layer reads its own from
memory; a tactic timed back to back on one weight tensor reads it from L2 instead. On the H200 the two orders
disagree: senet154's 1x1 convolutions as cuDNN matmul graphs, timed back to back, put two plans 2 % apart, and
which won moved between machines; with the weights read from memory they are 9 % apart, the one that wins there also
runs faster in the graph (4.46 against 5.45 us traced), and each plan's time is nearer what the graph's trace shows
(`benchmarks/plan_timing_stability.py`, `benchmarks/results/h200/plan-timing/`).

So where `weights_cold` says so, a tactic's timed calls cycle through copies of its weights (`weight_copies`): the
copies read between two reads of one copy hold twice the L2, and the input stays the one tensor (a layer's input was
just written by the layer before it).
"""

from __future__ import annotations

import torch

WEIGHT_COPIES_MAX = 64  # copies a timing cycles through, at most: memory and set-up stay small for small weights
FP16_BYTES = 2


def gpu_l2_bytes(device: torch.device | int | None = None) -> int:
    """The L2 cache size of the GPU `device` (the current one by default), in bytes."""
    return int(torch.cuda.get_device_properties(torch.cuda.current_device() if device is None else device)
               .L2_cache_size)


def weights_cold(module: torch.nn.Module, l2_bytes: int) -> bool:
    """Whether an engine of `module` reads each layer's weights from memory, not from L2: its parameters in fp16 take
    more than `l2_bytes` (the same answer for every variant of a study, FP8 ones too: one rule per model)."""
    return sum(parameter.numel() for parameter in module.parameters()) * FP16_BYTES > l2_bytes


def weight_copies(weight_bytes: int, l2_bytes: int) -> int:
    """How many copies of a weight of `weight_bytes` a timing with cold weights cycles through: enough that the other
    copies read between two reads of one hold twice `l2_bytes`, at least 2, at most WEIGHT_COPIES_MAX (smaller
    weights then partly stay in L2, where reading them costs little beside a layer's other traffic)."""
    return max(2, min(WEIGHT_COPIES_MAX, -(-2 * l2_bytes // max(weight_bytes, 1))))


def weight_packs(tensors: dict[int, torch.Tensor], weight_uid: int, l2_bytes: int) -> list[dict[int, torch.Tensor]]:
    """`tensors` (a graph's tensors by uid) once per copy of its weight (`weight_copies`; the first is `tensors`
    itself), every other tensor shared: calls cycling through them read a weight L2 no longer holds."""
    weight = tensors[weight_uid]
    count = weight_copies(weight.numel() * weight.element_size(), l2_bytes)
    copies = [weight.clone(memory_format=torch.preserve_format) for _ in range(count - 1)]
    return [tensors, *({**tensors, weight_uid: copy} for copy in copies)]
