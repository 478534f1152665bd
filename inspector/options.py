"""The study options' spec (`sessions.documents.options`) put to work: command-line arguments, the registries'
choices, and the complete check of a request's values and of a plan.

Nothing here declares an option: a new study option is one entry in `sessions.documents.options.OPTIONS` (and, for
one the study takes as given, its field in `sessions.documents.options.GivenOptions`, which the request and plan are
made of).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from sessions.documents.errors import InputError
from sessions.documents.options import OPTIONS, TIMING, Option, option
from sessions.documents.plan import BASE_PRECISIONS, StudyPlan, VariantPlan

DEVICE_WORDS = {"cuda": "CUDA", "cpu": "the CPU"}


def registry_names(registry: str) -> list[str]:
    """The names registered in a plug-in registry: `backend` or `tracer`."""
    if registry == "backend":
        from builders.backend import backend_names

        return backend_names()
    from profilers.tracers import tracer_names

    return tracer_names()


def listing_words(listing: str) -> str:
    """What an option's help starts with for its `listing`: for `fp8 recipes`, every recipe of the recipes file
    (`builders.recipes.fp8.recipes`) with its aliases, in the file's order, the weight-scale forms any of them also
    takes, and the file."""
    if listing != "fp8 recipes":
        raise ValueError(f"unknown listing {listing!r}")
    from builders.recipes.fp8 import RECIPES_FILE, WEIGHT_SCALES, recipe_names, recipes

    table = recipes()
    names = " | ".join(name + (f" (alias {', '.join(table[name].aliases)})" if table[name].aliases else "")
                       for name in recipe_names())
    forms = " or ".join(f"RECIPE-{scales}" for scales in WEIGHT_SCALES)
    where = RECIPES_FILE.relative_to(RECIPES_FILE.parents[2]).as_posix()  # builders/recipes/<file>
    return f"{names}, each also as {forms} (weight scales); recipes in {where}"


def choices_of(spec: Option) -> list[str]:
    """The words an option takes: its fixed choices, then (for a registry) every registered name."""
    return list(dict.fromkeys([*spec.choices, *(registry_names(spec.registry) if spec.registry else [])]))


def check_choice(spec: Option, value: str | None) -> None:
    """InputError (one line) when `value` is not one of the option's choices (the registries read now)."""
    known = choices_of(spec)
    if value is not None and known and value not in known:
        raise InputError(f"unknown {spec.flag.lstrip('-')} {value!r}; use {', '.join(known)}")


def add_arguments(parser: argparse.ArgumentParser, command: str) -> None:
    """The arguments of every study option `command` takes, with their help, defaults, types and choices (ranges
    are checked with the request or plan, so the CLI, the TUI and a sweep refuse a value with the same line)."""
    for spec in OPTIONS:
        if command in spec.commands:
            _add_argument(parser, spec, command)


def _add_argument(parser: argparse.ArgumentParser, spec: Option, command: str) -> None:
    default = spec.default_for(command)
    if not spec.flags:
        parser.add_argument(spec.field, help=spec.help)
        return
    kwargs: dict[str, Any] = {"dest": spec.field, "help": _help(spec, command), "metavar": spec.metavar}
    if spec.repeatable:
        # a list to append to
        kwargs.update(action="append", default=list(default if isinstance(default, tuple) else ()))
    else:  # the word is converted here; the range is checked with the request, as for the TUI and a sweep
        kwargs.update(type=spec.kind, default=default)
    choices = choices_of(spec)
    if choices:
        kwargs["choices"] = choices
    parser.add_argument(*spec.flags, **kwargs)


def argument_type(spec: Option) -> Callable[[str], Any]:
    """An argparse `type`: the word parsed and checked by the spec, its error as argparse's one line."""

    def parse(text: str) -> Any:
        try:
            return spec.parse(text)
        except InputError as exc:  # argparse names the option first: "argument --batch: must be between ..."
            raise argparse.ArgumentTypeError(exc.message.removeprefix(spec.flag).lstrip(": ")) from None

    parse.__name__ = spec.kind.__name__  # argparse names the type in its messages
    return parse


def _help(spec: Option, command: str) -> str:
    """The option's help (after the words of its listing, `listing_words`) with its default for `command`: its
    value, per device, or in words where none is set."""
    text = f"{listing_words(spec.listing)}; {spec.help}" if spec.listing else spec.help
    if command in spec.command_defaults and "%(default)" not in text:
        return f"{text} (default %(default)s)"
    if spec.default_for(command) is None and spec.machine_defaults:
        defaults = ", ".join(f"{value:g} on {DEVICE_WORDS[device]}" for device, value in spec.machine_defaults.items())
        return f"{text} (default {defaults})"
    return f"{text} (default: {spec.unset})" if spec.unset else text


def validate_request_values(values: dict[str, Any]) -> None:
    """Every option a request (or probe) sets, against the spec: types, ranges and choices."""
    for name, value in values.items():
        spec = option(name)
        spec.check(value)
        if spec.choices or spec.registry:
            check_choice(spec, value)


def validate_plan(plan: StudyPlan) -> None:
    """A plan complete and in range, however it was made (resolved, read back by `rerun`, or a sweep's),
    before any work: every option against the spec, a registered backend and tracer, and variants that name
    a known precision and, for FP8, a known recipe."""
    values = {name: getattr(plan, name) for name in plan.__dataclass_fields__ if name not in ("variants", "timing")}
    values.update({name: getattr(plan.timing, name) for name in TIMING})
    validate_request_values(values)
    if plan.backend == "auto" or plan.tracer == "auto":
        raise InputError("a plan names its backend and tracer; auto is for requests")
    if not plan.variants:
        raise InputError("the plan has no variants")
    for variant in plan.variants:
        check_variant(variant)


def check_variant(variant: VariantPlan) -> None:
    """A base precision without a recipe, or FP8 with a known recipe."""
    from builders.recipes.fp8 import get_recipe

    if variant.backend is not None:
        check_choice(option("backend"), variant.backend)
    if variant.precision in BASE_PRECISIONS:
        if variant.recipe is not None:
            raise InputError(f"the plan's {variant.precision} variant names a recipe ({variant.recipe!r}); "
                             "only fp8 takes one")
        return
    if variant.precision != "fp8":
        raise InputError(f"unknown precision {variant.precision!r} in the plan; "
                         f"use {', '.join(BASE_PRECISIONS)} or fp8")
    if not isinstance(variant.recipe, str):
        raise InputError(f"an fp8 variant of the plan names no recipe ({variant.recipe!r})")
    get_recipe(variant.recipe)
