"""Where a layer's weights are when the engine runs it, so that its tactics are timed with them there.

In an engine's graph every layer reads its weights once a call. Where the model's weights take more than the GPU's
L2, the other layers' weights pass through L2 between two reads of one layer's, so each layer reads its own from
memory; a tactic timed back to back on one weight tensor reads it from L2 instead, and the two orders can rank a
layer's tactics differently (how they did on the H200: docs/evidence.md ("Grounds of rules in the code")).

So where `weights_cold` says so, a tactic's timed calls read copies of its weights that L2 no longer holds, the
input the one tensor (a layer's input was just written by the layer before it). cuDNN's plans cycle through copies
laid one after another in a buffer of twice the L2 (`weight_packs`: however small the weight); another library's
tactic runs one call per copy in one captured graph, at most WEIGHT_COPIES_MAX copies (`weight_copies`), so a weight
under twice the L2 over that many (1.9 MiB on the H200, whose L2 torch reports as 60 MiB) is read partly (under half
that, mostly or wholly) from L2 there. Both precisions of a layer get the copies of its fp16 weight's size, so FP8
and fp16 are timed alike.
"""

from __future__ import annotations

import torch

WEIGHT_COPIES_MAX = 64  # calls per captured graph of another library's tactic, at most
FP16_BYTES = 2


def gpu_l2_bytes(device: torch.device | int | str | None = None) -> int:
    """The L2 cache size of the GPU `device` (the current one by default), in bytes."""
    return int(torch.cuda.get_device_properties(torch.cuda.current_device() if device is None else device)
               .L2_cache_size)


def weights_cold(module: torch.nn.Module, l2_bytes: int) -> bool:
    """Whether an engine of `module` reads each layer's weights from memory, not from L2: its convolutions' and
    linears' weights in fp16 take more than `l2_bytes` (biases, BatchNorm and other parameters left out, so a model
    and its BatchNorm-folded copy get one answer; the same for every variant of a study, FP8 ones too)."""
    layers = (torch.nn.modules.conv._ConvNd, torch.nn.Linear)
    weights = sum(m.weight.numel() for m in module.modules() if isinstance(m, layers) and m.weight is not None)
    return weights * FP16_BYTES > l2_bytes


def copies_to_evict(fp16_weight_bytes: int, l2_bytes: int) -> int:
    """How many copies of a weight of `fp16_weight_bytes` (its size in fp16, whatever precision it is timed in) hold
    twice `l2_bytes` together, at least 2: reading them in turn, each read finds its copy evicted."""
    return max(2, -(-2 * l2_bytes // max(fp16_weight_bytes, 1)))


def weight_copies(fp16_weight_bytes: int, l2_bytes: int) -> int:
    """Calls, each on its own copy of the weight, in one captured graph of another library's tactic: `copies_to_evict`,
    at most WEIGHT_COPIES_MAX (smaller weights then partly stay in L2)."""
    return min(WEIGHT_COPIES_MAX, copies_to_evict(fp16_weight_bytes, l2_bytes))


def weight_packs(tensors: dict[int, torch.Tensor], weight_uid: int, l2_bytes: int) -> list[dict[int, torch.Tensor]]:
    """`tensors` (a graph's tensors by uid) once per copy of its weight, every other tensor shared: the copies
    (`copies_to_evict` of the weight's fp16 size) lie one after another in one buffer, written in order, so the first
    are out of L2 when timing starts and each is again by the time the cycle comes back to it."""
    weight = tensors[weight_uid]
    count = copies_to_evict(weight.numel() * FP16_BYTES, l2_bytes)
    buffer = torch.empty_strided((count, *weight.shape), (weight.numel(), *weight.stride()), dtype=weight.dtype,
                                 device=weight.device)  # each copy laid out as the weight (a dense tensor) is
    buffer.copy_(weight.unsqueeze(0).expand_as(buffer))
    return [{**tensors, weight_uid: copy} for copy in buffer.unbind(0)]
