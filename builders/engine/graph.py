"""A model's graph for the engine: torch.fx symbolic trace (shaped, builders.engine.shaped_tracer, where torch.fx alone
fails), with modules that cannot be traced kept as one PyTorch call each (and the reason), described as
`engine_lowering.OpNode`s."""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Any

import torch
import torch.fx

from builders.engine.lowering import CONV_1X1, DEPTHWISE_CONV, GLOBAL_AVG_POOL, OpNode
from builders.engine.shaped_tracer import ShapedTracer, bound_arguments, specs_of
from builders.models.hooks import forward_once
from builders.models.module_ops import function_op
from sessions.documents.errors import first_line

ACTIVATION_MODULES = {torch.nn.ReLU: "relu", torch.nn.SiLU: "swish", torch.nn.Sigmoid: "sigmoid",
                      torch.nn.ReLU6: "relu6", torch.nn.Hardswish: "hardswish", torch.nn.Hardsigmoid: "hardsigmoid",
                      torch.nn.Tanh: "tanh", torch.nn.LeakyReLU: "leaky_relu"}
ACTIVATION_FUNCTIONS = {torch.relu: "relu", torch.nn.functional.relu: "relu", torch.sigmoid: "sigmoid",
                        torch.nn.functional.sigmoid: "sigmoid", torch.nn.functional.silu: "swish",
                        torch.nn.functional.gelu: "gelu", torch.tanh: "tanh"}
ACTIVATION_METHODS = {"relu": "relu", "sigmoid": "sigmoid", "relu_": "relu", "sigmoid_": "sigmoid", "tanh": "tanh"}
NOOP_MODULES = (torch.nn.Identity, torch.nn.Dropout, torch.nn.Dropout2d)
POOL_MODULES = (torch.nn.MaxPool2d, torch.nn.AvgPool2d, torch.nn.AdaptiveAvgPool2d, torch.nn.AdaptiveMaxPool2d)
NORM_MODULES = (torch.nn.BatchNorm2d, torch.nn.LayerNorm, torch.nn.GroupNorm, torch.nn.BatchNorm1d)
ADD_FUNCTIONS = (operator.add, torch.add, operator.iadd)
CONCAT_FUNCTIONS = (torch.cat, torch.concat)
POOL_FUNCTIONS = (torch.nn.functional.adaptive_avg_pool2d, torch.nn.functional.max_pool2d,
                  torch.nn.functional.avg_pool2d, torch.mean)
SHUFFLE_NAMES = {"view", "reshape", "flatten", "permute", "transpose", "contiguous", "squeeze", "unsqueeze", "expand",
                 "getitem", "narrow", "unflatten", "roll", "repeat", "flip", "pad"}
# session op -> node kind; a functional convolution, linear or matmul stays a PyTorch op (its weights are no module's)
OP_KINDS = {"normalization": "norm", "pooling": "pool", "concat": "concat", "softmax": "softmax",
            "attention": "softmax", "elementwise": "elementwise", "shuffle": "shuffle", "conv": "conv_fn",
            "linear": "matmul", "matmul": "matmul"}
SPATIAL_DIMS = (frozenset((2, 3)), frozenset((-2, -1)))  # a mean over these of an image is a global average pool
FN_WORDS = {"truediv": "div", "itruediv": "div", "iadd": "add", "radd": "add", "imul": "mul", "rmul": "mul",
            "isub": "sub"}  # an operator's in-place or reflected name -> the op's
SOFTMAX_FUNCTIONS = (torch.softmax, torch.nn.functional.softmax, torch.nn.functional.scaled_dot_product_attention)


@dataclass
class TracedModel:
    module: torch.fx.GraphModule
    nodes: list[OpNode]
    leaves: dict[str, str]  # module path -> why it was not traced into


@dataclass
class RecordedRun:
    """What one run of a traced graph computed: `shapes`, each node's value's shape (nodes whose value is a tensor),
    and `values`, the values of the nodes asked for, kept (a 4-D one channels-last, as the engine holds
    activations)."""

    shapes: dict[str, tuple[int, ...]]
    values: dict[str, torch.Tensor]


def record_run(traced: TracedModel, example: torch.Tensor, keep: frozenset[str] = frozenset()) -> RecordedRun:
    """`traced` run once on `example` without gradients: every node's value's shape, and the values of `keep`."""
    recorded = RecordedRun({}, {})

    class Recorder(torch.fx.Interpreter):
        def run_node(self, node: torch.fx.Node) -> Any:
            value = super().run_node(node)
            if isinstance(value, torch.Tensor):
                recorded.shapes[node.name] = tuple(value.shape)
                if node.name in keep:
                    recorded.values[node.name] = (value.detach().clone(memory_format=torch.channels_last)
                                                  if value.dim() == 4 else value.detach().clone())
            return value

    with torch.no_grad():
        Recorder(traced.module).run(example)
    return recorded


