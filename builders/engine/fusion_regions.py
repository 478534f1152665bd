"""Regions of a model's lowered program that one generated fused function may run instead of the engine's steps, as
TensorRT's Myelin takes what its kernel libraries do not fuse.

Pure analysis over the graph's description (`OpNode`s: ops and data flow, never module names) and the lowered
program's steps, so every decision is testable on the CPU:

- a step may join a region where it runs as PyTorch ops (every `torch` step, an fp16 linear run by torch: Inductor
  calls cuBLAS for the matmul and fuses what surrounds it), or is a convolution of a squeeze-excitation block (a
  global average pool of x -> a 1x1 convolution or linear -> an activation -> a 1x1 convolution or linear -> sigmoid
  or hard-sigmoid -> the product with x; views between them allowed, each value read by the next op only); never a
  cuDNN convolution graph or library convolution tactic otherwise, an FP8 GEMM, a quantize, nor a step that runs
  anything but fp16 or writes FP8 (a layer a recipe quantizes joins where timing or a refusal made it fp16: it is then
  an fp16 layer like any other, and its record stays countable);
- a region is a maximal connected set of such steps (linked by the values they read from each other) that one step
  can run where the last of them stood: no step between its first and its last reads a value it computes (a
  connected set that breaks this is cut where such a step stands);
- every value computed in the region and read outside it (or the model's output) is an output of the region;
- a region is offered where it has two steps or more, or one op whose Inductor kernel may beat ATen's
  (interpolation, concatenation, normalization, softmax and attention, pooling and reductions, matmuls), and
  computes something besides views;
- a region of kind SUBGRAPH is also offered wider (`widened`) where its last output is read by an fp16 1x1
  convolution alone (and that convolution's by another, and so on), with those convolutions: a region's own output
  keeps the layout eager PyTorch gives it, while Inductor lays out a value a convolution reads as it chooses, and
  that can decide how fast everything before it runs (`benchmarks/decode_head_fusion.py`: SegFormer-B0's decode
  head); and where an input of it is the value of an fp16 depthwise convolution that only the region reads, with
  that convolution: Inductor runs it with ATen's depthwise kernel and adds its bias and activation in the region's
  own kernels, where the engine's step runs cuDNN's graph with them fused (SegFormer's depthwise convolutions:
  `benchmarks/results/h200/widened-regions/rerun/`). Timing decides between the two forms
  (`builders.engine.fused_tactics`).

`fused_step` is the step that runs a region, and `fused_sequence` puts it in its steps' place.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TypeVar

from builders.engine.lowering import (
    CONV_1X1,
    DEPTHWISE_CONV,
    GLOBAL_AVG_POOL,
    OpNode,
    Step,
    step_nodes,
    users_of,
    without_noops,
)

SQUEEZE_EXCITATION, POINTWISE, SUBGRAPH = "squeeze-excitation", "pointwise", "subgraph"  # the kinds of region
GATES = ("sigmoid", "hardsigmoid")  # the squeeze-excitation gate: OpNode.act or fn
POINTWISE_KINDS = ("act", "add", "norm")
POINTWISE_ELEMENTWISE = ("mul", "add", "sub", "div", "where")  # OpNode.fn of an `elementwise` node that is pointwise
SINGLE_KINDS = ("concat", "norm", "softmax", "pool", "matmul")  # one op of these kinds is a region of its own
SINGLE_FNS = ("interpolate", "Upsample", "UpsamplingBilinear2d", "UpsamplingNearest2d")
VIEWS = ("shuffle", "other", "noop")  # no kernel of their own (a view, a shape read): no region of these only
MIN_STEPS = 2  # a region of this many steps or more is offered whatever its ops
T = TypeVar("T")


@dataclass(frozen=True)
class Region:
    """Graph nodes one fused function may compute: `nodes` in graph order, `inputs` the values it reads from outside
    (in the order first read), `outputs` the values read outside it (graph order: the last is the fused step's own
    node), `steps` the indices of the program's steps it replaces."""

    kind: str
    nodes: tuple[str, ...]
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    steps: tuple[int, ...]

    @property
    def output(self) -> str:
        """The value the fused step itself holds (the last output); the others it writes beside it."""
        return self.outputs[-1]


