"""What the user asked for on the command line, before anything about this machine is known.

`inspector.resolve` turns a request into a concrete `StudyPlan`; both front ends (CLI and TUI)
hold a request, never argv.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from sessions.documents.errors import InputError
from sessions.documents.options import OPTIONS, RUN, TIMING, GivenOptions, default, machine_default
from sessions.documents.plan import TimingPlan, parse_variants

NAME_LIMIT = 200  # UTF-8 bytes; a name becomes part of a file name (255 bytes at most on most file systems)
CUDA_TIMING = TimingPlan(*(machine_default(name, "cuda") for name in TIMING))
CPU_TIMING = TimingPlan(*(machine_default(name, "cpu") for name in TIMING))


@dataclass(frozen=True)
class AskedOptions:
    """The options a request holds as asked and resolving decides or converts (`inspector.resolve`)."""

    model: str
    backend: str = default("backend")
    device: str | None = default("device")  # cuda | cpu; None picks
    variants: str | None = default("variants")  # None: the backend's `default_variants`
    batch: int = default("batch")
    fp8_recipes: tuple[str, ...] = default("fp8_recipes")
    fp8_exclude: tuple[str, ...] = default("fp8_exclude")
    rounds: int | None = default("rounds")
    iters: int | None = default("iters")
    warmup_s: float | None = default("warmup_s")
    switch_warmup: int | None = default("switch_warmup")  # samples' worth of inferences discarded per turn
    tracer: str = default("tracer")


@dataclass(frozen=True)
class StudyRequest(GivenOptions, AskedOptions):
    """The study options as given (`sessions.documents.options` declares them); None where the machine decides. The
    options a plan takes as given are its fields from `sessions.documents.options.GivenOptions`."""

    command: tuple[str, ...] = field(default=(), compare=False)

    def validate(self) -> None:
        """Every option against the spec (types, ranges, registered backend and tracer), the variants and
        recipes named, and a raw-trace folder that is not a file; InputError (one line) otherwise."""
        from builders.recipes.fp8 import get_recipe
        from inspector.options import validate_request_values

        validate_request_values({name: getattr(self, name) for name in self.__dataclass_fields__ if name != "command"})
        named = parse_variants(self.variants, [], []) if self.variants is not None else ()
        for recipe in [*self.fp8_recipes, *(v.recipe for v in named if v.recipe)]:
            get_recipe(recipe)
        if self.raw_trace is not None and os.path.lexists(self.raw_trace) and not os.path.isdir(self.raw_trace):
            raise InputError(f"--raw-trace {self.raw_trace} is a file; give a folder")

    def run_argv(self) -> list[str]:
        """The `trt-inspect run` command line that asks for this request (what each sweep job records): every
        option of `run` that differs from its default, under its canonical flag."""
        argv = ["trt-inspect", "run", self.model]
        for spec in OPTIONS:
            if not spec.flags or RUN not in spec.commands or getattr(self, spec.field) == spec.default:
                continue
            value = getattr(self, spec.field)
            for item in value if spec.repeatable else [value]:
                argv += [spec.flag, f"{item:g}" if isinstance(item, float) else str(item)]
        return argv


def check_name(text: str) -> str:
    """A name given on the command line (`--name`), refused where it could act as a path or break a file name."""
    if not text.strip():
        raise InputError("a name cannot be empty")
    size = len(text.encode("utf-8", "surrogateescape"))
    if size > NAME_LIMIT:
        raise InputError(f"a name is at most {NAME_LIMIT} characters (bytes in UTF-8), not {size}")
    if "/" in text or "\\" in text or ".." in text:
        raise InputError(f"{text!r} is a path, not a name: leave out '/', '\\' and '..'")
    if not text.isprintable():
        raise InputError(f"{text!r}: a name holds no control characters (NUL, newline, ...)")
    return text
