"""The study options, each declared once: flags, type, range, default, help and matrix keys.

Every place that takes a study option reads it from here: the command line of `run`, `probe` and `onnx`
(`inspector.options` makes their arguments), the request and plan checks, the sweep matrix's keys,
the probe's options and the `run` command line a sweep job records. A range or a default written
anywhere else is a second owner (tests/test_architecture.py looks for one).

An option the study reads as given also has its field in `GivenOptions`, below its entry: the request
(`inspector.request.StudyRequest`) and the plan (`sessions.documents.plan.StudyPlan`, the session's record, what
`rerun` replays) are made of those fields, so adding such an option is its entry and field here and the
code that reads `plan.<field>` (tests/inspector/test_option_reach.py fails on an option one of them misses).

Choices that plug-ins extend (backends, tracers) name their registry (`registry`); the registries live
in `builders` and `profilers`, and the front end looks them up (`inspector.options`). So does a help that lists
the words a file of `builders` holds (`listing`: the FP8 recipes' names and aliases).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sessions.documents.errors import InputError

RUN, PROBE, ONNX = "run", "probe", "onnx"
FP8_LAYERS_TIMED, FP8_LAYERS_KEPT = "timed", "kept"  # `--fp8-layers`: the cuDNN engine's precision choice
Value = int | float | str | tuple[str, ...] | None


@dataclass(frozen=True)
class Option:
    """One study option. `field` is its name in `StudyRequest` / `StudyPlan` / `ProbeOptions`.

    `default` is what a request holds when the option is not given (None: the machine decides, see
    `machine_defaults`); `command_defaults` overrides it for one command. `low` / `high` bound numbers
    (inclusive); `choices` fixes the words, `registry` names the plug-in registry that lists them.
    """

    field: str
    flags: tuple[str, ...]  # the first is the canonical flag; an empty tuple: a positional argument
    kind: type  # int, float or str; a repeatable option holds a tuple of str
    help: str
    commands: tuple[str, ...] = (RUN,)
    default: Value = None
    command_defaults: Mapping[str, Value] = dataclasses.field(default_factory=dict)
    # by device, where `default` is None
    machine_defaults: Mapping[str, Value] = dataclasses.field(default_factory=dict)
    low: float | None = None
    high: float | None = None
    choices: tuple[str, ...] = ()
    registry: str | None = None  # "backend" | "tracer": the choices are the registered names plus `choices`
    repeatable: bool = False
    metavar: str | None = None
    matrix: bool = True  # a sweep matrix may set it
    unset: str = ""  # what the machine does where the option is not given and no value stands for it (--help)
    listing: str | None = None  # "fp8 recipes": the help starts with the words that file lists (`inspector.options`)

    @property
    def flag(self) -> str:
        """How messages name the option: `--calib-count`, or the positional's name."""
        return self.flags[0] if self.flags else self.field

    @property
    def keys(self) -> tuple[str, ...]:
        """Its keys in a sweep matrix: every flag without dashes, written with `-` or `_`."""
        names = [f.lstrip("-") for f in self.flags] or [self.field]
        return tuple(dict.fromkeys(k for name in names for k in (name, name.replace("-", "_"))))

    def default_for(self, command: str) -> Value:
        return self.command_defaults.get(command, self.default)

    def check(self, value: Any) -> Any:
        """`value` if it has this option's type and lies in its range; InputError (one line) otherwise.

        Numbers must be finite; names non-empty; fixed choices are checked here, registry choices by
        `inspector.options.check_choice` (which reads the registries, so plug-ins count).
        """
        if value is None:
            return value
        if self.repeatable:
            items = (value,) if isinstance(value, str) else value
            if not isinstance(items, (list, tuple)) or not all(isinstance(i, str) and i.strip() for i in items):
                raise InputError(f"{self.flag}: expected a non-empty name or a list of them, not {value!r}")
            return tuple(items)
        accepted: tuple[type, ...] = (int, float) if self.kind is float else (self.kind,)
        if isinstance(value, bool) or not isinstance(value, accepted):
            raise InputError(f"{self.flag}: expected {_KIND_WORDS[self.kind]}, not {value!r}")
        if isinstance(value, str):
            if not value.strip():
                raise InputError(f"{self.flag} must not be empty")
            if self.choices and not self.registry and value not in self.choices:
                raise InputError(f"{self.flag} {value!r}: use {', '.join(self.choices)}")
            return value
        assert isinstance(value, (int, float))  # accepted above
        if not math.isfinite(value) or not _within(value, self.low, self.high):
            raise InputError(f"{self.flag} must be {self.range_text()}, not {_number(value)}")
        return float(value) if self.kind is float else value

    def range_text(self) -> str:
        unit = " seconds" if self.kind is float else ""
        low, high = _number(self.low), _number(self.high)
        if self.low is not None and self.high is not None:
            return f"between {low} and {high}{unit}"
        return f"at least {low}{unit}" if self.low is not None else f"at most {high}{unit}"

    def parse(self, text: str) -> Any:
        """A command-line word as this option's value, checked; InputError (one line) otherwise."""
        try:
            value = self.kind(text)
        except ValueError:
            raise InputError(f"{self.flag}: {text!r} is not {_KIND_WORDS[self.kind]}") from None
        return self.check(value)