def find_regions(nodes: list[OpNode], steps: list[Step], kept: frozenset[str] = frozenset()) -> list[Region]:
    """The regions of the program `steps` lowered from the graph `nodes` (topological order), in the order of their
    last steps. `kept`: nodes no region may take (a module whose tensors a fused function cannot pass)."""
    nodes = without_noops(nodes)
    by_name = {node.name: node for node in nodes}
    users = users_of(nodes)
    cores = {mul: core for mul, core in se_blocks(nodes).items() if not (core | {mul}) & kept}
    se_nodes = set(cores).union(*cores.values())
    computed = [step_nodes(step) for step in steps]
    joins = {index for index, step in enumerate(steps) if _joins(step, computed[index], se_nodes, kept)}
    reads = [_reads(step, names, by_name) for step, names in zip(steps, computed, strict=True)]
    order = {node.name: index for index, node in enumerate(nodes)}
    regions = []
    for piece in _pieces(len(steps), computed, reads, joins):
        region = _region(piece, computed, reads, by_name, users, order, cores)
        if _offered(region, by_name):
            regions.append(region)
    return sorted(regions, key=lambda region: region.steps[-1])


def widened(nodes: list[OpNode], steps: list[Step], regions: list[Region],
            kept: frozenset[str] = frozenset()) -> dict[int, Region]:
    """Each region of `regions` (by position) of kind SUBGRAPH that has a wider form: with the fp16 1x1 convolution
    steps that read its last output in turn, each the only reader of the value before it, and with each fp16
    depthwise convolution step whose value only the region reads (each step with its epilogue's nodes), none of
    their nodes in `kept`; and only where no step between the wider form's first and last reads a value it computes
    (it runs where its last step stood). The wider region's last output is the last 1x1 convolution's value where
    there is one; the convolutions' other inputs (a residual, a depthwise convolution's input) are inputs of it."""
    nodes = without_noops(nodes)
    by_name = {node.name: node for node in nodes}
    users = users_of(nodes)
    computed = [step_nodes(step) for step in steps]
    convs = [index for index, step in enumerate(steps) if step.kind == "conv" and _runs_fp16(step, kept)]
    by_source = {steps[index].source or steps[index].node: index for index in convs}  # the convolution's own node
    by_value = {steps[index].node: index for index in convs}  # the value it writes (its epilogue's last node)
    order = {node.name: index for index, node in enumerate(nodes)}
    reads = [_reads(step, names, by_name) for step, names in zip(steps, computed, strict=True)]
    wider = {}
    for position, region in enumerate(regions):
        if region.kind != SUBGRAPH:
            continue
        chain, value = [], region.output
        while (index := _sole_1x1_conv(users.get(value, []), by_source, by_name)) is not None:
            chain.append(index)
            value = steps[index].node
        members = set(region.nodes)
        before = [index for name in region.inputs if (index := by_value.get(name)) is not None
                  and by_name[steps[index].source or name].fn == DEPTHWISE_CONV
                  and set(users.get(name, [])) <= members]
        indices = sorted({*before, *region.steps, *chain})
        if len(indices) > len(region.steps) and _runs_in_place(indices, computed, reads):
            wider[position] = _region(indices, computed, reads, by_name, users, order, {})
    return wider


def _runs_fp16(step: Step, kept: frozenset[str]) -> bool:
    """Whether `step` runs fp16 and writes fp16, none of its nodes kept: as asked, or where its recipe asked for FP8
    and timing or a refusal chose fp16 (the layer then is an fp16 layer reading fp16, no quantize before it, and the
    region that covers it keeps its record: `sessions.documents.covers`)."""
    return step.precision == "fp16" and not step.output_fp8 and not step_nodes(step) & kept


def _sole_1x1_conv(readers: list[str], by_source: Mapping[str, int], by_name: Mapping[str, OpNode]) -> int | None:
    """The index of the step that is the only reader in `readers` where it is one of `by_source`'s convolutions
    (fp16: `_runs_fp16`, none of its nodes kept) and a 1x1 one; else None."""
    if len(readers) != 1 or readers[0] not in by_source:
        return None
    return by_source[readers[0]] if by_name[readers[0]].fn == CONV_1X1 else None


