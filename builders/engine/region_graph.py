"""A fusion region (builders.engine.fusion_regions) as one function of tensors, for Inductor to compile once per
signature: its values from outside, then its layers' weights, are the function's inputs, so regions of one shape
share the compiled code whatever their weights; it returns the region's output, or a tuple of its outputs where
several values leave it, each laid out as the engine's steps laid it out (`laid_out`, and `as_recorded` on the
compiled code's outputs for the strides of dimensions of size 1). A module with weights is
called as its functional form (a convolution as `F.conv2d` of its weight and bias, a normalization as `F.batch_norm`
of its statistics); a module without tensors (an activation) is called as it is; functions and methods are copied
as traced. Constants the engine's forward made (a shape read as a value) are written into the function."""

from __future__ import annotations

import hashlib
import inspect
import itertools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
import torch.fx
import torch.nn.functional as F

from builders.engine.fusion_regions import Region
from builders.engine.graph import TracedModel
from builders.engine.plans import FUSED_PREFIX
from builders.engine.region_artifacts import aten_graph, compile_region
from builders.engine.shaped_tracer import TensorSpec

BATCH_NORMS = (torch.nn.BatchNorm1d, torch.nn.BatchNorm2d)
Weights = list[torch.fx.Node | None]  # a module's tensors as the function's inputs (None: the module has none there)


@dataclass
class Subgraph:
    """A region as a function of its values from outside (`inputs`, by name) then its layers' tensors (`tensors`);
    `signature`: what decides the compiled code and its time (a timing-cache key, `plans.FUSED_PREFIX`); `strides`:
    what `as_recorded` gives each output of the compiled code."""

    module: torch.fx.GraphModule
    inputs: tuple[str, ...]
    tensors: tuple[torch.Tensor, ...]
    signature: str
    strides: tuple[tuple[int, ...] | None, ...]  # each output's strides as the steps recorded them (None: no tensor)


def subgraph(traced: TracedModel, region: Region, specs: Mapping[str, Any]) -> Subgraph | str:
    """`region` of `traced` as a function (`Subgraph`), or why it cannot be one: a value from outside that is neither a
    tensor nor a constant, a module holding tensors the function cannot pass, an output the engine's steps laid out
    so that elements share memory (a broadcast view: no function's output can be laid out so, and its readers were
    built for that layout). `specs`: the spec of each value from outside and of each output (`TensorSpec`, or the
    constant itself)."""
    for name in region.outputs:
        spec = specs.get(name)
        if isinstance(spec, TensorSpec) and not _apart(spec.shape, spec.stride):
            return f"{name} is a view whose elements share memory (strides {spec.stride})"
    fx_nodes = {node.name: node for node in traced.module.graph.nodes}
    graph, root = torch.fx.Graph(), torch.nn.Module()
    values: dict[str, Any] = {}
    inputs: list[str] = []
    for name in region.inputs:
        spec = specs.get(name)
        if isinstance(spec, TensorSpec):
            values[name] = graph.placeholder(f"input_{len(inputs)}")
            inputs.append(name)
        elif _constant(spec):
            values[name] = tuple(spec) if isinstance(spec, torch.Size) else spec
        else:
            return f"{name} is neither a tensor nor a constant ({type(spec).__name__})"
    modules = {name: traced.module.get_submodule(str(fx_nodes[name].target)) for name in region.nodes
               if fx_nodes[name].op == "call_module"}
    tensors: list[torch.Tensor] = []
    weights: dict[str, Weights] = {}
    for name, module in modules.items():
        held = module_tensors(module)
        if isinstance(held, str):
            return f"{name}: {held}"
        weights[name] = []
        for tensor in held:
            weights[name].append(None if tensor is None else graph.placeholder(f"weight_{len(tensors)}"))
            tensors += [] if tensor is None else [tensor.detach()]
    alias = {n.name: n.args[0] for n in traced.nodes if n.kind == "noop" and n.args}

    def value(node: torch.fx.Node) -> Any:
        name = node.name
        while name in alias:
            name = alias[name]
        return values[name]

    for name in region.nodes:
        node = fx_nodes[name]
        args, kwargs = torch.fx.node.map_arg(node.args, value), torch.fx.node.map_arg(node.kwargs, value)
        if node.op == "call_module":
            values[name] = _call_module(graph, root, modules[name], args, kwargs, weights[name])
        else:
            values[name] = graph.create_node(node.op, node.target, args, kwargs)
    outputs = [_laid_out_as(graph, values[name], specs.get(name)) for name in region.outputs]
    graph.output(outputs[0] if len(outputs) == 1 else tuple(outputs))  # several: a tuple, in `outputs`' order
    module = torch.fx.GraphModule(root, graph)
    strides = tuple(spec.stride if isinstance(spec, TensorSpec) else None for spec in map(specs.get, region.outputs))
    return Subgraph(module, tuple(inputs), tuple(tensors), _signature(region, module, [specs[n] for n in inputs],
                                                                      tensors), strides)


