"""Stem, stages and head of a model's trunk, from a record of one forward pass (builders.models.structure).

Contract, in terms of what ran (never of names):
- units: the root's children in call order, where a child that holds both trunk and head, or whose own children run
  as a chain (each reads what the one before wrote, reshaped or not) and include two or more that hold a chain of
  layers (one convolution or linear reading another's output: a sequence of blocks), or a child that only wraps one
  module, or a block (below) that holds the layer reading the model's input, is replaced, recursively, by its
  children (the stem is never inside a block);
- a block: a unit that holds a chain of layers and either merges two computed tensors (a residual add, a
  concatenation, a gating multiply, a matmul of two activations) or sits in a sequence of blocks (not
  directly under the root); a container of parallel single layers (a split, convolutions, a concatenation)
  holds no chain;
- stem: the units before the first block (without any block: the trunk opened down to its plain chains,
  and the units up to the last one whose layers read the input);
- stages: from the first block on, a new stage starts at each unit that hands on a lower resolution (at most
  `LOWER_RESOLUTION` of the positions out of its last convolution or linear not fed pooled features) than any unit
  before it;
- head: every module called after the trunk's last operation: where the model's output is pooled (logits), the
  latest that made the features its classifiers (the layers nearest upstream of the output) read through pooled
  features, reshapes and selections (global pooling, a class token), so a classifier applied to every position and
  reduced after it is the head's; else the last operation whose output is not pooled; for a Hugging Face task model,
  what lies outside its base model.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import pairwise

STEM = "stem"
HEAD = "head"
# a lower resolution: at most this share of the fewest positions handed on before. A stride of 2 on one axis of n >= 2
# positions leaves ceil(n / 2) / n <= 2 / 3 of them; one class token fewer (CoaT's 3,136 map positions against its
# 3,137 tokens) or a convolution without padding (56 x 56 -> 54 x 54: 0.93) is the same resolution
LOWER_RESOLUTION = 3 / 4


def stage_name(index: int) -> str:
    return f"stage {index}"


@dataclass
class ModuleCall:
    """One module's first call: when it ran and what it read and wrote."""

    path: str
    start: int  # sequence number of its pre-hook
    end: int = -1  # of its post-hook
    input_ids: set[int] = field(default_factory=set)  # its first tensor argument, and what that was reshaped from
    output_id: int | None = None  # id of its first tensor output
    layers: list[int] = field(default_factory=list)  # sequence numbers of its convolutions and linears
    merges: int = 0  # calls, by itself or by its descendants, that combine two computed tensors


@dataclass
class TrunkRecord:
    """What `model_structure` recorded; `positions[seq]` and `reads_input[seq]` per layer sequence number."""

    calls: dict[str, ModuleCall]
    children: dict[str, list[str]]  # module path -> its children's paths, in declaration order
    positions: dict[int, int]  # layer -> spatial positions of its output (1: pooled)
    pooled_input: dict[int, bool]  # layer -> fed pooled features: flat, 1 x 1 maps or one row of them (N, 1, C)
    reads_input: dict[int, bool]  # layer -> a convolution the model's input reaches through no other layer
    feeders: dict[int, set[int]]  # layer -> the nearest layers upstream of its input
    trunk_end: int  # sequence number of the trunk's last operation (structure's `_Recorder.trunk_end`)
    head_roots: set[str] | None = None  # modules outside a Hugging Face base model, where there is one


def deep(record: TrunkRecord, call: ModuleCall) -> bool:
    """Whether `call` holds a chain of layers: one of its layers reads (through other ops) another's output."""
    inside = set(call.layers)
    return any(record.feeders[s] & inside for s in call.layers)


def _ran_children(record: TrunkRecord, path: str) -> list[ModuleCall]:
    """Children that ran, in call order; a child never called itself (a plain list of modules) gives its own."""
    calls: list[ModuleCall] = []
    for child in record.children.get(path, []):
        calls.extend([record.calls[child]] if child in record.calls else _ran_children(record, child))
    return sorted(calls, key=lambda c: c.start)


def _is_chain(record: TrunkRecord, path: str) -> bool:
    """Whether `path`'s children run one after another, each reading what the one before wrote."""
    children = _ran_children(record, path)
    return len(children) > 1 and all(a.output_id in b.input_ids for a, b in pairwise(children))


def _is_block_sequence(record: TrunkRecord, path: str) -> bool:
    return _is_chain(record, path) and sum(deep(record, c) for c in _ran_children(record, path)) >= 2


def _is_wrapper(record: TrunkRecord, call: ModuleCall) -> bool:
    children = _ran_children(record, call.path)
    return len(children) == 1 and (len(children[0].layers), children[0].merges) == (len(call.layers), call.merges)


def _holds_head(record: TrunkRecord, call: ModuleCall) -> bool:
    """Whether `call` holds both trunk and head modules: its children are split between the two."""
    children = _ran_children(record, call.path)
    return any(_in_head(record, c) for c in children) and not all(_in_head(record, c) for c in children)


