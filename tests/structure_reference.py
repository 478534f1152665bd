"""An independent reading of a model's stem, stages, head and layer roles, for the zoo test.

It implements the contract that builders/models/trunk.py and builders/models/structure.py document, with
other evidence and none of their code: the autograd graph of one forward pass (meta tensors that require
grad) instead of a torch-function mode, module outputs instead of function outputs for global pooling,
and autograd sequence numbers to tell which graph nodes a module made. Constants are what the input does not
reach in that graph (a MulBackward/DivBackward node with one computed operand scales it), a 1 x 1 convolution is read
from the weight its ConvolutionBackward node saved, and a plain chain's steps down in resolution from its layers'
output shapes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

import torch

VIEW_NODES = ("View", "Reshape", "Permute", "Transpose", "Clone", "Squeeze", "Unsqueeze", "Expand", "Alias",
              "Contiguous", "Select", "Slice")
PRODUCT_NODES = ("Bmm", "MmBackward", "Matmul", "ScaledDotProduct", "Einsum")
# a multiply or a divide: where one operand is computed from the input and the other is not (a number, a parameter, a
# buffer), the computed one comes out scaled, the same tensor in other units
SCALE_NODES = ("MulBackward", "DivBackward")
REDUCE_NODES = ("Mean", "Sum", "Amax", "Amin", "MaxBackward", "AvgPool", "MaxPool", "AdaptiveAvgPool",
                "AdaptiveMaxPool")
SELECT_NODES = ("Select", "Slice", "Index", "Gather", "Unbind", "Split", "Narrow")


@dataclass
class Call:
    path: str
    begin: int  # autograd sequence number before its forward
    finish: int = -1  # and after
    order: int = 0  # position of its pre-hook among all pre-hooks
    last: int = 0  # position of its post-hook among all hooks
    inp: Any = None
    out: Any = None
    layers: list[str] = field(default_factory=list)


@dataclass
class Reading:
    stages: dict[str, list[str]]  # stem / stage N / head -> convolutions and linears, in call order
    squeeze_excitation: list[str]
    attention_output: list[str]
    linears: list[str]


def _first_tensor(value: Any) -> torch.Tensor | None:
    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, (list, tuple)):
        for item in value:
            found = _first_tensor(item)
            if found is not None:
                return found
    if isinstance(value, dict):
        return _first_tensor(list(value.values()))
    return None


def _marker() -> int:
    probe = torch.zeros(1, device="meta", requires_grad=True) * 1
    return int(probe.grad_fn._sequence_nr())


class _Run:
    def __init__(self, model: torch.nn.Module, example: torch.Tensor) -> None:
        self.model = model
        self.calls: dict[str, Call] = {}
        self.clock = 0
        self.layer_out: dict[str, torch.Size] = {}  # shapes, and the graph nodes as they were at the call
        self.layer_in: dict[str, torch.Size] = {}
        self.out_node: dict[str, Any] = {}
        self.in_node: dict[str, Any] = {}
        self.example = example

    def pre(self, path: str, args: tuple[Any, ...]) -> None:
        self.clock += 1
        if path not in self.calls:
            self.calls[path] = Call(path, _marker(), order=self.clock, inp=_first_tensor(args))

    def post(self, path: str, module: torch.nn.Module, args: tuple[Any, ...], output: Any) -> None:
        self.clock += 1
        call = self.calls[path]
        if call.finish >= 0:
            return
        call.finish, call.last, call.out = _marker(), self.clock, _first_tensor(output)
        if isinstance(module, (torch.nn.Conv1d, torch.nn.Conv2d, torch.nn.Conv3d, torch.nn.Linear)):
            self.layer_in[path], self.layer_out[path] = args[0].shape, call.out.shape
            self.in_node[path], self.out_node[path] = args[0].grad_fn, call.out.grad_fn

    def run(self) -> None:
        handles = []
        for path, module in self.model.named_modules():
            handles.append(module.register_forward_pre_hook(lambda _m, a, p=path: self.pre(p, a)))
            handles.append(module.register_forward_hook(lambda m, a, o, p=path: self.post(p, m, a, o)))
        try:
            self.model(self.example)
        finally:
            for handle in handles:
                handle.remove()
        for path, call in self.calls.items():
            call.layers = [p for p in self.layer_out if p == path or p.startswith(path + ".") or not path]


class _Graph:
    """The autograd graph behind the output: which nodes combine two computed tensors, and the nearest
    layers upstream of every node."""

    def __init__(self, run: _Run, output: torch.Tensor) -> None:
        self.layer_of = {id(node): p for p, node in run.out_node.items() if node is not None}
        self.input_leaf: set[int] = set()
        self.nodes: dict[int, Any] = {}
        nodes = self.nodes
        stack = [output.grad_fn]
        while stack:
            node = stack.pop()
            if node is None or id(node) in nodes:
                continue
            nodes[id(node)] = node
            if type(node).__name__ == "AccumulateGrad" and node.variable is run.example:
                self.input_leaf.add(id(node))
            stack.extend(n for n, _ in node.next_functions)
        order = sorted(nodes.values(), key=lambda n: -1 if type(n).__name__ == "AccumulateGrad" else n._sequence_nr())
        self.computed: dict[int, bool] = {}
        self.upstream: dict[int, frozenset[str]] = {}
        self.merges: list[int] = []
        for node in order:  # inputs before users
            kids = [n for n, _ in node.next_functions if n is not None]
            computed = [k for k in kids if self.computed.get(id(k))]
            self.computed[id(node)] = id(node) in self.input_leaf or bool(computed)
            if len({id(k) for k in computed}) > 1:
                self.merges.append(node._sequence_nr())
            below = frozenset().union(*(self.upstream.get(id(k), frozenset()) for k in computed))
            self.upstream[id(node)] = frozenset({self.layer_of[id(node)]}) if id(node) in self.layer_of else below

    def feeders(self, node: Any) -> frozenset[str]:
        return self.upstream.get(id(node), frozenset()) if node is not None else frozenset()


def _via_views(node: Any) -> Any:
    while node is not None and any(v in type(node).__name__ for v in VIEW_NODES):
        node = next((n for n, _ in node.next_functions if n is not None), None)
    return node


def _block(trunk: _Trunk, call: Call, in_sequence: bool) -> bool:
    """A unit holding a chain of layers that merges two computed tensors or sits in a sequence of blocks."""
    return trunk.chained(call) and (in_sequence or bool(trunk.merges(call)))


def _steps_down(sizes: list[int]) -> bool:
    """Whether any of these positions (layers in call order) is at most 3/4 of the one before it: a new resolution."""
    return any(4 * after <= 3 * before for before, after in pairwise(sizes))


class _Trunk:
    def __init__(self, run: _Run, graph: _Graph, head_roots: set[str] | None, last_spatial: int) -> None:
        self.run, self.graph, self.head_roots, self.last_spatial = run, graph, head_roots, last_spatial
        self.kids: dict[str, list[str]] = {}
        for path in dict(run.model.named_modules()):
            if path:
                parent = path.rpartition(".")[0]
                self.kids.setdefault(parent, []).append(path)

    def children(self, path: str) -> list[Call]:
        found: list[Call] = []
        for kid in self.kids.get(path, []):
            found.extend([self.run.calls[kid]] if kid in self.run.calls else self.children(kid))
        return sorted(found, key=lambda c: c.order)

    def merges(self, call: Call) -> int:
        return sum(call.begin < s < call.finish for s in self.graph.merges)

    def chained(self, call: Call) -> bool:
        inside = set(call.layers)
        return any(self.graph.feeders(self.run.in_node[p]) & inside for p in call.layers)

    def head(self, call: Call) -> bool:
        if self.head_roots is not None:
            return any(call.path == h or call.path.startswith(h + ".") for h in self.head_roots)
        return call.order > self.last_spatial

    def reads_image(self, path: str) -> bool:
        """A convolution whose input has no layer upstream in the autograd graph: the image, or ops on it alone."""
        kinds = (torch.nn.Conv1d, torch.nn.Conv2d, torch.nn.Conv3d)
        return isinstance(self.run.model.get_submodule(path), kinds) and not self.graph.feeders(self.run.in_node[path])

    def linked(self, call: Call) -> bool:
        kids = self.children(call.path)
        return len(kids) > 1 and all(b.inp is not None and _reaches(b.inp, a.out) for a, b in pairwise(kids))

    def sequence(self, call: Call) -> bool:
        return self.linked(call) and sum(self.chained(k) for k in self.children(call.path)) >= 2

    def units(self, plain: bool = False) -> list[tuple[Call, bool]]:
        result: list[tuple[Call, bool]] = []

        def walk(path: str, in_sequence: bool) -> None:
            for kid in self.children(path):
                grand = self.children(kid.path)
                wraps = (len(grand) == 1 and len(grand[0].layers) == len(kid.layers)
                         and self.merges(grand[0]) == self.merges(kid))
                split = any(self.head(g) for g in grand) and not all(self.head(g) for g in grand)
                reads_image = any(self.reads_image(p) for p in kid.layers)
                stem_inside = bool(grand) and reads_image and self.chained(kid) and (in_sequence or self.merges(kid))
                if self.sequence(kid):
                    walk(kid.path, True)
                elif wraps or split or (plain and self.linked(kid)) or stem_inside:
                    walk(kid.path, in_sequence)
                else:
                    result.append((kid, in_sequence))

        walk("", False)
        return result

    def resolution_parts(self, call: Call) -> list[Call]:
        """Following trunk.py's `_resolution_steps` clause (a unit after the first block that is no block): where
        `call` runs its children one after another (`linked`), none of them holds a chain of layers, and its layers'
        positions fall to at most 3/4 inside it (selecsls's `head`: convolutions at /32, then /64), the pieces it is
        made of, each opened the same way while that holds for it, so every step down can start a stage; else
        `call` itself. Read here as a worklist over the module tree, from module outputs and layer shapes."""
        parts: list[Call] = []
        pending = [call]
        while pending:
            current = pending.pop(0)
            kids = self.children(current.path)
            sizes = [_positions(p, self.run) for p in current.layers
                     if not _fed_pooled(p, self.run) and _positions(p, self.run) > 1]
            if self.linked(current) and not any(self.chained(k) for k in kids) and _steps_down(sizes):
                pending[:0] = kids  # in place of `current`, in call order
            else:
                parts.append(current)
        return parts


def _reaches(tensor: torch.Tensor, target: Any) -> bool:
    if tensor is target:
        return True
    node = tensor.grad_fn
    goal = getattr(target, "grad_fn", None)
    while node is not None:
        if node is goal:
            return True
        if not any(v in type(node).__name__ for v in VIEW_NODES):
            return False
        node = next((n for n, _ in node.next_functions if n is not None), None)
    return False


def _positions(path: str, run: _Run) -> int:
    shape = run.layer_out[path]
    channels = shape[-1] if isinstance(run.model.get_submodule(path), torch.nn.Linear) else shape[1]
    return shape.numel() // channels


def _fed_pooled(path: str, run: _Run) -> bool:
    """Whether the layer's input holds no positions: past the batch, its size is the size of its largest dimension
    (flat features, 1 x 1 maps, a (N, 1, C) row of pooled channels)."""
    shape = run.layer_in[path][1:]
    return shape.numel() == max(shape, default=1)


def _weighted_sum(node: Any) -> bool:
    """Whether `node` is a product that wrote fewer elements than its largest operand (attention pooling over
    positions: a map's (C, HW) times softmax weights (HW, 1))."""
    if not any(k in type(node).__name__ for k in PRODUCT_NODES):
        return False
    operands = [getattr(node, a) for a in dir(node) if a.startswith("_saved_") and a != "_saved_tensors"]
    sizes = [t.numel() for t in operands if isinstance(t, torch.Tensor)]
    return bool(sizes) and math.prod(node._input_metadata[0].shape) < max(sizes)


def _pooling_node(path: str, run: _Run, graph: _Graph) -> Any:
    """The reduction node (a mean, a pooling, a weighted sum) the layer's input comes from, back along its first
    computed input, before any node that selects positions (a class token); None where there is none."""
    node = run.in_node[path]
    while node is not None and graph.computed.get(id(node)):
        name = type(node).__name__
        if any(k in name for k in SELECT_NODES):
            return None
        if any(k in name for k in REDUCE_NODES) or _weighted_sum(node):
            return node
        node = next((n for n, _ in node.next_functions if n is not None and graph.computed.get(id(n))), None)
    return None


def _since(start: Any, floor: int, graph: _Graph) -> set[int]:
    """Ids of the computed nodes behind `start` (itself included) made at sequence number `floor` or later."""
    found: set[int] = set()
    pending = [start]
    while pending:
        node = pending.pop()
        if (node is None or id(node) in found or not graph.computed.get(id(node))
                or type(node).__name__ == "AccumulateGrad" or node._sequence_nr() < floor):
            continue
        found.add(id(node))
        pending.extend(n for n, _ in node.next_functions)
    return found


def _gating(run: _Run, graph: _Graph, pooled: dict[str, Any]) -> set[str]:
    """Layers of `pooled` (layer -> its reduction node) whose output one factor of a Mul node was computed from,
    after the other factor, where the reduction read that other factor or what was computed from it."""
    found: set[str] = set()
    for node in graph.nodes.values():
        factors = [n for n, _ in node.next_functions if n is not None and graph.computed.get(id(n))]
        if "MulBackward" not in type(node).__name__ or len({id(f) for f in factors}) != 2:
            continue
        for gated, gate in (factors, factors[::-1]):
            floor = gated._sequence_nr() if type(gated).__name__ != "AccumulateGrad" else 0
            behind_gate = _since(gate, floor + 1, graph)
            for path, reduction in pooled.items():
                read = next(n for n, _ in reduction.next_functions if n is not None and graph.computed.get(id(n)))
                if id(run.out_node[path]) in behind_gate and id(gated) in _since(read, floor, graph):
                    found.add(path)
    return found


def _unscaled(node: Any, graph: _Graph) -> Any:
    """`node` through views, and on through every multiply or divide of it by something not computed from the input
    (a MulBackward/DivBackward node with one computed operand; for a divide, the dividend): following structure.py's
    clause that attention output scaled by a constant (CoaT's `self.scale * factor_att`) is still attention output.
    A square (x * x) or a quotient of two activations (EfficientViT-MIT's linear attention) scales nothing."""
    node = _via_views(node)
    while node is not None and any(k in type(node).__name__ for k in SCALE_NODES):
        operands = [n for n, _ in node.next_functions]
        computed = [i for i, n in enumerate(operands) if n is not None and graph.computed.get(id(n))]
        if len(computed) != 1 or ("DivBackward" in type(node).__name__ and computed != [0]):
            break
        node = _via_views(operands[computed[0]])
    return node


def _cut_from(node: Any, graph: _Graph) -> Any:
    """The node `node` was cut (a chunk, a split, an index, a slice) or viewed from, back through every such node
    along the first computed operand: following structure.py's clause that a part of a tensor made before a module
    call (EfficientViT-M's cascaded heads add a chunk of the block's input to the head before's output) was made
    before that call, as the tensor itself was."""
    while node is not None and any(k in type(node).__name__ for k in (*VIEW_NODES, *SELECT_NODES)):
        source = next((n for n, _ in node.next_functions if n is not None and graph.computed.get(id(n))), None)
        if source is None:
            break
        node = source
    return node


def _past_local_add(node: Any, run: _Run, graph: _Graph) -> Any:
    """`node`, or, where it is an AddBackward of two computed nodes, the one that is (through views and constant
    scalings, `_unscaled`) a product node when the other, or what it was cut from (`_cut_from`), was made after the
    innermost module call around that product began (attn @ v + q in one module, CoaT's scale * factor_att + crpe;
    not the residual stream, made before, nor a chunk of it)."""
    kids = [n for n, _ in node.next_functions if n is not None and graph.computed.get(id(n))] if node else []
    if node is None or "AddBackward" not in type(node).__name__ or len({id(k) for k in kids}) != 2:
        return node
    for kid, other in (kids, kids[::-1]):
        product = _unscaled(kid, graph)
        if product is None or not any(k in type(product).__name__ for k in PRODUCT_NODES):
            continue
        seq = product._sequence_nr()
        began = max((c.begin for c in run.calls.values() if c.begin < seq < c.finish), default=-1)
        origin = _cut_from(other, graph)
        if type(origin).__name__ != "AccumulateGrad" and origin._sequence_nr() > began:
            return product
    return node


def _over_channels(path: str, run: _Run) -> bool:
    """Whether layer `path` mixes channels alone at each position: a linear, or a convolution whose autograd node
    (ConvolutionBackward) saved a weight of kernel 1 on every spatial axis; following structure.py's clause that a
    1 x 1 convolution fed attention's output (visformer's and CoAtNet's `proj`) is attention output."""
    if isinstance(run.model.get_submodule(path), torch.nn.Linear):
        return True
    node = run.out_node.get(path)
    weight = getattr(node, "_saved_weight", None) if "ConvolutionBackward" in type(node).__name__ else None
    return isinstance(weight, torch.Tensor) and weight.dim() > 2 and all(k == 1 for k in weight.shape[2:])


def _second_product(path: str, node: Any, run: _Run, graph: _Graph) -> bool:
    """Whether product `node` (feeding layer `path`, a linear or a 1 x 1 convolution) is fused attention or has,
    among the nodes made since the innermost module around `path` that began before it, another product of two
    computed tensors behind it."""
    if "ScaledDotProduct" in type(node).__name__:
        return True
    ancestors = [a for a in run.calls if a != path and (not a or path.startswith(a + "."))]
    since = max((run.calls[a].begin for a in ancestors if run.calls[a].begin < node._sequence_nr()), default=-1)
    pending = [n for n, _ in node.next_functions if n is not None and graph.computed.get(id(n))]
    seen: set[int] = set()
    while pending:
        current = pending.pop()
        if id(current) in seen or type(current).__name__ == "AccumulateGrad" or current._sequence_nr() <= since:
            continue
        seen.add(id(current))
        kids = [n for n, _ in current.next_functions if n is not None and graph.computed.get(id(n))]
        if any(k in type(current).__name__ for k in PRODUCT_NODES) and len({id(k) for k in kids}) >= 2:
            return True
        pending.extend(kids)
    return False


def _spatial(tensor: Any) -> bool:
    return tensor is not None and sum(d > 1 for d in tensor.shape[1:]) > 1


def _last_trunk_call(run: _Run, graph: _Graph, output: torch.Tensor) -> int:
    """Post-hook position of the trunk's last module: where the output has no positions (logits), the latest module
    with a spatial output that a classifier (a layer nearest the output in the graph) has behind its input; else the
    latest module with a spatial output."""
    spatial = [c for c in run.calls.values() if _spatial(c.out)]
    if not _spatial(output):
        behind: set[int] = set()
        for layer in graph.feeders(output.grad_fn):
            behind |= _since(run.in_node[layer], 0, graph)
        spatial = [c for c in spatial if id(c.out.grad_fn) in behind] or spatial
    return max(c.last for c in spatial)


def read(model: torch.nn.Module, example: torch.Tensor, head_roots: set[str] | None = None) -> Reading:
    """Stem, stages, head and roles of `model` on `example` (meta tensors)."""
    example = example.detach().requires_grad_(True)
    run = _Run(model, example)
    run.run()
    output = _first_tensor(run.calls[""].out)
    graph = _Graph(run, output)
    trunk = _Trunk(run, graph, head_roots, _last_trunk_call(run, graph, output))
    units = trunk.units()
    first = next((i for i, (u, s) in enumerate(units) if _block(trunk, u, s)), None)
    if first is None:
        units = trunk.units(plain=True)
        # the stem: the units up to the last that reads the image; none where no convolution does (linears alone)
        first = 1 + max((i for i, (u, _) in enumerate(units) if any(trunk.reads_image(p) for p in u.layers)),
                        default=-1)
    # after the first block, a unit that is no block and steps down in resolution inside is read piece by piece
    units = units[:first] + [(part, s) for unit, s in units[first:]
                             for part in ([unit] if _block(trunk, unit, s) else trunk.resolution_parts(unit))]
    label_of: dict[str, str] = {}
    stage, finest = 0, None
    for index, (unit, _) in enumerate(units):
        if trunk.head(unit):
            label = "head"
        elif index < first:
            label = "stem"
        else:
            trunk_layers = [p for p in unit.layers if not _fed_pooled(p, run) and _positions(p, run) > 1]
            size = _positions(trunk_layers[-1], run) if trunk_layers else None
            # a new resolution leaves at most 3 of 4 positions (stride 2 on one axis: ceil(n/2)/n); a class token
            # more or less, or a convolution without padding, leaves more
            if stage == 0 or (size is not None and finest is not None and 4 * size <= 3 * finest):
                stage += 1
            finest = size if finest is None else min(finest, size or finest)
            label = f"stage {stage}"
        label_of.update((p, label) for p in unit.layers)
    # each label's layers in call order, labels in the order their first layers ran (a module shared by a stage's
    # blocks, CoaT's `cpe1`, is its own unit after the block that first calls it, but runs inside that block)
    stages: dict[str, list[str]] = {}
    for p in run.layer_out:
        if p in label_of:
            stages.setdefault(label_of[p], []).append(p)
    head = set(stages.get("head", []))
    linears = [p for p in run.layer_out if isinstance(model.get_submodule(p), torch.nn.Linear)]
    pooled = {p: node for p in run.layer_out if p not in head and _fed_pooled(p, run)
              and (node := _pooling_node(p, run, graph)) is not None}
    gating = _gating(run, graph, pooled)
    se = [p for p in pooled if p in gating]
    attention = []
    for p in (p for p in run.layer_out if _over_channels(p, run)):
        node = _past_local_add(_unscaled(run.in_node[p], graph), run, graph)
        if node is not None and any(k in type(node).__name__ for k in PRODUCT_NODES) and _second_product(
                p, node, run, graph):
            attention.append(p)
    return Reading(stages, se, attention, linears)


def hf_head_roots(model: torch.nn.Module) -> set[str] | None:
    """The children of a Hugging Face task model besides its `base_model`; None for other models."""
    for path, module in model.named_modules():
        base = getattr(module, "base_model", None)
        if isinstance(base, torch.nn.Module) and base is not module:
            return {f"{path}.{name}" if path else name for name, child in module.named_children() if child is not base}
    return None


def read_at_input_size(model: torch.nn.Module, input_size: tuple[int, ...], head_roots: set[str] | None) -> Reading:
    """`read` on one input of the model's own size."""
    return read(model, torch.zeros(1, *input_size, device="meta"), head_roots)