def _runs_in_place(indices: list[int], computed: list[set[str]], reads: list[set[str]]) -> bool:
    """Whether the steps `indices` (in program order) may run as one step where the last of them stands: no step
    between the first and the last, outside them, reads a value they compute."""
    members = set().union(*(computed[index] for index in indices))
    inside = set(indices)
    return not any(reads[index] & members for index in range(indices[0], indices[-1]) if index not in inside)


def _joins(step: Step, computed: set[str], se_nodes: set[str], kept: frozenset[str]) -> bool:
    """Whether `step` may be in a region: fp16 (`_runs_fp16`), none of its nodes kept, and run as PyTorch ops (or a
    squeeze-excitation block's own convolution)."""
    if not computed or not _runs_fp16(step, kept):
        return False
    return step.kind in ("torch", "linear") or (step.kind == "conv" and computed <= se_nodes)


def _reads(step: Step, computed: set[str], by_name: Mapping[str, OpNode]) -> set[str]:
    """The values `step` reads from other steps (its nodes' arguments and its own inputs)."""
    found = set(step.inputs).union(*(by_name[name].args for name in computed if name in by_name))
    return found - computed


def _pieces(count: int, computed: list[set[str]], reads: list[set[str]],
            joins: set[int]) -> list[list[int]]:
    """The steps of `joins` in connected sets, each cut where a step outside it stands between its steps and reads a
    value it computes (the fused step runs where its last step stood); indices in program order."""
    producer = {name: index for index, names in enumerate(computed) for name in names}
    parent = {index: index for index in joins}

    def root(index: int) -> int:
        while parent[index] != index:
            parent[index] = parent[parent[index]]
            index = parent[index]
        return index

    for index in sorted(joins):
        for name in reads[index]:
            if producer.get(name) in joins:
                parent[root(producer[name])] = root(index)
    pieces: list[list[int]] = []
    open_piece: dict[int, list[int]] = {}  # a connected set's root -> its piece now growing
    values: dict[int, set[str]] = {}  # the values the growing piece computes
    for index in range(count):
        if index in joins:
            group = root(index)
            if group not in open_piece:
                open_piece[group], values[group] = [], set()
                pieces.append(open_piece[group])
            open_piece[group].append(index)
            values[group] |= computed[index]
            continue
        for group in [g for g, made in values.items() if made & reads[index]]:
            del open_piece[group], values[group]  # a step between reads the piece: it ends here
    return [part for piece in pieces for part in _connected(piece, computed, reads)]


def _connected(piece: list[int], computed: list[set[str]], reads: list[set[str]]) -> list[list[int]]:
    """`piece` in its connected parts (each in program order)."""
    parts: list[tuple[set[str], list[int]]] = []
    for index in piece:
        linked = [part for part in parts if part[0] & (reads[index] | computed[index])]
        merged = (set(computed[index]).union(*(p[0] for p in linked)),
                  sorted(itertools.chain([index], *(p[1] for p in linked))))
        parts = [part for part in parts if all(part is not p for p in linked)] + [merged]
    return sorted((part[1] for part in parts), key=lambda indices: indices[0])


def _region(piece: list[int], computed: list[set[str]], reads: list[set[str]], by_name: Mapping[str, OpNode],
            users: Mapping[str, list[str]], order: Mapping[str, int], cores: Mapping[str, set[str]]) -> Region:
    members = set().union(*(computed[index] for index in piece))
    ordered = sorted(members, key=lambda name: order.get(name, len(order)))
    inputs = tuple(dict.fromkeys(arg for name in ordered for arg in by_name[name].args if arg not in members))
    outputs = tuple(name for name in ordered if set(users.get(name, [])) - members)
    if any(mul in members and core <= members for mul, core in cores.items()):
        kind = SQUEEZE_EXCITATION
    elif all(is_pointwise(by_name[name]) for name in members):
        kind = POINTWISE
    else:
        kind = SUBGRAPH
    return Region(kind, tuple(ordered), inputs, outputs or (ordered[-1],), tuple(piece))