def _laid_out_as(graph: torch.fx.Graph, value: Any, spec: Any) -> Any:
    """`value` (an output of the region's function) returned in the layout `spec` records for it, where it records
    one: the layout the engine's steps gave that value, which the steps and compiled regions reading it were built
    for (a compiled region asserts the strides it was compiled for). The function's ops need not give that layout
    (the engine's convolutions write NHWC whatever their input's layout; `F.conv2d` follows its input's)."""
    if not isinstance(spec, TensorSpec):
        return value
    return graph.call_function(laid_out, (value, spec.stride))


def _apart(shape: tuple[int, ...], stride: tuple[int, ...]) -> bool:
    """Whether `stride` lays `shape` out nested (dimensions of size 1 ignored): each stride, smallest first, past the
    span of the smaller ones (gaps allowed, as a slice's), so every element has memory of its own. Layouts that are
    not nested yet do not overlap are rare enough to be refused with the overlapping ones."""
    reach = 1
    for held, size in sorted((held, size) for size, held in zip(shape, stride, strict=True) if size != 1):
        if held < reach:
            return False
        reach = held * size
    return True


def _constant(value: Any) -> bool:
    """Whether `value` can be written into the function: a number, a bool, None, or a tuple of those."""
    if isinstance(value, (tuple, list)):
        return all(_constant(v) for v in value)
    return value is None or isinstance(value, (int, float, bool))


def module_tensors(module: torch.nn.Module) -> list[torch.Tensor | None] | str:
    """The tensors the function passes for `module`, in the order `_call_module` reads them (None where the module
    has none there), [] for a module without tensors, or why it cannot be passed."""
    if isinstance(module, torch.nn.Conv2d):
        if module.padding_mode != "zeros":
            return f"a convolution with padding mode {module.padding_mode}"
        return [module.weight, module.bias]
    if isinstance(module, torch.nn.Linear):
        return [module.weight, module.bias]
    if isinstance(module, BATCH_NORMS):
        if module.training or module.running_mean is None:
            return "a BatchNorm without running statistics in eval mode"
        return [module.running_mean, module.running_var, module.weight, module.bias]
    if isinstance(module, (torch.nn.LayerNorm, torch.nn.GroupNorm)):
        return [module.weight, module.bias]
    if next(module.parameters(), None) is None and next(module.buffers(), None) is None:
        return []
    return f"a {type(module).__name__} holds tensors a fused region does not pass"


def _call_module(graph: torch.fx.Graph, root: torch.nn.Module, module: torch.nn.Module, args: Any, kwargs: Any,
                 weights: Weights) -> torch.fx.Node:
    """The node that computes what `module` computes on `args`, reading its tensors from `weights`."""
    if isinstance(module, torch.nn.Conv2d):
        return graph.call_function(F.conv2d, (args[0], *weights, module.stride, module.padding, module.dilation,
                                              module.groups))
    if isinstance(module, torch.nn.Linear):
        return graph.call_function(folded_linear, (args[0], *weights))
    if isinstance(module, BATCH_NORMS):
        return graph.call_function(F.batch_norm, (args[0], *weights, False, 0.0, module.eps))
    if isinstance(module, torch.nn.LayerNorm):
        return graph.call_function(F.layer_norm, (args[0], module.normalized_shape, *weights, module.eps))
    if isinstance(module, torch.nn.GroupNorm):
        return graph.call_function(F.group_norm, (args[0], module.num_groups, *weights, module.eps))
    name = f"module_{len(list(root.children()))}"
    root.add_module(name, module)
    return graph.call_module(name, args, kwargs)