def trace(model: torch.nn.Module, example: torch.Tensor) -> TracedModel:
    """`model` as a GraphModule: torch.fx's own trace where it works (the graph holds no shapes); else the shaped
    trace at `example`'s shape (builders.engine.shaped_tracer: shapes are constants, the graph computes the model at
    that shape only); else that trace with leaf modules where tracing into them failed, each with the reason. A model
    that does not trace at all becomes one leaf (the engine then runs it as one PyTorch call)."""
    example = example.to(device=_device_of(model), dtype=_float_dtype_of(model))
    arguments = bound_arguments(model, (example,), {})
    leaves: dict[str, str] = {}
    graph, _ = _attempt(model, set(), None)
    if graph is None:
        graph, _ = _attempt(model, set(), arguments)
    if graph is None:
        leaves = _untraceable(model, "", _module_inputs(model, example))
        graph, reason = _attempt(model, set(leaves), arguments)
        if graph is None:
            raise RuntimeError(f"torch.fx could not trace the model: {reason}")
    module = torch.fx.GraphModule(model, graph)
    return TracedModel(module, describe(module, leaves), leaves)


def _attempt(module: torch.nn.Module, leaves: set[str], arguments: dict[str, Any] | None) -> tuple[
        torch.fx.Graph | None, str]:
    """`module`'s graph with `leaves` kept whole (shaped where `arguments` are given), or None and why not."""
    try:
        return ShapedTracer(leaves, arguments).trace(module), ""
    except Exception as exc:  # noqa: BLE001  (any tracing failure: the caller looks for leaves)
        return None, first_line(exc)


def _untraceable(module: torch.nn.Module, path: str, inputs: dict[str, dict[str, Any]]) -> dict[str, str]:
    """The smallest modules under `module` that do not trace shaped, each with the reason; `inputs[path]` is what
    each module was called with (a module never called is not in the graph)."""
    if path and path not in inputs:
        return {}
    graph, reason = _attempt(module, set(), inputs.get(path, {}))
    if graph is not None:
        return {}
    found: dict[str, str] = {}
    for name, child in module.named_children():
        found.update(_untraceable(child, f"{path}.{name}" if path else name, inputs))
    relative = {key.removeprefix(f"{path}.") if path else key for key in found}
    if found and _attempt(module, relative, inputs.get(path, {}))[0] is not None:
        return found
    return {path: reason} if path else found


