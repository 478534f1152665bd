"""Layers whose output does not depend on their input: all-zero weights (as stored, or as their forward computes them:
a weight-standardised convolution whose gain is zero, as timm's NF-Nets initialise the last of each residual branch),
or read by a BatchNorm whose scale is all zero (folded into the layer, as the engines and the FP8 recipe fold it, its
weights become zero). Layers whose only input or only reader is such a layer hide their error too; they are not
counted here.

Random initialisation makes such layers on purpose: timm zero-initialises the last BatchNorm of every residual branch
(`zero_init_last`), so with random weights those branches add nothing. Quantizing such a layer changes nothing, and
quality figures say nothing of its FP8 error; the study says so beside them.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable

import torch

from builders.models.hooks import forward_once


def constant_output_layers(module: torch.nn.Module, conv_bn: Iterable[tuple[str, str]],
                           names: Iterable[str], example: torch.Tensor | None = None) -> list[str]:
    """The layers of `names` (module paths in `module`, each once) with an all-zero weight, or read directly by a
    BatchNorm of `conv_bn` (pairs of a layer's path and the path of a BatchNorm that reads its output, as
    `ModelStructure.conv_bn`; the caller passes only the pairs its engines fold) whose weight is all zero, or, where
    `example` (an input of `module`) is given, whose output in a forward pass of it is what their input's double plus
    one gives too (`input_independent`: a weight their forward computes as zero); in the order of `names`. A name
    that is not a module with a weight tensor is left out."""
    modules = dict(module.named_modules())
    zero_scaled = {layer for layer, norm in conv_bn if _all_zero(getattr(modules.get(norm), "weight", None))}
    weighted = [name for name in dict.fromkeys(names)
                if name in modules and isinstance(getattr(modules[name], "weight", None), torch.Tensor)]
    computed = input_independent(module, weighted, example) if example is not None else set()
    return [name for name in weighted if name in zero_scaled or name in computed or _all_zero(modules[name].weight)]


def input_independent(module: torch.nn.Module, names: Iterable[str], example: torch.Tensor) -> set[str]:
    """The layers of `names` whose output, in one forward pass of `module` on `example`, equals bit for bit what
    the same layer gives for its first input doubled plus one: an output that does not depend on the input (zero
    weights however the forward computes them; a bias alone). Each layer is called once more from a hook on its
    first call, its other arguments and keywords as they came; a layer that refuses the other input is not
    constant. Nothing is kept beyond the pass."""
    modules = dict(module.named_modules())
    found: dict[str, bool] = {}

    def hook(name: str, layer: torch.nn.Module, args: tuple, kwargs: dict, output: object) -> None:
        if name in found or not args or not isinstance(args[0], torch.Tensor) or not isinstance(output, torch.Tensor):
            return
        found[name] = False  # before the call: the hook runs again inside it, and returns at once
        try:
            other = layer(args[0] * 2 + 1, *args[1:], **kwargs)
        except Exception:  # noqa: BLE001 - a layer that checks its input's values: not a constant one
            return
        found[name] = isinstance(other, torch.Tensor) and torch.equal(other, output)

    handles = [modules[name].register_forward_hook(functools.partial(hook, name), with_kwargs=True)
               for name in dict.fromkeys(names) if name in modules]
    forward_once(module, example, handles)
    return {name for name, constant in found.items() if constant}


def _all_zero(weight: object) -> bool:
    """Whether `weight` is a tensor holding only zeros (a BatchNorm without affine weight has None, a meta tensor no
    values: neither is zero)."""
    return (isinstance(weight, torch.Tensor) and not weight.is_meta and weight.numel() > 0
            and not bool(weight.detach().any()))