def units(record: TrunkRecord, plain: bool = False) -> list[tuple[ModuleCall, bool]]:
    """(unit, whether it sits in a sequence of blocks) in call order; `plain`: every chain opened up too."""
    found: list[tuple[ModuleCall, bool]] = []

    def expand(path: str, in_sequence: bool) -> None:
        for child in _ran_children(record, path):
            if _is_block_sequence(record, child.path):
                expand(child.path, True)
            elif (_is_wrapper(record, child) or _holds_head(record, child) or (plain and _is_chain(record, child.path))
                  or _block_reading_input(record, child, in_sequence)):
                expand(child.path, in_sequence)
            else:
                found.append((child, in_sequence))

    expand("", False)
    return found


def _is_block(record: TrunkRecord, unit: ModuleCall, in_sequence: bool) -> bool:
    return deep(record, unit) and (unit.merges > 0 or in_sequence)


def _block_reading_input(record: TrunkRecord, call: ModuleCall, in_sequence: bool) -> bool:
    """Whether `call` is a block with children that holds a layer reading the model's input (a stem module that
    holds a residual block): opened up, its layers before its first block are the stem."""
    return (_is_block(record, call, in_sequence) and any(record.reads_input[s] for s in call.layers)
            and bool(_ran_children(record, call.path)))


def _trunk_sizes(record: TrunkRecord, unit: ModuleCall) -> list[int]:
    """Positions out of each of the unit's layers not fed pooled features, in call order."""
    return [record.positions[s] for s in unit.layers if not record.pooled_input[s] and record.positions[s] > 1]


def _trunk_positions(record: TrunkRecord, unit: ModuleCall) -> int | None:
    """Positions of the unit's last layer not fed pooled features: the resolution it hands on (a layer
    inside it may run coarser, as attention's spatial reduction does)."""
    sizes = _trunk_sizes(record, unit)
    return sizes[-1] if sizes else None


def _in_head(record: TrunkRecord, call: ModuleCall) -> bool:
    if record.head_roots is not None:
        return any(call.path == h or call.path.startswith(h + ".") for h in record.head_roots)
    return call.start > record.trunk_end


def unit_stages(record: TrunkRecord) -> list[tuple[ModuleCall, str]]:
    """Each unit with its label: stem, stage N or head."""
    found = units(record)
    first_block = next((i for i, (u, seq) in enumerate(found) if _is_block(record, u, seq)), None)
    if first_block is None:  # a plain chain of layers (VGG): read it layer by layer
        found = units(record, plain=True)
        reading = [i for i, (u, _) in enumerate(found) if any(record.reads_input[s] for s in u.layers)]
        first_block = reading[-1] + 1 if reading else 0
    labelled: list[tuple[ModuleCall, str]] = []
    stage, smallest = 0, None
    found = found[:first_block] + [(part, seq) for unit, seq in found[first_block:]
                                   for part in ([unit] if _is_block(record, unit, seq)
                                                else _resolution_steps(record, unit))]
    for index, (unit, _) in enumerate(found):
        if _in_head(record, unit):
            labelled.append((unit, HEAD))
            continue
        if index < first_block:
            labelled.append((unit, STEM))
            continue
        size = _trunk_positions(record, unit)
        if stage == 0 or (size is not None and smallest is not None and size <= smallest * LOWER_RESOLUTION):
            stage += 1
        if size is not None:
            smallest = size if smallest is None else min(smallest, size)
        labelled.append((unit, stage_name(stage)))
    return labelled


def _resolution_steps(record: TrunkRecord, unit: ModuleCall) -> list[ModuleCall]:
    """`unit` (not a block), or, where it is a plain chain (its children run one after another and none holds a chain
    of layers: selecsls's `head`, four convolutions at /32 and /64) whose layers step down to a lower resolution
    inside it, its children, each opened up the same way: each step down starts its own stage. A block's layers stay
    in one stage, its output's (an inverted residual that strides inside)."""
    children = _ran_children(record, unit.path)
    if not _is_chain(record, unit.path) or any(deep(record, child) for child in children):
        return [unit]
    if not any(after <= before * LOWER_RESOLUTION for before, after in pairwise(_trunk_sizes(record, unit))):
        return [unit]
    return [part for child in children for part in _resolution_steps(record, child)]


def module_stages(record: TrunkRecord) -> dict[str, str]:
    """Stage label of every module that ran: a unit's, for the unit and what it holds; a container's where
    all its units share one (the root and containers spanning stages get none)."""
    labels: dict[str, str] = {}
    for unit, label in unit_stages(record):
        for path in record.calls:
            if path == unit.path or path.startswith(unit.path + "."):
                labels[path] = label
    for path in sorted(record.calls, key=lambda p: -p.count(".")):
        if path in labels or not path:
            continue
        inner = {labels[p] for p in record.calls if p.startswith(path + ".") and p in labels}
        if len(inner) == 1:
            labels[path] = inner.pop()
    return labels
