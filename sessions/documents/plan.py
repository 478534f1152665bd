"""The study plan: what a study will do, resolved from the command line before any work starts.

A plan is frozen and concrete (no "auto": the backend, device and tracer are chosen), stored in
the session, and replayed as it is by `rerun`. A sweep is a list of plans. Its options are declared in
`sessions.documents.options` (those it takes as given are its fields from `GivenOptions`);
`inspector.options.validate_plan` checks a plan against them before any work.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from sessions.documents.errors import InputError
from sessions.documents.options import GivenOptions
from sessions.documents.vocab import Device, Precision

BASE_PRECISIONS = ("fp32", "fp16", "bf16")  # the float precisions: a variant asking one of these quantizes nothing
DEFAULT_FP8_RECIPES = ("all", "no-se")
# `[<backend>-]<precision>`: a variant built by a backend other than the plan's names that backend first
# (`cudnn-fp16`); which backends take which precisions so, each backend says (builders.backend)
_PREFIXED = re.compile(r"(?P<backend>[a-z][a-z0-9_]*(?:-[a-z0-9_]+)*?)-(?P<word>(?:fp32|fp16|bf16|fp8)(?:-.+)?)")


@dataclass(frozen=True)
class VariantPlan:
    """One variant: a base precision, or FP8 with a recipe and exclusion patterns."""

    precision: Precision  # fp32 | fp16 | bf16 | fp8
    recipe: str | None = None  # FP8 recipe name (builders.recipes.fp8)
    exclude: tuple[str, ...] = ()
    backend: str | None = None  # the backend that builds this variant; None: the plan's

    @property
    def name(self) -> str:
        base = f"fp8-{self.recipe}" if self.precision == "fp8" else self.precision
        return f"{self.backend}-{base}" if self.backend else base


@dataclass(frozen=True)
class TimingPlan:
    warmup_s: float  # per variant, before the first round
    rounds: int  # interleaved over the variants
    iters: int  # samples per variant per round
    switch_warmup: int = 0  # samples' worth of inferences discarded at each variant's turn in a round (on a GPU,
    # at least a floor of time: profilers.timing.discard_inferences)


@dataclass(frozen=True)
class ResolvedOptions:
    """The plan's first fields: what resolving a request decides (backend, device, tracer) or converts (variants,
    timing), with the model and batch, as a session has always recorded them first."""

    model: str
    backend: str  # a registered backend name (builders.registry)
    device: Device
    variants: tuple[VariantPlan, ...]
    batch: int
    timing: TimingPlan
    tracer: str  # a registered tracer name (profilers.tracers)


@dataclass(frozen=True)
class StudyPlan(GivenOptions, ResolvedOptions):
    """A study, concrete: the resolved options, then every option the request gave as it gave them
    (`sessions.documents.options.GivenOptions`), in that order in the session."""


def parse_variants(text: str, recipes: list[str], exclude: list[str]) -> tuple[VariantPlan, ...]:
    """`fp16,fp8` with recipes [all, no-se] -> fp16, fp8-all, fp8-no-se; `fp8-no-se` names one directly;
    `cudnn-fp16` names the backend that builds it (whether that backend builds it is its own check:
    `builders.backend.Backend.variant_problem`)."""
    unique = tuple(dict.fromkeys(plan for plan, _ in _parsed(text, recipes, exclude)))
    if not unique:
        raise InputError("no variants given")
    return unique


def named_variants(text: str, recipes: list[str], exclude: list[str]) -> frozenset[str]:
    """The names of the variants of `parse_variants(text, recipes, exclude)` the user named: all but those the bare
    word `fp8` brought in with the default recipes (`DEFAULT_FP8_RECIPES`, no `--fp8-recipe` given) and no other
    word names."""
    return frozenset(plan.name for plan, named in _parsed(text, recipes, exclude) if named)


def _parsed(text: str, recipes: list[str], exclude: list[str]) -> Iterator[tuple[VariantPlan, bool]]:
    """Each variant `text` gives, in order, with whether its word named it (False: a default recipe of `fp8`)."""
    for item in filter(None, (part.strip() for part in text.split(","))):
        prefixed = None if _unprefixed(item) else _PREFIXED.fullmatch(item)
        backend, word = (prefixed["backend"], prefixed["word"]) if prefixed else (None, item)
        match = re.fullmatch(r"fp8(?:-(.+))?", word)
        if match:
            for recipe in [match.group(1)] if match.group(1) else recipes or list(DEFAULT_FP8_RECIPES):
                yield VariantPlan("fp8", recipe, tuple(exclude), backend), bool(match.group(1) or recipes)
        elif word in BASE_PRECISIONS:
            # the word is one of BASE_PRECISIONS, which mypy cannot narrow to the Literal it is
            yield VariantPlan(word, backend=backend), True  # type: ignore[arg-type]
        else:
            raise InputError(f"unknown variant {item!r}; use {', '.join(BASE_PRECISIONS)}, fp8 or fp8-<recipe>, "
                             "or one of these after the name of a backend that builds it (<backend>-fp16)")


def _unprefixed(item: str) -> bool:
    """Whether `item` is a precision or `fp8-<recipe>` as it stands (a recipe's name may hold a precision)."""
    return item in BASE_PRECISIONS or re.fullmatch(r"fp8(?:-(.+))?", item) is not None
