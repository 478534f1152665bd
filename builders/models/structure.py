"""The structural roles of a model's convolutions and linears, and the stage and own op of every module,
found by running it once, never from names.

One forward pass on an example input records every module call, every convolution and linear (input
shape, input tensor, output resolution), the functions each module calls itself, and which function
produced each tensor from which. From that:
- stem, stages, head: builders.models.trunk (the stem before the first block, stages at each drop of the
  trunk's resolution, the head after global pooling);
- first stage: the layers of stage 1;
- squeeze-excitation: a convolution or linear fed pooled features (flat, 1 x 1 maps, or one row of them: ECA's Conv1d
  reads (N, 1, C)), outside the head, where
  those features were pooled from positions (a mean, a pooling, a weighted sum: the nearest op upstream that read
  more than pooled features), not selected from them (a class token, `x[:, 0]`), and where what the layer computes
  multiplies the tensor they were pooled from, or one it was computed from (a channel gate: x * sigmoid(...));
  pooled features added to the map (a global context block's `x + mlp(context)`) gate nothing;
- attention output projection: a linear fed (through reshapes, and through an add of a tensor made inside the
  module call that made the product: MViTv2's residual pooling, attn @ v + q) a product of two activations that is
  itself computed from another such product (softmax(QK) @ V: the attention weights come from Q @ K^T), or fed
  scaled_dot_product_attention; the second product is looked for among what the innermost module around the linear
  computed, from its start on (a product of Q and K alone, fed to a linear that mixes heads, is not attention
  output);
- a module's own op: builders.models.module_ops, from the functions it called itself and the elements each call
  moved (its tensors' sizes, a pooling call's window).
Layers that read the very same tensor (key and value) are recorded as sharing an input.
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from builders.models.hooks import forward_once
from builders.models.module_ops import INFERENCE_IDENTITIES, call_cost, function_op, own_op
from builders.models.trunk import HEAD, STEM, ModuleCall, TrunkRecord, module_stages, stage_name
from sessions.documents.vocab import Op

PASS_THROUGH = {"view", "reshape", "permute", "transpose", "contiguous", "flatten", "clone", "to", "float", "half",
                "type", "unflatten", "squeeze", "unsqueeze", *INFERENCE_IDENTITIES}
FUSED_ATTENTION = {"scaled_dot_product_attention"}
MATMULS = {"matmul", "bmm", "__matmul__", "einsum", "baddbmm", *FUSED_ATTENTION}
ADDS = {"add", "add_", "__add__", "__radd__", "__iadd__"}
GATES = {"mul", "mul_", "__mul__", "__rmul__", "__imul__"}
DIVISIONS = {"div", "div_", "__truediv__", "__itruediv__", "true_divide"}
SCALINGS = {*GATES, *DIVISIONS}  # x * c, c * x, x / c: the same tensor scaled (c / x is not)
# ops that pick positions out of a tensor rather than pool them: features they give are not pooled features
SELECTIONS = {"__getitem__", "select", "narrow", "index_select", "gather", "take", "take_along_dim", "unbind", "split",
              "chunk", "tensor_split"}
# per module object, then per input shape (one image's): a structure read at one size is not another size's
_CACHE: weakref.WeakKeyDictionary[torch.nn.Module, dict[tuple[int, ...], ModelStructure]] = weakref.WeakKeyDictionary()


@dataclass
class LayerNode:
    path: str
    op: str  # conv | linear
    input_shape: tuple[int, ...]
    input_key: int  # layers with the same key read the same tensor
    roles: set[str] = field(default_factory=set)
    kernel: tuple[int, ...] = ()  # a convolution's kernel size


@dataclass
class ModelStructure:
    layers: list[LayerNode]  # execution order, first call of each module
    conv_bn: list[tuple[str, str]]  # (convolution, batch norm that reads its output directly)
    stages: dict[str, str]  # module path -> stem | stage N | head, for the modules that ran (see model_trunk)
    ops: dict[str, Op]  # module path -> the op it runs itself (module_ops), for modules that call functions
    never_ran: list[str]  # convolutions and linears the example input did not reach

    def paths(self, op: str | None = None, role: str | None = None) -> list[str]:
        return [n.path for n in self.layers if (op is None or n.op == op) and (role is None or role in n.roles)]

    def stage_layers(self) -> dict[str, list[str]]:
        """Convolutions and linears per stage label, labels in execution order."""
        found: dict[str, list[str]] = {}
        for node in self.layers:
            found.setdefault(self.stages.get(node.path, ""), []).append(node.path)
        return found

    @functools.cached_property
    def squeeze_excitation_modules(self) -> frozenset[str]:
        """Modules of squeeze-excitation blocks: each module that ran whose convolutions and linears are all
        squeeze-excitation layers (the block, its layers), and every module inside one (its gate, its activation)."""
        layers: dict[str, int] = {}
        excitation: dict[str, int] = {}
        for node in self.layers:
            parts = node.path.split(".")
            for depth in range(1, len(parts) + 1):
                owner = ".".join(parts[:depth])
                layers[owner] = layers.get(owner, 0) + 1
                excitation[owner] = excitation.get(owner, 0) + ("squeeze-excitation" in node.roles)
        blocks = {path for path, count in layers.items() if excitation[path] == count}
        return frozenset(path for path in self.stages if any(
            ".".join(path.split(".")[:depth]) in blocks for depth in range(1, path.count(".") + 2)))

    def structure_role(self, name: str) -> str | None:
        """The role the structure gives a layer named `name` (a module path, or modules fused, joined by " + "):
        "squeeze-excitation" where every module of it is one of a squeeze-excitation block, "" where it gives none;
        None where a part of the name is no module that ran (a function's node): the structure does not know it."""
        parts = name.split(" + ")
        if not all(p in self.stages for p in parts):
            return None
        return "squeeze-excitation" if all(p in self.squeeze_excitation_modules for p in parts) else ""

    def shared_inputs(self, paths: set[str]) -> list[list[str]]:
        """Groups of two or more of `paths` that read one tensor."""
        groups: dict[int, list[str]] = {}
        for node in self.layers:
            if node.path in paths:
                groups.setdefault(node.input_key, []).append(node.path)
        return [group for group in groups.values() if len(group) > 1]


def _tensors(value: Any) -> Iterator[Any]:
    if isinstance(value, (list, tuple)):
        for item in value:
            yield from _tensors(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _tensors(item)
    else:
        yield value


def model_structure(model: torch.nn.Module, example: torch.Tensor) -> ModelStructure:
    """Roles of `model`'s layers, from one forward pass on the first item of `example` (cached per module object and
    one item's shape).

    The pass runs at the study's own input size: a pooling that leaves a 3 x 3 map there leaves 1 x 1 on a smaller
    input, where it would read as global pooling.
    """
    by_shape = _CACHE.setdefault(model, {})
    shape = tuple(example.shape[1:])
    if shape not in by_shape:
        by_shape[shape] = _analyse(model, example[:1])
    return by_shape[shape]


class _Recorder(TorchFunctionMode):
    """One forward pass, recorded: module calls (hooks on every module), the functions each module calls
    itself, convolutions and linears, and which function produced each tensor from which."""

    def __init__(self, example: torch.Tensor) -> None:
        super().__init__()
        self.seq = 0
        self.stack: list[str] = []
        self.calls: dict[str, ModuleCall] = {}
        self.functions: dict[str, dict[str, float]] = {}  # module path -> function it called itself -> cost
        self.nodes: list[LayerNode] = []
        self.layer_seq: dict[str, int] = {}
        self.positions: dict[int, int] = {}
        self.pooled_input: dict[int, bool] = {}
        self.reads_input: dict[int, bool] = {}
        self.feeders: dict[int, set[int]] = {}
        self.frontier: dict[int, frozenset[int]] = {}  # id(tensor) -> the nearest layers upstream of it
        self.last_unpooled = -1
        self.conv_outputs: dict[int, str] = {}  # id(conv output) -> conv path
        self.bn_inputs: list[tuple[str, int]] = []
        self.attention: set[str] = set()
        self.made: dict[int, tuple[str, list[torch.Tensor]]] = {}
        self.made_at: dict[int, int] = {}  # id(tensor) -> sequence number of the call that made it
        self.written_at: dict[int, int] = {}  # id(tensor) -> sequence number of its last write (in place too)
        self.scope: dict[int, int] = {}  # id(tensor) -> start of the innermost module call that made it
        self.reduced_input: dict[str, torch.Tensor] = {}  # layer fed features pooled from positions -> pooled from
        self.layer_outputs: dict[int, str] = {}  # id(layer output) -> layer path
        self.layer_inputs: dict[int, torch.Tensor] = {}  # layer sequence number -> its input
        self.layer_output_ids: dict[int, int] = {}  # layer sequence number -> id(its output)
        self.gating: set[str] = set()  # layers whose pooled features gate the tensor they were pooled from (`gate`)
        self.derived: set[int] = {id(example)}  # tensors computed from the input
        self.keep: list[Any] = [example]  # tensors kept alive, so ids stay unique

    def tick(self) -> int:
        self.seq += 1
        return self.seq

    def __torch_function__(self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None) -> Any:
        result = func(*args, **(kwargs or {}))
        inputs = [t for t in _tensors((args, kwargs)) if isinstance(t, torch.Tensor)]
        computed = {id(t) for t in inputs if id(t) in self.derived}
        outputs = [t for t in _tensors(result) if isinstance(t, torch.Tensor)]
        if not computed or not outputs:
            return result
        seq, name = self.tick(), getattr(func, "__name__", "")
        if self.stack:
            own = self.functions.setdefault(self.stack[-1], {})
            own[name] = own.get(name, 0.0) + call_cost(name, [t.numel() for t in inputs], [t.numel() for t in outputs],
                                                       _kernel_size(args, kwargs))
        if len(computed) > 1 and name not in PASS_THROUGH:
            for path in self.stack:
                self.calls[path].merges += 1
        upstream = frozenset().union(*(self.frontier.get(i, frozenset()) for i in computed))
        for out in outputs:  # an in-place op (x += shortcut) returns its input: same producer, wider frontier
            self.frontier[id(out)] = upstream
            self.written_at[id(out)] = seq
            if not any(out is i for i in inputs):
                self.made[id(out)] = (name, inputs)
                self.made_at[id(out)] = seq
                self.scope[id(out)] = self.calls[self.stack[-1]].start if self.stack else 0
                self.derived.add(id(out))
                self.keep.append(out)
        if not _pooled_shape(outputs[0].shape):
            self.last_unpooled = seq
        if name in GATES:
            self.gate(inputs)
        return result

    def origin(self, tensor: torch.Tensor) -> torch.Tensor:
        """The tensor behind `tensor` that the first operation not a reshape, copy or dropout made (`made`)."""
        name, inputs = self.made.get(id(tensor), ("", []))
        while name in PASS_THROUGH and inputs:
            tensor = inputs[0]
            name, inputs = self.made.get(id(tensor), ("", []))
        return tensor

    def pooled_from(self, tensor: torch.Tensor) -> torch.Tensor | None:
        """The tensor with positions that pooled features `tensor` were pooled from: the one read by the op that
        made them, through ops on pooled features alone, where that op read more than pooled features, wrote fewer
        elements than it read (a reshape that folds positions into the batch pools nothing) and does not select
        positions (`SELECTIONS`); None where they were not pooled from positions."""
        while True:
            name, inputs = self.made.get(id(tensor), ("", []))
            source = next((t for t in inputs if id(t) in self.derived), None)
            if source is None:
                return None  # the model's input, or made from constants
            if not _pooled_shape(source.shape):
                return source if name not in SELECTIONS and tensor.numel() < source.numel() else None
            tensor = source

    def trunk_end(self, output_id: int | None) -> int:
        """Sequence number of the trunk's last op: where the model's output is pooled (logits), the latest op that
        made the features its classifiers (the layers nearest upstream of the output) read, through pooled features,
        reshapes and selections (`_features_made`), so a classifier applied to every position and reduced after
        (VOLO's aux_head, then a max over tokens) is the head's; else the last op whose output is not pooled."""
        output = next((t for t in self.keep if id(t) == output_id), None) if output_id is not None else None
        if output is None or not _pooled_shape(output.shape):
            return self.last_unpooled
        classifiers = [s for s in self.frontier.get(id(output), frozenset()) if self._classifies(s, output)]
        ends = [self._features_made(self.layer_inputs[s]) for s in classifiers]
        return max(ends, default=self.last_unpooled)

    def _classifies(self, seq: int, output: torch.Tensor) -> bool:
        """Whether layer `seq` classifies: it reads pooled features (a flat vector, a 1 x 1 map, a class token), or its
        output reaches the model's pooled `output` through pooling, reshapes and selections alone (a 1 x 1
        convolution classifying every position before a global pooling). The last layer of a trunk whose pooled
        features are the output (a model without a classifier) reads positions and meets a residual add, a
        normalization or an activation before the pooling: it classifies nothing."""
        if self.pooled_input.get(seq):
            return True
        target = self.layer_output_ids[seq]
        return any(id(t) == target for t in self._upstream([output], self._data_through_pooling))

    def _data_through_pooling(self, tensor: torch.Tensor) -> list[torch.Tensor]:
        """The data operand (the first: not a shape's or an index's tensor) of the pooling, reshape or selection that
        made `tensor`; none for any other op."""
        name, _ = self.made.get(id(tensor), ("", []))
        passes = function_op(name) == "pooling" or name in PASS_THROUGH or name in SELECTIONS
        return self._computed_inputs(tensor)[:1] if passes else []

    def _features_made(self, tensor: torch.Tensor) -> int:
        """When the features behind `tensor` were made: the latest sequence number at which the tensors with positions
        that `tensor` was computed from through pooled features, reshapes and selections alone were written (in place
        too: timm's ResNet adds its shortcut to, and applies its last ReLU on, the main path's tensor) (0: the
        input)."""
        ends = [t for t in self._upstream([tensor], self._feature_inputs) if not self._passes_features(t)]
        # each end's last write: an in-place residual add and ReLU finish the features after the shortcut's layers
        return max((self.written_at.get(id(t), self.made_at.get(id(t), 0)) for t in ends), default=0)

    def _feature_inputs(self, tensor: torch.Tensor) -> list[torch.Tensor]:
        """The computed inputs of the op that made `tensor` where features pass through it (`_passes_features`)."""
        return self._computed_inputs(tensor) if self._passes_features(tensor) else []

    def _passes_features(self, tensor: torch.Tensor) -> bool:
        """Whether `tensor` holds pooled features, or a reshape or selection made it (features pass through it)."""
        name, _ = self.made.get(id(tensor), ("", []))
        return _pooled_shape(tensor.shape) or name in PASS_THROUGH or name in SELECTIONS

    def gate(self, inputs: list[torch.Tensor]) -> None:
        """A multiply of two computed tensors: where one factor was computed, after the other was made, by layers fed
        features pooled from that other factor (or from what was computed from it), those layers gate it
        (`gating`: squeeze-excitation, ECA, selective kernel attention)."""
        computed = [t for t in inputs if id(t) in self.derived]
        if len(computed) != 2 or computed[0] is computed[1]:
            return
        for gated, factor in (computed, computed[::-1]):
            after = self.made_at.get(id(gated), 0)
            for path in self._layers_behind(factor, after):
                if self._computed_from(self.reduced_input[path], gated, after):
                    self.gating.add(path)

    def _layers_behind(self, tensor: torch.Tensor, after: int) -> set[str]:
        """Layers fed features pooled from positions whose outputs `tensor` was computed from, by calls after
        sequence number `after`."""
        reached = self._upstream([tensor], self._inputs_after(after))
        return {path for t in reached if self.made_at.get(id(t), 0) > after
                and (path := self.layer_outputs.get(id(t), "")) in self.reduced_input}

    def _computed_from(self, tensor: torch.Tensor, target: torch.Tensor, after: int) -> bool:
        """Whether `tensor` is `target` or was computed from it by calls after sequence number `after` (when `target`
        was made)."""
        return any(t is target for t in self._upstream([tensor], self._inputs_after(after)))

    def _upstream(self, starts: Iterable[torch.Tensor],
                  follow: Callable[[torch.Tensor], Iterable[torch.Tensor]]) -> Iterator[torch.Tensor]:
        """Each tensor reached from `starts` going upstream, once, depth first: `follow(tensor)` gives the tensors to
        go on to from it (none: the walk stops there)."""
        pending, seen = list(starts), set()
        while pending:
            current = pending.pop()
            if id(current) in seen:
                continue
            seen.add(id(current))
            yield current
            pending.extend(follow(current))

    def _computed_inputs(self, tensor: torch.Tensor) -> list[torch.Tensor]:
        """The inputs computed from the model's input of the op that made `tensor` (none for the input itself)."""
        return [t for t in self.made.get(id(tensor), ("", []))[1] if id(t) in self.derived]

    def _inputs_after(self, after: int) -> Callable[[torch.Tensor], list[torch.Tensor]]:
        """A walk's `follow` that goes on from tensors made after sequence number `after` only."""
        return lambda t: self._computed_inputs(t) if self.made_at.get(id(t), 0) > after else []

    def attention_output(self, source: torch.Tensor) -> bool:
        """Whether `source`, a linear's input, is attention's output (module docstring): a product of two activations
        computed from another such product inside the innermost module call around the linear that began before it,
        or fused attention."""
        made = self._through_add(self._unscaled(source))
        name, inputs = self.made.get(id(made), ("", []))
        if not _product(name, inputs, self.derived):
            return False
        if name in FUSED_ATTENTION:
            return True
        at = self.made_at[id(made)]
        since = next((self.calls[p].start for p in reversed(self.stack) if self.calls[p].start < at), 0)
        return self._product_behind(inputs, since)

    def _through_add(self, made: torch.Tensor) -> torch.Tensor:
        """`made`, or, where an add of two computed tensors made it, the operand that is (through reshapes) a product
        of two activations, where the other operand was made inside the module call that made the product
        (MViTv2's residual pooling: attn @ v + q); the residual stream, made before that call, or a part cut from it
        (`_selected_from`), is not followed."""
        name, inputs = self.made.get(id(made), ("", []))
        computed = [t for t in inputs if id(t) in self.derived]
        if name not in ADDS or len(computed) != 2:
            return made
        for operand, other in (computed, computed[::-1]):
            product = self._unscaled(operand)
            p_name, p_inputs = self.made.get(id(product), ("", []))
            if (_product(p_name, p_inputs, self.derived)
                    and self.made_at.get(id(self._selected_from(other)), 0) > self.scope.get(id(product), 0)):
                return product
        return made

    def _selected_from(self, tensor: torch.Tensor) -> torch.Tensor:
        """The tensor `tensor` was cut from (a chunk, a split, an index) or reshaped from, through every such op: a
        chunk of a module's input (EfficientViT-M's cascaded heads add one to the head before's output) is that
        input, made before the call."""
        name = self.made.get(id(tensor), ("", []))[0]
        while (name in SELECTIONS or name in PASS_THROUGH) and (computed := self._computed_inputs(tensor)):
            tensor = computed[0]
            name = self.made.get(id(tensor), ("", []))[0]
        return tensor

    def _unscaled(self, tensor: torch.Tensor) -> torch.Tensor:
        """`origin(tensor)`, and behind each multiply or divide of it by a constant (a number, or a tensor not computed
        from the input: attention's scale, CoaT's `self.scale * factor_att`) the tensor scaled, and its origin; a
        constant divided by it (`c / x`) is not it scaled."""
        made = self.origin(tensor)
        while True:
            name, inputs = self.made.get(id(made), ("", []))
            computed = self._computed_inputs(made)
            if not (name in SCALINGS and len(computed) == 1 and len(inputs) <= 2
                    and (name not in DIVISIONS or inputs[0] is computed[0])):
                return made
            made = self.origin(computed[0])

    def _product_behind(self, tensors: list[torch.Tensor], since: int) -> bool:
        """Whether any of `tensors` was computed, by calls after sequence number `since`, from a product of two
        activations."""
        reached = self._upstream([t for t in tensors if id(t) in self.derived], self._inputs_after(since))
        return any(self.made_at.get(id(t), 0) > since and _product(*self.made[id(t)], self.derived) for t in reached)

    def sources(self, tensor: torch.Tensor) -> set[int]:
        """`tensor` and the tensors it was reshaped, copied or dropped out from."""
        found = {id(tensor)}
        name, inputs = self.made.get(id(tensor), ("", []))
        while name in PASS_THROUGH and inputs:
            found.add(id(inputs[0]))
            name, inputs = self.made.get(id(inputs[0]), ("", []))
        return found

    def enter(self, path: str, args: tuple[Any, ...]) -> None:
        first = next((t for t in _tensors(args) if isinstance(t, torch.Tensor)), None)
        if path not in self.calls:
            self.calls[path] = ModuleCall(path, self.tick(),
                                          input_ids=self.sources(first) if first is not None else set())
        self.stack.append(path)

    def leave(self, path: str, module: torch.nn.Module, args: tuple[Any, ...], output: Any) -> None:
        self.stack.pop()
        call = self.calls[path]
        first = next((t for t in _tensors(output) if isinstance(t, torch.Tensor)), None)
        if call.end >= 0:
            return
        call.end = self.tick()
        if first is not None:
            call.output_id = id(first)
            self.keep.append(first)
        source = args[0] if args and isinstance(args[0], torch.Tensor) else None
        op = _op(module)
        if source is None:
            return
        if _is_bn(module):
            self.bn_inputs.append((path, id(source)))
        elif op is not None and first is not None:
            self._layer(path, op, source, first, call.end, tuple(getattr(module, "kernel_size", ())))

    def _layer(self, path: str, op: str, source: torch.Tensor, output: torch.Tensor, seq: int,
               kernel: tuple[int, ...]) -> None:
        node = LayerNode(path, op, tuple(source.shape), id(source), kernel=kernel if op == "conv" else ())
        self.nodes.append(node)
        self.layer_seq[path] = seq
        for owner in (*self.stack, path):
            self.calls[owner].layers.append(seq)
        channels = output.shape[1] if op == "conv" else output.shape[-1]
        self.positions[seq] = output.numel() // max(channels, 1)  # windows folded into the batch count too
        self.pooled_input[seq] = _pooled(node)
        pooled_from = self.pooled_from(source) if self.pooled_input[seq] else None
        if pooled_from is not None:
            self.reduced_input[path] = pooled_from
        self.layer_outputs[id(output)] = path
        self.layer_inputs[seq] = source
        self.layer_output_ids[seq] = id(output)
        self.feeders[seq] = set(self.frontier.get(id(source), frozenset()))
        # the model's input reaches it through no other layer (a convolution of an input-shaped map does not)
        self.reads_input[seq] = op == "conv" and id(source) in self.derived and not self.feeders[seq]
        self.frontier[id(output)] = frozenset({seq})
        if op == "conv":
            self.conv_outputs[id(output)] = path
        pointwise = op == "conv" and bool(kernel) and all(k == 1 for k in kernel)  # a linear over channels
        if (op == "linear" or pointwise) and self.attention_output(source):
            self.attention.add(path)


def _product(name: str, inputs: list[torch.Tensor], derived: set[int]) -> bool:
    """Whether a call of `name` on `inputs` is a product of two activations: a matmul of two computed tensors (no
    parameter among them), or fused attention."""
    return name in MATMULS and not any(isinstance(t, torch.nn.Parameter) for t in inputs) and (
        name in FUSED_ATTENTION or sum(id(t) in derived for t in inputs) >= 2)


def _kernel_size(args: tuple[Any, ...], kwargs: Any) -> tuple[int, ...]:
    """A pooling call's kernel size (its second argument or `kernel_size`), as a tuple; () where it has none."""
    size = (kwargs or {}).get("kernel_size", args[1] if len(args) > 1 else None)
    if isinstance(size, int):
        return (size,)
    if isinstance(size, (tuple, list)) and all(isinstance(k, int) for k in size):
        return tuple(size)
    return ()


def _pooled_shape(shape: torch.Size) -> bool:
    """At most one dimension past the batch above 1: pooled features, flat or as 1 x 1 maps."""
    return sum(d > 1 for d in shape[1:]) <= 1


def _analyse(model: torch.nn.Module, example: torch.Tensor) -> ModelStructure:
    example = example[:1].to(next(model.parameters()).device)
    recorder = _Recorder(example)
    handles = []
    for path, module in model.named_modules():
        handles.append(module.register_forward_pre_hook(lambda _m, args, path=path: recorder.enter(path, args)))
        handles.append(module.register_forward_hook(
            lambda m, args, output, path=path: recorder.leave(path, m, args, output)))
    with recorder:
        forward_once(model, example, handles)
    modules = dict(model.named_modules())
    record = TrunkRecord(
        calls=recorder.calls,
        children={
            path: [f"{path}.{name}" if path else name for name, _ in m.named_children()] for path, m in modules.items()
        },
        positions=recorder.positions, pooled_input=recorder.pooled_input, reads_input=recorder.reads_input,
        feeders=recorder.feeders,
        trunk_end=recorder.trunk_end(recorder.calls[""].output_id), head_roots=_hf_head_roots(model),
    )
    stages = module_stages(record)
    _assign_roles(recorder, stages)
    conv_bn = [(recorder.conv_outputs[key], bn) for bn, key in recorder.bn_inputs if key in recorder.conv_outputs]
    never = [p for p, m in modules.items() if _op(m) and p not in recorder.layer_seq]
    ops = {path: own_op(costs) for path, costs in recorder.functions.items()}
    return ModelStructure(recorder.nodes, conv_bn, stages, {p: op for p, op in ops.items() if op}, never)


def _op(module: torch.nn.Module) -> str | None:
    if isinstance(module, torch.nn.modules.conv._ConvNd):
        return "conv"
    if isinstance(module, torch.nn.Linear):
        return "linear"
    return None


def _is_bn(module: torch.nn.Module) -> bool:
    return isinstance(module, torch.nn.modules.batchnorm._BatchNorm)


def _hf_head_roots(model: torch.nn.Module) -> set[str] | None:
    """The children of a Hugging Face task model other than its base model: its head; None elsewhere."""
    for path, module in model.named_modules():
        base = getattr(module, "base_model", None)
        if isinstance(base, torch.nn.Module) and base is not module and hasattr(module, "base_model_prefix"):
            prefix = f"{path}." if path else ""
            return {prefix + name for name, child in module.named_children() if child is not base}
    return None


def _assign_roles(recorder: _Recorder, stages: dict[str, str]) -> None:
    first = stage_name(1)
    for node in recorder.nodes:
        stage = stages.get(node.path)
        if stage in (STEM, HEAD):
            node.roles.add(stage)
            continue
        if stage == first:
            node.roles.add("first-stage")
        if node.path in recorder.gating:
            node.roles.add("squeeze-excitation")
        if node.path in recorder.attention:
            node.roles.add("attention-output")


def _pooled(node: LayerNode) -> bool:
    """Whether the layer is fed pooled features (`_pooled_shape`): flat features, 1 x 1 maps, or one row of them
    (ECA's Conv1d reads the channels pooled from positions as (N, 1, C): C is channels there, not positions)."""
    return _pooled_shape(torch.Size(node.input_shape))
