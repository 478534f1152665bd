"""Which convolutions an FP8 variant quantizes: named layouts plus user exclusion patterns.

The layouts are those of the SENet-154 study this tool replaces: `all` quantizes every convolution
after the stem (254 of 257 in senet154), `no-se` leaves the squeeze-excitation convolutions in
high precision (154), `no-se-no-layer1` also the first stage (144).
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass

from sessions.errors import InputError

LAYOUTS: dict[str, tuple[str, ...]] = {
    "all": (),
    "no-se": ("se",),
    "no-se-no-layer1": ("se", "layer1"),
}
STAGE_SEGMENT = re.compile(r"^(layer[1-9]\d*|stages?|blocks|encoder|features)$")
SE_SEGMENTS = {"se", "se_module", "se_layer", "squeeze_excite", "attn_se"}
SE_CLASS = re.compile(r"^(SE|SqueezeExcit|EffectiveSE)|SEModule|SqueezeExcite")


@dataclass
class ConvSelection:
    quantized: list[str]
    excluded: list[str]  # every other convolution, the stem included
    stem: list[str]


def _is_conv(module) -> bool:
    import torch

    return isinstance(module, torch.nn.modules.conv._ConvNd)


def _in_se_block(path: str, modules: dict) -> bool:
    parts = path.split(".")
    if any(part in SE_SEGMENTS for part in parts[:-1]):
        return True
    for depth in range(1, len(parts)):
        parent = modules.get(".".join(parts[:depth]))
        if parent is not None and SE_CLASS.search(type(parent).__name__):
            return True
    return False


def select_convolutions(model, layout: str, exclude_patterns: list[str]) -> ConvSelection:
    if layout not in LAYOUTS:
        raise InputError(f"unknown FP8 layout {layout!r}; known: {', '.join(LAYOUTS)}")
    modules = dict(model.named_modules())
    convs = [(path, m) for path, m in modules.items() if _is_conv(m)]
    stem: list[str] = []
    seen_stage = False
    for path, module in convs:
        seen_stage = seen_stage or any(STAGE_SEGMENT.match(part) for part in path.split("."))
        if not seen_stage or module.in_channels <= 3:
            stem.append(path)
    rules = LAYOUTS[layout]
    quantized, excluded = [], []
    for path, _module in convs:
        skip = path in stem
        skip = skip or ("se" in rules and _in_se_block(path, modules))
        skip = skip or any(rule != "se" and path.split(".")[0] == rule for rule in rules)
        skip = skip or any(fnmatch.fnmatchcase(path, pattern) for pattern in exclude_patterns)
        (excluded if skip else quantized).append(path)
    return ConvSelection(quantized=quantized, excluded=excluded, stem=stem)