def folded_linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """`F.linear(x, weight, bias)`, with `x`'s leading dimensions merged into one first wherever that needs no copy,
    as eager PyTorch folds them (one GEMM). Compiled, `F.linear` of a transposed view with a leading dimension of 1
    (SegFormer's `flatten(2).transpose(1, 2)` at batch 1) and weights that do not require grad is decomposed into a
    batched matmul of the broadcast weight, which Inductor may rewrite as pointwise code: the decomposition's fold
    test (`torch._decomp.decompositions.matmul`) refuses such an input, which eager PyTorch views as a matrix.

    Traced symbolically (as a region's function is when unpickled in a compile worker) it is one call, as `F.linear`
    is: its shape test cannot run on a proxy."""
    if torch.overrides.has_torch_function((x, weight, bias)):
        return torch.overrides.handle_torch_function(folded_linear, (x, weight, bias), x, weight, bias)
    if x.dim() > 2 and _merge_without_copy(tuple(x.shape[:-1]), tuple(x.stride()[:-1])):
        folded = F.linear(x.reshape(-1, x.shape[-1]), weight, bias)
        return folded.view(*x.shape[:-1], folded.shape[-1])
    return F.linear(x, weight, bias)


def laid_out(x: torch.Tensor, stride: tuple[int, ...]) -> torch.Tensor:
    """`x` with strides `stride`: `x` itself where its strides are those (dimensions of size 1 ignored: any stride
    lays them out alike), else a copy so laid out (compiled, Inductor writes it in the store of the kernel computing
    `x` where that kernel is its own, and, as seen on the CPU, as a pass of its own after an external kernel such as a
    convolution's: the fused tactic's time holds it either way). Traced symbolically it is one call (see
    `folded_linear`)."""
    if torch.overrides.has_torch_function((x,)):
        return torch.overrides.handle_torch_function(laid_out, (x,), x, stride)
    if all(size == 1 or have == want for size, have, want in zip(x.shape, x.stride(), stride, strict=True)):
        return x
    return torch.empty_strided(x.shape, stride, dtype=x.dtype, device=x.device).copy_(x)


def as_recorded(value: Any, stride: tuple[int, ...] | None) -> Any:
    """`value` (an output of a region's compiled code, laid out as recorded in every dimension of more than one
    element: `laid_out`) as a view with exactly the recorded `stride`, those of dimensions of size 1 too: compiled code
    keeps only the others, and a size-1 dimension's stride moves no element, yet the layout of what reads the value
    follows it (PyTorch's memory-format heuristic reads a batch of 1's stride: a convolution then writes another
    layout than the one a compiled region reading it was compiled for). Applied outside the compiled code, so Inductor
    never reinterprets a buffer whose layout it chose. `value` itself where its strides are those already or `stride`
    is None; a copy so laid out (`laid_out`) where a dimension of more than one element is laid out otherwise
    (reinterpreting it would misread it; not seen: compiled code keeps those strides)."""
    if stride is None or not isinstance(value, torch.Tensor) or value.stride() == stride:
        return value
    return laid_out(value, stride).as_strided(value.shape, stride)


def _merge_without_copy(sizes: tuple[int, ...], strides: tuple[int, ...]) -> bool:
    """Whether dimensions of `sizes` and `strides` view as one (dimensions of size 1 ignored: any stride merges)."""
    kept = [(size, stride) for size, stride in zip(sizes, strides, strict=True) if size != 1]
    return all(outer == inner * size for (_, outer), (size, inner) in itertools.pairwise(kept))


def _signature(region: Region, module: torch.fx.GraphModule, inputs: list[TensorSpec],
               tensors: list[torch.Tensor]) -> str:
    """The timing-cache key of a region's function: its kind and first input, then a digest of what decides the
    compiled code and its time (the function's code, its outputs' layouts written in it, how it is compiled and the
    source of the functions it calls here, the modules it calls, every input's shape, strides and dtype, torch's
    version)."""
    held = [TensorSpec.of(t).words() for t in tensors]
    text = "\n".join([module.code, inspect.getsource(aten_graph), inspect.getsource(compile_region),
                      inspect.getsource(folded_linear), inspect.getsource(laid_out),
                      inspect.getsource(_merge_without_copy), *map(repr, module.children()),
                      *(s.words() for s in inputs), *held, torch.__version__])
    first = inputs[0].words().split(" s(")[0] if inputs else "-"
    return f"{FUSED_PREFIX}{region.kind} {first} g={hashlib.sha256(text.encode()).hexdigest()[:16]}"