_KIND_WORDS = {int: "a whole number", float: "a number", str: "a name"}


def _number(value: float | None) -> str:
    """A bound or a value as written: whole numbers in full (4294967295), others as %g."""
    return str(value) if isinstance(value, int) else f"{value:g}"


def _within(value: float, low: float | None, high: float | None) -> bool:
    return (low is None or value >= low) and (high is None or value <= high)


TIMING = ("warmup_s", "rounds", "iters", "switch_warmup")  # the options that make a TimingPlan, in its order

# Timing defaults: 4 rounds of 25 on CUDA after 50 ms of warm-up, samples' worth of inferences discarded at each
# variant's turn in a round;
# what they rest on is in docs/evidence.md ("Why the timing defaults are what they are").
# The probe times one layer per step: 50 ms of warm-up per step, 5 rounds of 20.
OPTIONS: tuple[Option, ...] = (
    Option("model", (), str, "timm name (senet154), Hugging Face id or folder, hf:<model_type>, or an .onnx file",
           commands=(RUN, PROBE, ONNX)),
    Option("backend", ("--backend",), str, "engine backend; auto: the first of the registered backends that runs "
           "here (default: %(default)s)", default="auto", choices=("auto",), registry="backend"),
    Option("device", ("--device",), str, "default: cuda where a GPU is visible", choices=("cuda", "cpu")),
    Option("variants", ("--variants",), str, "comma list of fp32, fp16, bf16, fp8, fp8-<recipe>", commands=(RUN, ONNX),
           command_defaults={ONNX: "fp16,fp8"},
           unset="PyTorch's fp16 and the engine's fp16 and FP8 where the engine runs, else fp32,fp16,fp8 on CUDA, "
           "fp32,bf16,fp8 on CPU"),
    Option("batch", ("--batch",), int, "inputs per inference (default %(default)s)", commands=(RUN, PROBE, ONNX),
           default=1, low=1, high=65536),
    Option("fp8_recipes", ("--fp8-recipe", "--fp8-layout"), str, "repeatable (default: all and no-se)",
           commands=(RUN, ONNX), default=(), repeatable=True, metavar="RECIPE", listing="fp8 recipes"),
    Option("fp8_exclude", ("--fp8-exclude",), str, "module paths kept out of FP8 (fnmatch, e.g. '*.se.*'); repeatable",
           commands=(RUN, ONNX), default=(), repeatable=True, metavar="PATTERN"),
    Option("layers", ("--layers",), str, "only module paths matching (fnmatch, e.g. 'model.segformer.*'); repeatable",
           commands=(PROBE,), default=(), repeatable=True, metavar="PATTERN", matrix=False),
    Option("images", ("--images",), str, "folder of images (class folders or flat) for calibration and quality; "
           "default: scikit-image's photographs", commands=(RUN, PROBE, ONNX)),
    Option("calib_count", ("--calib-count",), int, "calibration images (activation scales) (default %(default)s)",
           commands=(RUN, PROBE, ONNX), default=16, low=1, high=100000),
    Option("eval_count", ("--eval-count",), int, "images for quality, disjoint from the calibration images, both "
           "taken at a fixed stride through --images (default: every image, calibration images included)",
           low=1, high=1000000),
    Option("rounds", ("--rounds",), int, "interleaved timing rounds", commands=(RUN, PROBE),
           command_defaults={PROBE: 5}, machine_defaults={"cuda": 4, "cpu": 3}, low=1, high=100000),
    Option("iters", ("--iters",), int, "timed samples per variant and round (a sample: one inference, or on a GPU "
           "the mean of a few back-to-back ones lasting a few milliseconds together)", commands=(RUN, PROBE),
           command_defaults={PROBE: 20}, machine_defaults={"cuda": 25, "cpu": 5}, low=1, high=10**7),
    Option("warmup_s", ("--warmup",), float, "warm-up per variant (per timed step in the probe)", commands=(RUN, PROBE),
           command_defaults={PROBE: 0.05}, machine_defaults={"cuda": 0.05, "cpu": 0.5}, low=0, high=3600,
           metavar="SECONDS"),
    Option("switch_warmup", ("--switch-warmup",), int, "samples' worth of inferences discarded before each variant's "
           "samples in a round (on a GPU, for at least the floor the method states)",
           machine_defaults={"cuda": 5, "cpu": 1}, low=0, high=1000, metavar="N"),
    Option("threads", ("--threads",), int, "PyTorch CPU threads (default: PyTorch's choice)", low=1, high=1024,
           metavar="N"),
    Option("stress_count", ("--stress-count",), int, "stress inputs run through every variant, spread over their kinds",
           low=1, high=1000, metavar="N", unset="all of them; fewer in a CPU main job"),
    Option("tracer", ("--tracer",), str, "kernel tracer; auto: CUPTI where it loads, else one that sees the backend's "
           "layers (default: %(default)s)", default="auto", choices=("auto",), registry="tracer"),
    # 7 traced calls: each layer's band is their range, which holds the median with 98.4 % (1 - 2 / 2^7); the ranges of
    # two reruns of an unchanged layer miss each other one time in 3,432 (1 / C(14, 7)); 5 calls: 1 in 252, too often
    # for a model of a hundred layers (sessions.analyses.noise). Each call costs one eager inference under the tracer.
    Option("trace_calls", ("--trace-calls",), int, "traced eager calls per variant: kernels, and each layer's median "
           "and spread (default %(default)s)", default=7, low=1, high=1000),
    Option("checkpoint", ("--checkpoint",), str, "weights: .safetensors or a torch file "
           "(loaded with weights_only=True)",
           commands=(RUN, PROBE, ONNX)),
    Option("opt_level", ("--opt-level",), int, "TensorRT builder_optimization_level; in the cuDNN engine, how many "
           "plans it times per layer (0: cuDNN's first, and no other library's tactic) (default %(default)s)",
           default=3, low=0, high=5),
    Option("fp8_layers", ("--fp8-layers",), str, "layers a recipe quantizes, in the cuDNN engine: timed runs each "
           "in FP8 only where its best FP8 tactic beats its fp16 one (as TensorRT's builder chooses); kept runs every "
           "one in FP8 wherever an FP8 kernel exists, to study the FP8 kernels; either way, whether a layer writes "
           "FP8 for its readers is timed (default %(default)s)",
           default=FP8_LAYERS_TIMED, choices=(FP8_LAYERS_TIMED, FP8_LAYERS_KEPT)),
    Option("seed", ("--seed",), int, "seed of random weights and inputs (default %(default)s)",
           commands=(RUN, PROBE, ONNX), default=0, low=0, high=2**32 - 1),
    Option("out", ("--out",), str, "session file to write (default: the user-data folder)", commands=(RUN, PROBE),
           matrix=False),
    Option("raw_trace", ("--raw-trace",), str, "also write each variant's raw tracer records to DIR", metavar="DIR",
           matrix=False),
)
BY_FIELD = {option.field: option for option in OPTIONS}
BY_KEY = {key: option for option in OPTIONS if option.matrix for key in option.keys}


