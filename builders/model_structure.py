"""The structural roles of a model's convolutions and linears, found by running it once, never from names.

One forward pass on an example input records, in execution order, every convolution and linear
(input shape, input tensor) and which operation produced each tensor. From that:
- stages: timm's `feature_info` (the first entry that holds layers and not `pretrained_cfg['first_conv']`
  is the first stage); other models have none;
- stem: the layers that run before the first stage's first layer; without stages, the layers that read
  the model's input;
- head: what timm runs in `forward_head`; for Hugging Face models what lies outside `base_model`;
  otherwise the trailing layers fed flat (N, C) features;
- squeeze-excitation: a convolution fed a 1 x 1 map, or a linear fed flat (N, C) features, outside the head;
- attention output projection: a linear fed (through reshapes) the product of two activations
  (softmax(QK) @ V, or scaled_dot_product_attention).
Layers that read the very same tensor (key and value) are recorded as sharing an input.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

PASS_THROUGH = {"view", "reshape", "permute", "transpose", "contiguous", "flatten", "dropout", "clone", "to",
                "float", "half", "type", "unflatten", "squeeze", "unsqueeze"}
MATMULS = {"matmul", "bmm", "__matmul__", "scaled_dot_product_attention", "einsum", "baddbmm"}
SMALL_SIDE = 64
_CACHE: weakref.WeakKeyDictionary[torch.nn.Module, ModelStructure] = weakref.WeakKeyDictionary()


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
    first_stage: str | None  # module path, where the model has stages
    never_ran: list[str]  # convolutions and linears the example input did not reach

    def paths(self, op: str | None = None, role: str | None = None) -> list[str]:
        return [n.path for n in self.layers if (op is None or n.op == op) and (role is None or role in n.roles)]

    def shared_inputs(self, paths: set[str]) -> list[list[str]]:
        """Groups of two or more of `paths` that read one tensor."""
        groups: dict[int, list[str]] = {}
        for node in self.layers:
            if node.path in paths:
                groups.setdefault(node.input_key, []).append(node.path)
        return [group for group in groups.values() if len(group) > 1]


class _Producers(TorchFunctionMode):
    """Which function produced each tensor, and from which tensors (tensors kept alive: ids stay unique)."""

    def __init__(self) -> None:
        super().__init__()
        self.made: dict[int, tuple[str, list[torch.Tensor]]] = {}
        self.keep: list[Any] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        inputs = [t for t in _tensors((args, kwargs)) if isinstance(t, torch.Tensor)]
        name = getattr(func, "__name__", "")
        for out in _tensors(result):
            if isinstance(out, torch.Tensor) and not any(out is t for t in inputs):
                self.made[id(out)] = (name, inputs)
                self.keep.append(out)
        return result

    def origin(self, tensor: torch.Tensor) -> tuple[str, list[torch.Tensor]]:
        """The first operation behind `tensor` that is not a reshape, copy or dropout."""
        name, inputs = self.made.get(id(tensor), ("", []))
        while name in PASS_THROUGH and inputs:
            name, inputs = self.made.get(id(inputs[0]), ("", []))
        return name, inputs


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
    """Roles of `model`'s layers, from one forward pass (cached per module object).

    The pass runs on `example` shrunk to 64 x 64 where the model takes that (a stride-32 network still
    sees 2 x 2 maps, so only pooled features are 1 x 1), else on `example` as it is.
    """
    if model not in _CACHE:
        small = example[:1, :, :SMALL_SIDE, :SMALL_SIDE] if example.dim() == 4 else example[:1]
        try:
            _CACHE[model] = _analyse(model, small)
        except (RuntimeError, AssertionError, ValueError):  # a fixed input size (ViT): the model's own
            _CACHE[model] = _analyse(model, example[:1])
    return _CACHE[model]


@dataclass
class _Trace:
    nodes: list[LayerNode] = field(default_factory=list)
    outputs: dict[int, str] = field(default_factory=dict)  # id(conv output) -> conv path
    bn_inputs: list[tuple[str, int]] = field(default_factory=list)
    attention: set[str] = field(default_factory=set)
    head: set[str] = field(default_factory=set)
    in_head: bool = False


def _analyse(model: torch.nn.Module, example: torch.Tensor) -> ModelStructure:
    trace = _Trace()
    producers = _Producers()
    handles = [module.register_forward_hook(_hook(path, module, trace, producers))
               for path, module in model.named_modules() if _op(module) or _is_bn(module)]
    restore = _mark_timm_head(model, trace)
    try:
        with torch.no_grad(), producers:
            model(example[:1].to(next(model.parameters()).device))
    finally:
        for handle in handles:
            handle.remove()
        restore()
    modules = dict(model.named_modules())
    seen = {n.path for n in trace.nodes}
    first_stage = _first_stage(model, modules)
    _assign_roles(model, trace, first_stage, example)
    conv_bn = [(trace.outputs[key], bn) for bn, key in trace.bn_inputs if key in trace.outputs]
    never = [p for p, m in modules.items() if _op(m) and p not in seen]
    return ModelStructure(trace.nodes, conv_bn, first_stage, never)


def _op(module: torch.nn.Module) -> str | None:
    if isinstance(module, torch.nn.modules.conv._ConvNd):
        return "conv"
    if isinstance(module, torch.nn.Linear):
        return "linear"
    return None


def _is_bn(module: torch.nn.Module) -> bool:
    return isinstance(module, torch.nn.modules.batchnorm._BatchNorm)


def _hook(path: str, module: torch.nn.Module, trace: _Trace, producers: _Producers):
    op = _op(module)

    def record(_module: torch.nn.Module, args: tuple, output: Any) -> None:
        source = args[0]
        if op is None:
            trace.bn_inputs.append((path, id(source)))
            return
        if any(n.path == path for n in trace.nodes):
            return
        kernel = tuple(module.kernel_size) if op == "conv" else ()
        trace.nodes.append(LayerNode(path, op, tuple(source.shape), id(source), kernel=kernel))
        producers.keep.append(output)
        if op == "conv":
            trace.outputs[id(output)] = path
        if trace.in_head:
            trace.head.add(path)
        name, inputs = producers.origin(source)
        if op == "linear" and name in MATMULS and sum(isinstance(t, torch.nn.Parameter) for t in inputs) == 0:
            trace.attention.add(path)

    return record


def _mark_timm_head(model: torch.nn.Module, trace: _Trace):
    """Wraps timm's `forward_head` so the layers it runs are marked; returns the undo."""
    if not (hasattr(model, "forward_head") and hasattr(model, "pretrained_cfg")):
        return lambda: None
    original = model.forward_head

    def forward_head(*args, **kwargs):
        trace.in_head = True
        try:
            return original(*args, **kwargs)
        finally:
            trace.in_head = False

    model.forward_head = forward_head  # type: ignore[method-assign]
    return lambda: delattr(model, "forward_head")


