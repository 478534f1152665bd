"""Convolutions and linear layers of derived classes whose forward is their base class's operation, made instances
of the base class: what every graph the tool builds from a model runs.

Two kinds qualify, each read from the layer's traced forward, never from its class name:

- **weight computed at every call**: weight standardization (timm's `StdConv2d` in BiT's ResNetV2,
  `ScaledStdConv2d` in the NF-Nets) normalizes a convolution's weight in its forward, from its weight, gain and scale
  alone: the input never reaches that computation. TensorRT's builder folds such a subgraph of constants into the
  layer's weights (constant folding), so the engine runs a plain convolution; an engine that lowered the forward as
  written would run the normalization as layers of its own at every call, and the convolution as a PyTorch op
  without the engine's tactics.
- **its own weight, its own forward**: a class derived from `torch.nn.Linear` or `torch.nn.Conv2d` that overrides
  `forward` only to call the same operation on its own weight and bias (timm's `Linear` in classifier heads).
  ModelOpt gives such a class no quantizer (it converts the classes it knows and those that inherit their
  forward), so an FP8 recipe that selects it would run it unquantized; exported to ONNX it is the base operation,
  which TensorRT quantizes.

The forward must trace to one input and the base operation of that input as it came (`torch.conv2d` or
`torch.nn.functional.linear`), its weight, bias and settings computed without the input (`_plain_form`). Any other
(input padded or clamped first, an output activated, a weight read from the input or drawn anew at each call) is
left as it is.
"""

from __future__ import annotations

import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import torch
import torch.fx


class PlainLayer(NamedTuple):
    """A layer `plain_layers` made an instance of its base class."""

    path: str
    cls: str  # the class it was an instance of
    computes_weight: bool  # True: its weight or bias was computed at every call; False: its own, as held


@dataclass(frozen=True)
class _Base:
    """A base class whose derived classes may be made plain: the function its forward traces to, that function's
    parameters in order (the input first) and their defaults, the instance of the computed weight and settings,
    and a test input for it."""

    cls: type[torch.nn.Module]
    function: Callable[..., torch.Tensor]
    parameters: tuple[str, ...]
    defaults: dict[str, Any]
    make: Callable[[dict[str, Any]], torch.nn.Module]
    example: Callable[[torch.nn.Module, torch.Generator], torch.Tensor]


def _conv2d(values: dict[str, Any]) -> torch.nn.Conv2d:
    weight, groups = values["weight"], values["groups"]
    return torch.nn.Conv2d(weight.shape[1] * groups, weight.shape[0], tuple(weight.shape[2:]), values["stride"],
                           values["padding"], values["dilation"], groups, values["bias"] is not None,
                           device=weight.device, dtype=weight.dtype)


def _image(layer: torch.nn.Module, generator: torch.Generator) -> torch.Tensor:
    conv = typing.cast(torch.nn.Conv2d, layer)
    size = max(8, *(d * (k - 1) + 1 for d, k in zip(conv.dilation, conv.kernel_size, strict=True)))
    return torch.randn(1, conv.in_channels, size, size, generator=generator)


def _linear(values: dict[str, Any]) -> torch.nn.Linear:
    weight = values["weight"]
    return torch.nn.Linear(weight.shape[1], weight.shape[0], values["bias"] is not None, device=weight.device,
                           dtype=weight.dtype)


def _rows(layer: torch.nn.Module, generator: torch.Generator) -> torch.Tensor:
    return torch.randn(2, 3, typing.cast(torch.nn.Linear, layer).in_features, generator=generator)


BASES = (
    _Base(torch.nn.Conv2d, torch.conv2d, ("input", "weight", "bias", "stride", "padding", "dilation", "groups"),
          {"bias": None, "stride": 1, "padding": 0, "dilation": 1, "groups": 1}, _conv2d, _image),
    _Base(torch.nn.Linear, torch.nn.functional.linear, ("input", "weight", "bias"), {"bias": None}, _linear, _rows),
)


def plain_layers(module: torch.nn.Module) -> list[PlainLayer]:
    """Replaces in `module` each layer of a derived class whose forward is its base class's operation (module
    docstring) by the base class's instance of the weight, bias and settings it computes (on its device, in its
    dtype; its own weight and bias shared, not copied); returns those replaced, in module order. The replacement gives
    the outputs the original gives: a layer whose plain form does not match it on a test input is left as it is."""
    replaced = []
    for path, layer in list(module.named_modules()):
        base = next((b for b in BASES if isinstance(layer, b.cls)), None)
        if not path or base is None or type(layer).forward is base.cls.forward:
            continue  # the module itself cannot be replaced in place; an inherited forward is the base's
        plain = _plain_form(layer, base)
        if plain is not None:
            module.set_submodule(path, plain[0])
            replaced.append(PlainLayer(path, type(layer).__name__, plain[1]))
    return replaced


