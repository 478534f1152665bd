"""What became of the layers a recipe asked for in FP8, by role: how many ran FP8, how many ran fp16 because their
fp16 tactic timed faster, how many because FP8 was refused, and the libraries whose tactics ran them.

Read from the layers the engine records (`attrs["asked"]`, `attrs["fallback"]`, `attrs["library"]`; the one rule of
what a layer ran: `sessions.documents.vocab.precision_as_run`), and from the records a fused region keeps of the
layers it covers (`sessions.documents.covers`), quantize layers left out (`asked_fp8`); a variant
whose layers record no asked precision (PyTorch variants, imported TensorRT files) has no rows.

The libraries are counted from the layers the session holds, and only from them (`layer_library`): by role here,
over the whole variant in `library_line`, which every view prints in place of the count engines before it stored
as a note (`STORED_LIBRARY_NOTE`: counted before Inductor's regions replaced layers, and only where several
libraries' tactics were timed, so it could disagree with the layers).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from sessions.analyses.captions import QUANTIZER_OPS
from sessions.analyses.groups import Rules, role_of
from sessions.documents.covers import covered_layers
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


def fp8_outcome(layer: Layer) -> PrecisionAsRun | None:
    """What became of `layer` where its recipe asked for it in FP8 (`precision_as_run`: FP8, fp16 by timing, fp16
    refused); None where it was not asked for in FP8, and for the quantize and dequantize layers a build adds around
    those: the one reading `groups`, `show --layers` and the layer exports share."""
    if layer.op in QUANTIZER_OPS:
        return None
    return precision_as_run(layer.attrs.get("asked"), layer.precision, layer.attrs.get("fallback"))


def fallback_reason(layer: Layer) -> str | None:
    """Why `layer` did not run in the precision its recipe asked for, as the engine recorded it (`attrs["fallback"]`:
    cuDNN's refusal, or the times that chose fp16); None where it recorded none."""
    reason = layer.attrs.get("fallback")
    return str(reason) if reason else None


def with_covered(layers: Iterable[Layer]) -> Iterator[Layer]:
    """Each layer of `layers`, then the layers asked for in FP8 that it covers where it is a region fused across
    layers (`covered_layers`): every layer a recipe asked for, whether or not a region now runs it."""
    for layer in layers:
        yield layer
        yield from covered_layers(layer)


def asked_fp8(variant: Variant) -> list[tuple[Layer, PrecisionAsRun]]:
    """The layers of `variant` its recipe asked for in FP8, those fused regions cover included (`with_covered`),
    with what each ran (`fp8_outcome`)."""
    return [(layer, outcome) for layer in with_covered(variant.layers) if (outcome := fp8_outcome(layer)) is not None]


def precision_by_role(variant: Variant, rules: Rules) -> list[RolePrecision]:
    """The roles of `variant`'s layers asked for in FP8 (`asked_fp8`), in the order their first layer runs; [] where
    none was."""
    ran: dict[str, Counter[PrecisionAsRun]] = {}
    libraries: dict[str, Counter[str]] = {}
    for layer, outcome in asked_fp8(variant):
        role = role_of(layer, rules)
        ran.setdefault(role, Counter())[outcome] += 1
        library = layer_library(layer)
        if library is not None:
            libraries.setdefault(role, Counter())[library] += 1
    return [RolePrecision(role, sum(counts.values()), {word: counts[word] for word in PRECISIONS_AS_RUN},
                          dict(sorted(libraries.get(role, Counter()).items())))
            for role, counts in ran.items()]


def layer_library(layer: Layer) -> str | None:
    """The library whose tactic runs `layer` (the engine's `attrs["library"]`); None where the layer records none."""
    library = layer.attrs.get("library")
    return library if isinstance(library, str) else None


# what engines before `library_line` stored as a variant's note, with counts the layers need not bear out
STORED_LIBRARY_NOTE = "convolutions by the library whose tactic timed fastest: "


def library_line(variant: Variant) -> str | None:
    """How many of `variant`'s layers each library's tactic runs, counted over the layers it holds (`layer_library`;
    the engine records a library on its convolutions only), libraries in name order; None where no layer records
    one."""
    counts = Counter(library for layer in variant.layers if (library := layer_library(layer)) is not None)
    if not counts:
        return None
    return "convolutions by the library whose tactic runs them: " + ", ".join(
        f"{library} {count}" for library, count in sorted(counts.items()))


def variant_notes(variant: Variant) -> list[str]:
    """The notes every view prints under a variant: those stored, the library count an engine stored
    (`STORED_LIBRARY_NOTE`) left out, then `library_line`, counted from the layers."""
    line = library_line(variant)
    kept = [note for note in variant.notes if not note.startswith(STORED_LIBRARY_NOTE)]
    return kept + ([line] if line else [])
