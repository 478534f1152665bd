"""Regions of a model's graph that one generated fused kernel may run instead of the engine's layers, as TensorRT's
Myelin and pointwise fusion take them: a squeeze-excitation block and chains of pointwise ops.

Pure analysis over the graph's description (`OpNode`s: ops and data flow, never module names), so every decision is
testable on the CPU:

- a squeeze-excitation block: a global average pool of a value x -> a 1x1 convolution or linear -> an activation -> a
  1x1 convolution or linear -> sigmoid or hard-sigmoid -> a multiply of x by that gate; views and reshapes may sit
  between, and every value inside is read by the next op only;
- a pointwise region: two or more pointwise ops (activations, adds, multiplies, subtractions, divisions,
  normalizations that were not folded) that run as PyTorch ops of their own, each value read only by the next;
- a squeeze-excitation block takes the pointwise region its multiply starts (a residual add and activation after it).

`region_steps` says which of the lowered program's steps a region replaces (none where a step computes nodes both
inside and outside it, or runs anything but fp16 as asked), `fused_step` is the step that runs it, and
`fused_sequence` puts it in their place.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TypeVar

from builders.engine.lowering import (
    CONV_1X1,
    GLOBAL_AVG_POOL,
    OpNode,
    Step,
    step_nodes,
    users_of,
    without_noops,
)

SQUEEZE_EXCITATION, POINTWISE = "squeeze-excitation", "pointwise"  # the kinds of region
GATES = ("sigmoid", "hardsigmoid")  # the squeeze-excitation gate: OpNode.act or fn
POINTWISE_KINDS = ("act", "add", "norm")
POINTWISE_ELEMENTWISE = ("mul", "add", "sub", "div", "where")  # OpNode.fn of an `elementwise` node that is pointwise
MIN_POINTWISE = 2  # a pointwise region fuses this many ops or more
T = TypeVar("T")


@dataclass(frozen=True)
class Region:
    """Graph nodes one fused kernel may compute: `nodes` in graph order, `inputs` the values it reads from outside (in
    the order first read), `output` the one value read outside it."""

    kind: str
    nodes: tuple[str, ...]
    inputs: tuple[str, ...]
    output: str


def find_regions(nodes: list[OpNode], standalone: set[str], kept: frozenset[str] = frozenset()) -> list[Region]:
    """The regions of the graph `nodes` (topological order), in graph order of their outputs. `standalone`: the nodes
    that run as PyTorch ops of their own in the lowered program (a pointwise op fused into a convolution's epilogue
    is not one); `kept`: nodes no region may take (those of layers a recipe quantizes: a block holding one is no
    region, and the pointwise ops after its product still are one)."""
    nodes = without_noops(nodes)
    by_name = {node.name: node for node in nodes}
    users = users_of(nodes)
    cores = {mul: core for mul, core in se_blocks(nodes).items() if not (core | {mul}) & kept}
    eligible = ({n.name for n in nodes if n.name in standalone and is_pointwise(n)} - kept) | set(cores)
    successor = {name: users[name][0] for name in eligible if len(users.get(name, [])) == 1
                 and users[name][0] in eligible}
    order = {node.name: index for index, node in enumerate(nodes)}
    feeders: dict[str, list[str]] = {}
    for name, user in successor.items():
        feeders.setdefault(user, []).append(name)
    regions = []
    for root in sorted(eligible - set(successor), key=order.__getitem__):
        tree = _tree(root, feeders)
        members = set(tree).union(*(cores[name] for name in tree if name in cores))
        if len(tree) < MIN_POINTWISE and not any(name in cores for name in tree):
            continue
        kind = SQUEEZE_EXCITATION if any(name in cores for name in tree) else POINTWISE
        region = _region(kind, members, root, by_name, users, order)
        if region is not None:
            regions.append(region)
    return regions


def is_pointwise(node: OpNode) -> bool:
    """Whether `node` computes each output element from the same element of its inputs (or, for a normalization, a
    row of them): an activation, an add, a pointwise elementwise op, a normalization."""
    return node.kind in POINTWISE_KINDS or (node.kind == "elementwise" and node.fn in POINTWISE_ELEMENTWISE)


def _tree(root: str, feeders: Mapping[str, list[str]]) -> list[str]:
    """`root` and every node whose chain of only readers leads to it (`feeders`: the nodes read only by a node)."""
    found, stack = [root], [root]
    while stack:
        more = feeders.get(stack.pop(), [])
        found += more
        stack += more
    return found


def _region(kind: str, members: set[str], output: str, by_name: Mapping[str, OpNode],
            users: Mapping[str, list[str]], order: Mapping[str, int]) -> Region | None:
    """The region of `members`, or None where a value other than `output` is read outside it."""
    if any(set(users.get(name, [])) - members for name in members if name != output):
        return None
    ordered = sorted(members, key=order.__getitem__)
    inputs = tuple(dict.fromkeys(arg for name in ordered for arg in by_name[name].args if arg not in members))
    return Region(kind, tuple(ordered), inputs, output)


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


def region_steps(region: Region, steps: list[Step]) -> list[int] | None:
    """The indices of the steps that compute `region` and nothing else, or None where it cannot replace them: a step
    computes nodes inside and outside it, a step inside it runs anything but fp16 as asked (a layer the recipe
    quantizes keeps the precision chosen for it), or its nodes are not all computed by steps."""
    members = set(region.nodes)
    found: list[int] = []
    covered: set[str] = set()
    for index, step in enumerate(steps):
        computed = step_nodes(step)
        inside = computed & members
        if not inside:
            continue
        if inside != computed or step.asked != "fp16" or step.precision != "fp16":
            return None
        found.append(index)
        covered |= computed
    return found if covered == members else None


def fused_step(region: Region, steps: list[Step]) -> Step:
    """The step that runs `region` in place of `steps` (those `region_steps` named): named as TensorRT names a fused
    layer, its steps' names joined with ' + '."""
    return Step(" + ".join(step.name for step in steps), "fused", region.output, region.inputs, "fp16", "elementwise",
                fused=region.nodes, source=region.output)


def fused_sequence(items: list[T], replaced: list[tuple[list[int], T]]) -> list[T]:
    """`items` (a program's steps, or what is aligned with them: runners, layers) with each group of them (their
    indices) replaced by one item, where the last of the group stood: every value a fused step reads is made by
    then, and no step between reads a value inside its region."""
    at_last = {max(indices): item for indices, item in replaced}
    dropped = {index for indices, _ in replaced for index in indices}
    return [at_last.get(index, item) for index, item in enumerate(items) if index not in dropped or index in at_last]