def option(name: str) -> Option:
    """The option of a field name (`calib_count`)."""
    return BY_FIELD[name]


def default(name: str, command: str = RUN) -> Any:
    """The default of a field for `command`: what a request, plan or probe holds when it is not given."""
    return BY_FIELD[name].default_for(command)


def machine_default(name: str, device: str) -> Any:
    """The default of a machine-dependent option (the timing) on `device` (cuda | cpu)."""
    return BY_FIELD[name].machine_defaults[device]


@dataclass(frozen=True)
class GivenOptions:
    """The options a study takes as given: a request holds them as asked and its plan as the request holds them.

    One field per option, its default from the option's entry; the order is the order a session records them
    in its plan. The options a plan does not take as given are fields of the request and the plan themselves
    (model, backend, device, batch, tracer), or make the plan's variants or its `TimingPlan` (TIMING).
    """

    trace_calls: int = default("trace_calls")
    images: str | None = default("images")
    calib_count: int = default("calib_count")
    eval_count: int | None = default("eval_count")  # None: quality on every image (calibration images included)
    checkpoint: str | None = default("checkpoint")
    opt_level: int = default("opt_level")  # TensorRT builder_optimization_level
    fp8_layers: str = default("fp8_layers")  # the cuDNN engine: a quantized layer's precision timed, or FP8 kept
    seed: int = default("seed")  # random weights and random inputs
    out: str | None = default("out")  # session file; None: the user-data folder
    raw_trace: str | None = default("raw_trace")  # folder for each variant's raw tracer records
    threads: int | None = default("threads")  # torch CPU threads; None: torch's default
    stress_count: int | None = default("stress_count")  # stress inputs (profilers.images); None: all


def check_values(values: Mapping[str, Any]) -> None:
    """Each field's value against its option: one InputError line for the first that is wrong."""
    for name, value in values.items():
        BY_FIELD[name].check(value)
