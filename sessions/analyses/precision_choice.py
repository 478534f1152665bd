"""What became of the layers a recipe asked for in FP8, by role: how many ran FP8, how many ran fp16 because their
fp16 tactic timed faster, how many because FP8 was refused, and the libraries whose tactics ran them.

Read from the layers the engine records (`attrs["asked"]`, `attrs["fallback"]`, `attrs["library"]`; the one rule of
what a layer ran: `sessions.documents.vocab.precision_as_run`), quantize layers left out (`asked_fp8`); a variant
whose layers record no asked precision (PyTorch variants, imported TensorRT files) has no rows.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from sessions.analyses.captions import QUANTIZER_OPS
from sessions.analyses.groups import Rules, role_of
from sessions.documents.model import Layer, Variant
from sessions.documents.vocab import PRECISIONS_AS_RUN, PrecisionAsRun, precision_as_run


@dataclass(frozen=True)
class RolePrecision:
    """One role's layers asked for in FP8 in one variant: counts by what each ran (`ran`, every word of
    PRECISIONS_AS_RUN), and by the library whose tactic ran each (layers that record none are not counted there)."""

    role: str
    asked: int
    ran: dict[PrecisionAsRun, int]
    libraries: dict[str, int]


def asked_fp8(variant: Variant) -> list[tuple[Layer, PrecisionAsRun]]:
    """The layers of `variant` its recipe asked for in FP8, with what each ran; the quantize and dequantize layers a
    build adds around them are none of them."""
    found = []
    for layer in variant.layers:
        outcome = precision_as_run(layer.attrs.get("asked"), layer.precision, layer.attrs.get("fallback"))
        if outcome is not None and layer.op not in QUANTIZER_OPS:
            found.append((layer, outcome))
    return found


def precision_by_role(variant: Variant, rules: Rules) -> list[RolePrecision]:
    """The roles of `variant`'s layers asked for in FP8 (`asked_fp8`), in the order their first layer runs; [] where
    none was."""
    ran: dict[str, Counter[PrecisionAsRun]] = {}
    libraries: dict[str, Counter[str]] = {}
    for layer, outcome in asked_fp8(variant):
        role = role_of(layer, rules)
        ran.setdefault(role, Counter())[outcome] += 1
        library = layer.attrs.get("library")
        if isinstance(library, str):
            libraries.setdefault(role, Counter())[library] += 1
    return [RolePrecision(role, sum(counts.values()), {word: counts[word] for word in PRECISIONS_AS_RUN},
                          dict(sorted(libraries.get(role, Counter()).items())))
            for role, counts in ran.items()]