def _first_stage(model: torch.nn.Module, modules: dict[str, torch.nn.Module]) -> str | None:
    info = getattr(model, "feature_info", None)
    entries = info.get_dicts() if hasattr(info, "get_dicts") else info
    if not isinstance(entries, list):
        return None
    first_conv = (getattr(model, "pretrained_cfg", None) or {}).get("first_conv") or ""
    first_convs = {first_conv} if isinstance(first_conv, str) else set(first_conv)
    for entry in entries:
        path = entry["module"]
        inside = [p for p, m in modules.items() if _op(m) and (p == path or p.startswith(path + "."))]
        if inside and not first_convs.intersection(inside):
            return path
    return None


def _hf_head_prefix(model: torch.nn.Module) -> tuple[str, str] | None:
    """(task model path, base model path) of a Hugging Face model inside `model`."""
    for path, module in model.named_modules():
        base = getattr(module, "base_model", None)
        if isinstance(base, torch.nn.Module) and base is not module and hasattr(module, "base_model_prefix"):
            inner = next(p for p, m in module.named_modules() if m is base)
            return path, ".".join(filter(None, (path, inner)))
    return None


def _inside(path: str, parent: str) -> bool:
    return not parent or path == parent or path.startswith(parent + ".")


def _assign_roles(model: torch.nn.Module, trace: _Trace, first_stage: str | None, example: torch.Tensor) -> None:
    nodes = trace.nodes
    hf = _hf_head_prefix(model)
    if hf is not None:
        trace.head = {n.path for n in nodes if _inside(n.path, hf[0]) and not _inside(n.path, hf[1])}
    elif not trace.head and not hasattr(model, "pretrained_cfg"):
        for node in reversed(nodes):
            if len(node.input_shape) != 2:
                break
            trace.head.add(node.path)
    stage_start = next((i for i, n in enumerate(nodes) if first_stage and _inside(n.path, first_stage)), None)
    for index, node in enumerate(nodes):
        if node.path in trace.head:
            node.roles.add("head")
            continue
        if (stage_start is not None and index < stage_start) or (stage_start is None and _reads_input(node, example)):
            node.roles.add("stem")
            continue
        if first_stage and _inside(node.path, first_stage):
            node.roles.add("first-stage")
        if _pooled(node):
            node.roles.add("squeeze-excitation")
        if node.path in trace.attention:
            node.roles.add("attention-output")


def _reads_input(node: LayerNode, example: torch.Tensor) -> bool:
    return node.op == "conv" and node.input_shape[1:] == tuple(example.shape[1:])


def _pooled(node: LayerNode) -> bool:
    if node.op == "conv":
        return len(node.input_shape) > 2 and all(d == 1 for d in node.input_shape[2:])
    return len(node.input_shape) == 2