def _module_inputs(model: torch.nn.Module, example: torch.Tensor) -> dict[str, dict[str, Any]]:
    """Each module's forward arguments by name (tensors as TensorSpecs), from its first call in one run of
    `model` on `example`."""
    inputs: dict[str, dict[str, Any]] = {"": bound_arguments(model, (example,), {})}

    def hook(path: str, module: torch.nn.Module) -> Any:
        def record(_module: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
            inputs.setdefault(path, specs_of(bound_arguments(module, args, kwargs)))

        return record

    forward_once(model, example, [m.register_forward_pre_hook(hook(path, m), with_kwargs=True)
                                   for path, m in model.named_modules() if path])
    return inputs


def _device_of(model: torch.nn.Module) -> torch.device:
    return next((p.device for p in model.parameters()), torch.device("cpu"))


def _float_dtype_of(model: torch.nn.Module) -> torch.dtype:
    return next((p.dtype for p in model.parameters() if p.is_floating_point()), torch.float32)


def describe(module: torch.fx.GraphModule, leaves: dict[str, str]) -> list[OpNode]:
    modules = dict(module.named_modules())
    nodes = []
    for node in module.graph.nodes:
        args = tuple(dict.fromkeys(a.name for a in node.all_input_nodes))
        ordered = tuple(a.name for a in _flat_args(node))
        kind, act = _kind(node, modules)
        path = str(node.target) if node.op == "call_module" else _scope(node)
        label = str(node.target) if node.op == "call_module" else ""
        nodes.append(OpNode(node.name, kind, ordered or args, path, act, leaves.get(str(node.target)), label,
                            _fn(node, modules)))
    return nodes


def _fn(node: torch.fx.Node, modules: dict[str, torch.nn.Module]) -> str:
    """What `node` calls, as `OpNode.fn` states it: a global average pool, a 1x1 and a depthwise convolution by their
    arguments, else the function's or method's name without underscores (`__mul__`, `mul_` -> mul; `truediv` ->
    div) or the module's class name."""
    if node.op == "call_module":
        module = modules[str(node.target)]
        if isinstance(module, torch.nn.AdaptiveAvgPool2d) and _to_one(module.output_size):
            return GLOBAL_AVG_POOL
        if isinstance(module, torch.nn.Conv2d) and _pointwise_conv(module):
            return CONV_1X1
        if isinstance(module, torch.nn.Conv2d) and module.groups == module.in_channels == module.out_channels:
            return DEPTHWISE_CONV
        return type(module).__name__
    if node.op not in ("call_function", "call_method"):
        return ""
    name = str(node.target) if node.op == "call_method" else getattr(node.target, "__name__", "")
    word = FN_WORDS.get(name.strip("_"), name.strip("_"))
    if word == "mean" and _dims(node) in SPATIAL_DIMS:
        return GLOBAL_AVG_POOL
    size = node.args[1] if len(node.args) > 1 else node.kwargs.get("output_size")
    if word == "adaptive_avg_pool2d" and _to_one(size):
        return GLOBAL_AVG_POOL
    return word


def _dims(node: torch.fx.Node) -> frozenset[int] | None:
    """The dimensions a `mean` call reduces, where they are constants."""
    dims = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim")
    if isinstance(dims, int):
        return frozenset((dims,))
    if isinstance(dims, (tuple, list)) and all(isinstance(d, int) for d in dims):
        return frozenset(dims)
    return None


def _to_one(size: Any) -> bool:
    """Whether an adaptive pool's output size is 1x1."""
    return size == 1 or (isinstance(size, (tuple, list)) and list(size) == [1, 1])


def _pointwise_conv(conv: torch.nn.Conv2d) -> bool:
    return (tuple(conv.kernel_size) == (1, 1) and tuple(conv.stride) == (1, 1) and conv.padding in ((0, 0), 0)
            and tuple(conv.dilation) == (1, 1) and conv.padding_mode == "zeros")


def _flat_args(node: torch.fx.Node) -> list[torch.fx.Node]:
    found: list[torch.fx.Node] = []
    torch.fx.node.map_arg((node.args, node.kwargs), found.append)
    return found


def _scope(node: torch.fx.Node) -> str:
    stack = node.meta.get("nn_module_stack") or {}
    if not stack:
        return ""
    last = list(stack.values())[-1]
    return str(last[0] if isinstance(last, tuple) else last)


def _kind(node: torch.fx.Node, modules: dict[str, torch.nn.Module]) -> tuple[str, str | None]:
    if node.op == "placeholder":
        return "input", None
    if node.op == "output":
        return "output", None
    if node.op == "get_attr":
        return "const", None
    if node.op == "call_module":
        return _module_kind(modules[str(node.target)])
    tensors = [a for a in node.args if isinstance(a, torch.fx.Node)]
    if node.op == "call_function":
        if node.target in ADD_FUNCTIONS and len(tensors) == 2 and not node.kwargs:
            return "add", None
        if node.target in ACTIVATION_FUNCTIONS and not (node.target is torch.nn.functional.gelu and
                                                        node.kwargs.get("approximate", "none") != "none"):
            return "act", ACTIVATION_FUNCTIONS[node.target]
        if node.target in CONCAT_FUNCTIONS:
            return "concat", None
        if node.target in POOL_FUNCTIONS:
            return "pool", None
        if node.target in SOFTMAX_FUNCTIONS:
            return "softmax", None
        return _named_kind(getattr(node.target, "__name__", ""))
    if node.op == "call_method":
        if node.target in ("add", "add_") and len(tensors) == 2:
            return "add", None
        if node.target in ACTIVATION_METHODS:
            return "act", ACTIVATION_METHODS[str(node.target)]
        if node.target == "mean":
            return "pool", None
        if node.target == "softmax":
            return "softmax", None
        return _named_kind(str(node.target))
    return "other", None


def _named_kind(function: str) -> tuple[str, str | None]:
    """The kind of any other torch function or tensor method, from the op builders.models.module_ops gives its name
    (`batch_norm` is a norm, `max_pool2d` a pool, `mul` elementwise); a view or copy of the data (`reshape`,
    `getitem`) is a shuffle; "other" where neither says (shape arithmetic, asserts: no kernel)."""
    if function in SHUFFLE_NAMES:
        return "shuffle", None
    op = function_op(function)
    if op == "activation":
        return "act", None  # never fused: the functions the conv graph fuses are recognised above, arguments and all
    return OP_KINDS.get(op, "other") if op else "other", None


def _module_kind(module: torch.nn.Module) -> tuple[str, str | None]:
    if isinstance(module, torch.nn.Conv2d):
        return "conv", None
    if isinstance(module, torch.nn.Linear):
        return "linear", None
    if isinstance(module, NOOP_MODULES):
        return "noop", None
    if isinstance(module, torch.nn.GELU):
        return "act", "gelu" if module.approximate == "none" else "gelu_tanh"
    for cls, word in ACTIVATION_MODULES.items():
        if type(module) is cls:
            return "act", word
    if isinstance(module, POOL_MODULES):
        return "pool", None
    if isinstance(module, NORM_MODULES):
        return "norm", None
    if isinstance(module, torch.nn.Softmax):
        return "softmax", None
    return "other", None
