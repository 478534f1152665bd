"""Layers whose output does not depend on their input: all-zero weights, or read by a BatchNorm whose scale is all
zero (folded into the layer, as the engines and the FP8 recipe fold it, its weights become zero). Layers whose only
input or only reader is such a layer hide their error too; they are not counted here.

Random initialisation makes such layers on purpose: timm zero-initialises the last BatchNorm of every residual branch
(`zero_init_last`), so with random weights those branches add nothing. Quantizing such a layer changes nothing, and
quality figures say nothing of its FP8 error; the study says so beside them.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch


def constant_output_layers(module: torch.nn.Module, conv_bn: Iterable[tuple[str, str]],
                           names: Iterable[str]) -> list[str]:
    """The layers of `names` (module paths in `module`, each once) with an all-zero weight, or read directly by a
    BatchNorm of `conv_bn` (pairs of a layer's path and the path of a BatchNorm that reads its output, as
    `ModelStructure.conv_bn`; the caller passes only the pairs its engines fold) whose weight is all zero; in the
    order of `names`. A name that is not a module with a weight tensor is left out."""
    modules = dict(module.named_modules())
    zero_scaled = {layer for layer, norm in conv_bn if _all_zero(getattr(modules.get(norm), "weight", None))}
    weighted = [name for name in dict.fromkeys(names)
                if name in modules and isinstance(getattr(modules[name], "weight", None), torch.Tensor)]
    return [name for name in weighted if name in zero_scaled or _all_zero(modules[name].weight)]


def _all_zero(weight: object) -> bool:
    """Whether `weight` is a tensor holding only zeros (a BatchNorm without affine weight has None, a meta tensor no
    values: neither is zero)."""
    return (isinstance(weight, torch.Tensor) and not weight.is_meta and weight.numel() > 0
            and not bool(weight.detach().any()))