def _offered(region: Region, by_name: Mapping[str, OpNode]) -> bool:
    """Whether `region` is worth a fused tactic: two steps or more, or one op `SINGLE_KINDS` or `SINGLE_FNS` name;
    and not views only."""
    ops = [by_name[name] for name in region.nodes]
    if all(op.kind in VIEWS for op in ops):
        return False
    return len(region.steps) >= MIN_STEPS or any(op.kind in SINGLE_KINDS or op.fn in SINGLE_FNS for op in ops)


def is_pointwise(node: OpNode) -> bool:
    """Whether `node` computes each output element from the same element of its inputs (or, for a normalization, a
    row of them): an activation, an add, a pointwise elementwise op, a normalization."""
    return node.kind in POINTWISE_KINDS or (node.kind == "elementwise" and node.fn in POINTWISE_ELEMENTWISE)


def se_blocks(nodes: list[OpNode]) -> dict[str, set[str]]:
    """Every squeeze-excitation block of `nodes` (no-ops removed) by its multiply: the nodes from its pool to its
    gate. Found from ops and data flow alone: pool(x) -> fc -> activation -> fc -> gate, multiplied with x."""
    by_name = {node.name: node for node in nodes}
    users = users_of(nodes)
    blocks: dict[str, set[str]] = {}
    for node in nodes:
        if node.kind != "elementwise" or node.fn != "mul" or len(node.args) != 2 or node.args[0] == node.args[1]:
            continue
        for x, gate in (node.args, node.args[::-1]):
            chain = _se_chain(gate, x, by_name)
            if chain is not None and _read_in_turn([*chain, node.name], users):
                blocks[node.name] = set(chain)
                break
    return blocks


def _se_chain(gate: str, x: str, by_name: Mapping[str, OpNode]) -> list[str] | None:
    """The nodes from the global average pool of `x` to `gate`, in graph order, where they make a squeeze-excitation
    block: walking back from the gate, views between the steps and a normalization before the activation skipped."""
    steps = (("gate", ()), ("fc", ()), ("act", ("norm",)), ("fc", ("norm",)), ("pool", ()))
    walked: list[str] = []
    current = by_name.get(gate)
    for role, skipped in steps:
        while current is not None and (current.kind == "shuffle" or current.kind in skipped) and current.args:
            walked.append(current.name)
            current = by_name.get(current.args[0])
        if current is None or not _plays(current, role):
            return None
        walked.append(current.name)
        if role == "pool":
            return walked[::-1] if current.args[:1] == (x,) else None
        current = by_name.get(current.args[0]) if current.args else None
    return None


def _plays(node: OpNode, role: str) -> bool:
    if role == "gate":
        return node.kind == "act" and (node.act in GATES or node.fn in GATES)
    if role == "fc":
        return node.kind == "linear" or (node.kind == "conv" and node.fn == CONV_1X1)
    if role == "act":
        return node.kind == "act"
    return node.kind == "pool" and node.fn == GLOBAL_AVG_POOL


def _read_in_turn(chain: list[str], users: Mapping[str, list[str]]) -> bool:
    """Whether each value of `chain` but the last is read by the next node only."""
    return all(users.get(name) == [after] for name, after in itertools.pairwise(chain))


def fused_step(region: Region, steps: list[Step]) -> Step:
    """The step that runs `region` in place of `steps` (its `steps`): named as TensorRT names a fused layer, its steps'
    names joined with ' + '; it holds the region's last output, and writes the others beside it (`FusedRunner`)."""
    return Step(" + ".join(step.name for step in steps), "fused", region.output, region.inputs, "fp16", "elementwise",
                absorbed=region.nodes, source=region.output)


def fused_sequence(items: list[T], replaced: list[tuple[list[int], T]]) -> list[T]:
    """`items` (a program's steps, or what is aligned with them: runners, layers) with each group of them (their
    indices) replaced by one item, where the last of the group stood: every value a fused step reads is made by
    then, and no step between reads a value inside its region."""
    at_last = {max(indices): item for indices, item in replaced}
    dropped = {index for indices, _ in replaced for index in indices}
    return [at_last.get(index, item) for index, item in enumerate(items) if index not in dropped or index in at_last]
