"""Convolutions that compute their weight from their own tensors at every call, made plain convolutions.

Weight standardization (timm's `StdConv2d` in BiT's ResNetV2, `ScaledStdConv2d` in the NF-Nets) normalizes a
convolution's weight in its forward, from its weight, gain and scale alone: the input never reaches that
computation. TensorRT's builder folds such a subgraph of constants into the layer's weights (constant folding), so
the engine runs a plain convolution; an engine that lowered the forward as written would run the normalization as
layers of its own at every call, and the convolution as a PyTorch op without the engine's tactics.

Which convolutions qualify is read from each one's traced forward, not from its class: a `torch.nn.Conv2d` whose
forward differs from Conv2d's, traces, and returns one 2-D convolution of its input as it came, whose weight, bias,
stride, padding, dilation and groups are computed without the input (`_plain_form`). Any other (input padded or
clamped first, an output activated, a weight read from the input or drawn anew at each call) is left as it is.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.fx

CONV2D = torch.conv2d  # what a traced call of torch.nn.functional.conv2d names: the same function
CONV_PARAMETERS = ("input", "weight", "bias", "stride", "padding", "dilation", "groups")  # conv2d's, in order
CONV_DEFAULTS = {"bias": None, "stride": 1, "padding": 0, "dilation": 1, "groups": 1}


def plain_convolutions(module: torch.nn.Module) -> list[str]:
    """Replaces in `module` each convolution that computes its weight from its own tensors (module docstring) by
    the plain `torch.nn.Conv2d` of the weight and bias it computes (on its device, in its dtype); returns the paths
    replaced, in module order. The replacement gives the outputs the original gives: a convolution whose plain form
    does not match it on a test input is left as it is."""
    replaced = []
    for path, conv in list(module.named_modules()):
        if not path or not isinstance(conv, torch.nn.Conv2d) or type(conv).forward is torch.nn.Conv2d.forward:
            continue  # the module itself cannot be replaced in place
        plain = _plain_form(conv)
        if plain is not None:
            module.set_submodule(path, plain)
            replaced.append(path)
    return replaced


def computed_weights_notes(paths: list[str]) -> list[str]:
    """A variant's note on the convolutions `plain_convolutions` made plain in its model (none where there are none)."""
    if not paths:
        return []
    return [(f"{len(paths)} convolution(s) compute their weight from their own tensors at every call (weight "
             f"standardization; {paths[0]} first): built as plain convolutions of the weight they compute, as "
             "TensorRT's constant folding builds them")]


def _plain_form(conv: torch.nn.Conv2d) -> torch.nn.Conv2d | None:
    """The plain convolution `conv`'s forward computes, or None where its forward is anything else: it must trace to
    one image in, a 2-D convolution of that image as it came out, and the convolution's weight, bias and settings
    computed without the image (they are computed with no image given: any that reads it fails), the weight or the
    bias not the module's own as held; and the plain convolution must give `conv`'s output (`_same_outputs`: a weight
    drawn anew at every call does not). A module on the meta device holds no values to compute from."""
    if conv.weight.is_meta:
        return None
    try:
        graph = torch.fx.symbolic_trace(conv).graph
    except Exception:  # noqa: BLE001  (a forward torch.fx cannot trace is left as it is)
        return None
    inputs = [node for node in graph.nodes if node.op == "placeholder"]
    call = next(node for node in graph.nodes if node.op == "output").args[0]
    if not (len(inputs) == 1 and isinstance(call, torch.fx.Node) and call.op == "call_function"
            and call.target is CONV2D):
        return None
    arguments = {**CONV_DEFAULTS, **dict(zip(CONV_PARAMETERS, call.args, strict=False)), **call.kwargs}
    if arguments.pop("input") is not inputs[0]:
        return None
    try:
        values = dict(zip(arguments, _values(conv, graph, list(arguments.values())), strict=True))
        weight, bias = values["weight"], values["bias"]
        if weight is conv.weight and bias is conv.bias:
            return None  # nothing computed: a subclass that convolves as Conv2d does stays what it is
        plain = torch.nn.Conv2d(weight.shape[1] * values["groups"], weight.shape[0], tuple(weight.shape[2:]),
                                values["stride"], values["padding"], values["dilation"], values["groups"],
                                bias is not None, device=weight.device, dtype=weight.dtype)
        with torch.no_grad():
            plain.weight.copy_(weight)
            if bias is not None:
                plain.bias.copy_(bias)
    except Exception:  # noqa: BLE001  (a value that reads the image, or settings no Conv2d takes)
        return None
    return plain.train(conv.training) if _same_outputs(conv, plain) else None  # in its mode: eval folds BatchNorm


def _values(conv: torch.nn.Conv2d, graph: torch.fx.Graph, wanted: list[Any]) -> list[Any]:
    """The values of `wanted` (nodes of `conv`'s traced `graph`, or constants): the graph with its output replaced by
    them and what they do not need removed, run with None as its input (an error where one of them reads it)."""
    computing = torch.fx.Graph()
    copied: dict[torch.fx.Node, torch.fx.Node] = {}
    for node in graph.nodes:
        if node.op != "output":
            copied[node] = computing.node_copy(node, lambda n: copied[n])
    computing.output(tuple(copied[value] if isinstance(value, torch.fx.Node) else value for value in wanted))
    computing.eliminate_dead_code()
    with torch.no_grad():
        return list(torch.fx.GraphModule(conv, computing)(None))


def _same_outputs(conv: torch.nn.Conv2d, plain: torch.nn.Conv2d) -> bool:
    """Whether `plain` gives `conv`'s output, to within rounding, on one random input of its channels (drawn from a
    generator of its own; a forward that draws numbers itself draws them from the global generator)."""
    size = max(8, *(d * (k - 1) + 1 for d, k in zip(plain.dilation, plain.kernel_size, strict=True)))
    generator = torch.Generator(device="cpu").manual_seed(0)
    image = torch.randn(1, plain.in_channels, size, size, generator=generator).to(plain.weight)
    with torch.no_grad():
        expected, got = conv(image), plain(image)
    if expected.shape != got.shape:
        return False
    # a convolution rounds at 1e-3 of its outputs' scale in fp16 or TF32; another computation misses by far more
    return float((got - expected).abs().max()) <= 1e-2 * float(expected.abs().max()) + 1e-6