def plain_layers_notes(layers: list[PlainLayer]) -> list[str]:
    """A variant's notes on the layers `plain_layers` made plain in its model (none where there are none)."""
    computed = [layer for layer in layers if layer.computes_weight]
    own = [layer for layer in layers if not layer.computes_weight]
    notes = []
    if computed:
        notes.append(f"{len(computed)} convolution(s) compute their weight from their own tensors at every call "
                     f"(weight standardization; {computed[0].path} first): built as plain convolutions of the weight "
                     "they compute, as TensorRT's constant folding builds them")
    if own:
        classes = ", ".join(sorted({layer.cls for layer in own}))
        notes.append(f"{len(own)} layer(s) of derived classes ({classes}; {own[0].path} first) whose forward is their "
                     "base class's operation on their own weight: built as that base class, as their ONNX export is, "
                     "so that ModelOpt quantizes them")
    return notes


def _plain_form(layer: torch.nn.Module, base: _Base) -> tuple[torch.nn.Module, bool] | None:
    """The plain layer `layer`'s forward computes and whether its weight or bias is computed (not its own as held),
    or None where its forward is anything else: it must trace to one input in, `base`'s function of that input as it
    came out, and the weight, bias and settings computed without the input (they are computed with no input given:
    any that reads it fails); and the plain layer must give `layer`'s output (`_same_outputs`: a weight drawn anew at
    every call does not). A module on the meta device holds no values to compute from."""
    if layer.weight.is_meta:
        return None
    try:
        graph = torch.fx.symbolic_trace(layer).graph
    except Exception:  # noqa: BLE001  (a forward torch.fx cannot trace is left as it is)
        return None
    inputs = [node for node in graph.nodes if node.op == "placeholder"]
    call = next(node for node in graph.nodes if node.op == "output").args[0]
    if not (len(inputs) == 1 and isinstance(call, torch.fx.Node) and call.op == "call_function"
            and call.target is base.function):
        return None
    arguments = {**base.defaults, **dict(zip(base.parameters, call.args, strict=False)), **call.kwargs}
    if arguments.pop("input") is not inputs[0]:
        return None
    try:
        values = dict(zip(arguments, _values(layer, graph, list(arguments.values())), strict=True))
        plain = base.make(values)
        _take_weights(plain, layer, values["weight"], values["bias"])
    except Exception:  # noqa: BLE001  (a value that reads the input, or settings the base class does not take)
        return None
    bias = values["bias"]
    computes_weight = values["weight"] is not layer.weight or (bias is not None and bias is not layer.bias)
    plain.train(layer.training)  # in its mode: eval folds BatchNorm
    return (plain, computes_weight) if _same_outputs(layer, plain, base) else None


def _take_weights(plain: torch.nn.Module, layer: torch.nn.Module, weight: torch.Tensor,
                  bias: torch.Tensor | None) -> None:
    """`plain` given `weight` and `bias`: `layer`'s own parameters shared as they are, computed values copied in."""
    for name, value in (("weight", weight), ("bias", bias)):
        if value is None:
            continue
        if value is getattr(layer, name):
            setattr(plain, name, value)
        else:
            with torch.no_grad():
                getattr(plain, name).copy_(value)


def _values(layer: torch.nn.Module, graph: torch.fx.Graph, wanted: list[Any]) -> list[Any]:
    """The values of `wanted` (nodes of `layer`'s traced `graph`, or constants): the graph with its output replaced by
    them and what they do not need removed, run with None as its input (an error where one of them reads it)."""
    computing = torch.fx.Graph()
    copied: dict[torch.fx.Node, torch.fx.Node] = {}
    for node in graph.nodes:
        if node.op != "output":
            copied[node] = computing.node_copy(node, lambda n: copied[n])
    computing.output(tuple(copied[value] if isinstance(value, torch.fx.Node) else value for value in wanted))
    computing.eliminate_dead_code()
    with torch.no_grad():
        return list(torch.fx.GraphModule(layer, computing)(None))


def _same_outputs(layer: torch.nn.Module, plain: torch.nn.Module, base: _Base) -> bool:
    """Whether `plain` gives `layer`'s output, to within rounding, on one random input of its shape (drawn from a
    generator of its own; a forward that draws numbers itself draws them from the global generator)."""
    generator = torch.Generator(device="cpu").manual_seed(0)
    example = base.example(plain, generator).to(plain.weight)
    with torch.no_grad():
        expected, got = layer(example), plain(example)
    if expected.shape != got.shape:
        return False
    # a convolution rounds at 1e-3 of its outputs' scale in fp16 or TF32; another computation misses by far more
    return float((got - expected).abs().max()) <= 1e-2 * float(expected.abs().max()) + 1e-6
