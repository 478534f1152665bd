"""A study on the CPU sized to finish in minutes: threads from the machine, variants and counts from the model's cost.

`fit_cpu_plan` is the one owner of this policy (`inspector.resolve` calls it for PyTorch on the CPU). It times one
fp32 forward of the model at the threads it picks, ModelOpt's FP8 quantizer over the inputs of the layers each FP8
recipe quantizes (what a simulated FP8 variant adds to each forward), and a convolution in bf16 against
fp32, then fills in what the user left unset: threads (the cores that other work leaves free), the variants (bf16
left out where it is much slower than fp32 here), and the counts (quality, calibration and stress inputs, rounds,
inferences): the largest step of `LADDER` whose estimated time fits `BUDGET_S` (where none does, the default FP8
recipes after the first are left out too). The estimate comes from the measured costs and the plan's steps
(`estimate_steps`, stated per step in the plan's line, which also carries it as data: `PlanLine`); what the user set
is kept, and the estimate then covers it too.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Self

from inspector.request import StudyRequest
from sessions.documents.errors import first_line
from sessions.documents.plan import StudyPlan, TimingPlan

if TYPE_CHECKING:
    import torch

BUDGET_S = 200.0  # the study after start-up: the main job within 5 minutes on 2 cores that others also use
BF16_SLOW = 1.5  # bf16 leaves the defaults where its convolution takes more than this times fp32's
STEADY_S = 1.0  # time spent on the forwards after the first, to measure one (`_steady`)

# Steps of a study, in fp32 forwards of the model at the study's batch: senet154, 1 thread, the shared 2-core
# machine (benchmarks/results/cpu/costs.txt; mainjob.log lists each variant's median, build and traced call).
# Step by step, under a load between 8 and 17, they vary up to 2x; summed, these values came within 11 % of the
# main job's time after the estimate (0.89 and 1.01 of it: mainjob-earlier-runs.log, mainjob.log).
# A simulated FP8 forward where its quantizers could not be timed (`quantizers_s`): senet154's, 1.14 to 1.60 measured.
# Measured, it is the fp32 forward plus one e4m3 input quantizer per convolution and linear the recipe quantizes, which
# small models pay most for: the quantizers' time is per activation element and per call, a convolution's per multiply.
FP8_FORWARD = 1.4
FP8_CALIBRATION = 1.6 / 1.4  # a calibration forward (max amax on every quantizer) over a simulated FP8 forward
TRACE_FORWARD = 1.5  # a forward under torch.profiler, and the attribution after it
STRUCTURE_FORWARD = 2.0  # finding the model's structure (a forward with module hooks), then copying and folding
FP8_BUILD = 6.0  # ModelOpt's quantize, the amax floor and the baked weights, per FP8 variant
# Seconds per variant whatever the model's size: the model copied and folded, the session saved (and read back), the
# trace attributed; an FP8 variant's quantizers placed and calibrated on top: about what a model of a few milliseconds
# per forward (mobilenetv3_small_050, 4 variants) spent beyond its forwards at load 2.5 on the 2-core CPU (8.9 s taken
# against 5 s of forwards estimated; benchmarks/results/cpu/estimate.txt).
VARIANT_S = 0.75
FP8_VARIANT_S = 0.5


@dataclass(frozen=True)
class Counts:
    """How much a study measures: quality images (None: every image), calibration images, stress inputs
    (None: all), timing rounds, inferences per round, warm-up seconds."""

    quality: int | None
    calibration: int
    stress: int | None
    rounds: int
    iters: int
    warmup_s: float


# From the full defaults down to the least that still says something; the first that fits the budget is taken.
LADDER = (
    Counts(None, 16, None, 3, 5, 0.5),
    Counts(8, 8, 8, 3, 4, 0.5),
    Counts(4, 4, 5, 3, 3, 0.0),
    Counts(3, 3, 3, 2, 2, 0.0),
)


@dataclass(frozen=True)
class Machine:
    """What was measured here before the study: cores, load, the threads chosen, and the model's cost."""

    cores: int
    load: tuple[float, float, float]
    threads: int
    forward_s: float  # one fp32 forward at the study's batch and `threads`, after the first (set-up) call: `_steady`
    single_s: float  # one fp32 forward of one sample (stress inputs), as `forward_s`
    bf16_ratio: float  # the model's forward in bf16 / fp32 where a convolution's is below BF16_SLOW, else that one
    # a simulated FP8 variant's forward / the fp32 forward, by variant name, over the layers its recipe quantizes
    # (`fp8_forward_ratios`); FP8_FORWARD for a variant it does not name
    fp8_ratios: Mapping[str, float] = field(default_factory=dict)
    calibration_ratio: float = FP8_FORWARD  # the same over every convolution and linear: what calibration quantizes


def choose_threads(cores: int, load_1min: float) -> int:
    """The cores that other work leaves free (the 1-minute load average, rounded), at least one.

    More threads than free cores makes PyTorch's threads wait on each other: on 2 cores under load, 2 threads ran
    senet154's fp32 forward 6x slower than 1 (benchmarks/results/cpu/costs.txt).
    """
    return max(1, min(cores, math.floor(cores - load_1min + 0.5)))


def measure_machine(plan: StudyPlan) -> Machine:
    """Cores, load and threads; then the model built (and handed to the study), its fp32 forward timed as the study's
    later calls run (`_steady`), bf16 against fp32, and ModelOpt imported where the plan has FP8 (the study would
    import it)."""
    import torch

    from builders.study_inputs import build_model, keep_model

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    load = os.getloadavg() if hasattr(os, "getloadavg") else (0.0, 0.0, 0.0)
    threads = plan.threads or choose_threads(cores, load[0])
    torch.set_num_threads(threads)
    model = build_model(plan.model, plan.checkpoint, plan.seed)
    keep_model(plan, model)
    module = model.module.float().eval()
    with torch.no_grad():
        single = torch.randn(1, *model.input_size)
        single_s = _steady(lambda: module(single))
        batch = torch.randn(plan.batch, *model.input_size)
        forward_s = single_s if plan.batch == len(single) else _steady(lambda: module(batch))
    fp8 = [v for v in plan.variants if v.precision == "fp8"]
    calibration_ratio, fp8_ratios = FP8_FORWARD, dict[str, float]()
    if fp8:
        from builders.pytorch.variant_modules import prepare_fp8
        from builders.recipes.fp8 import quantized_paths

        prepare_fp8()
        paths = {v.name: set(quantized_paths(plan.model, plan.checkpoint, v)) for v in fp8}
        calibration_ratio, fp8_ratios = fp8_forward_ratios(module, single, single_s, paths)
    ratio = bf16_ratio()
    if ratio <= BF16_SLOW and any(v.precision == "bf16" for v in plan.variants):
        ratio = _model_bf16_ratio(module, single, single_s)
    return Machine(cores, (load[0], load[1], load[2]), threads, forward_s, single_s, ratio, fp8_ratios,
                   calibration_ratio)


def fp8_forward_ratios(module: torch.nn.Module, single: torch.Tensor, single_s: float,
                       quantized: Mapping[str, Collection[str]]) -> tuple[float, dict[str, float]]:
    """A calibration's forward and each simulated FP8 variant's over the fp32 one: the fp32 forward plus ModelOpt's
    quantizer over the inputs it quantizes (`quantized_inputs`, `quantizers_s`): for the calibration, of every
    convolution and linear (`builders.pytorch.variant_modules` calibrates them all, then keeps its recipe's); for
    a variant, of the module paths `quantized` names for it (the layers its recipe quantizes). `FP8_FORWARD` where
    none is found, and for all where timing them fails (the study meets that failure itself and reports it on its
    variant; the plan keeps what else it measured)."""
    try:
        seconds = quantizers_s(quantized_inputs(module, single))
    except (RuntimeError, ValueError, TypeError):
        return FP8_FORWARD, dict.fromkeys(quantized, FP8_FORWARD)

    def ratio(paths: Collection[str]) -> float:
        added = sum(s for path, s in seconds.items() if path in paths)
        return (single_s + added) / single_s if added > 0 else FP8_FORWARD

    return ratio(seconds.keys()), {name: ratio(paths) for name, paths in quantized.items()}


def quantized_inputs(module: torch.nn.Module, sample: torch.Tensor) -> dict[str, list[torch.Size]]:
    """The input shape of every call of each convolution and linear in one forward of `sample`, by module path:
    where a simulated FP8 variant may put an input quantizer (weights are quantized once, at build)."""
    import torch

    from builders.models.hooks import forward_once

    shapes: dict[str, list[torch.Size]] = {}

    def recorder(path: str) -> Callable[[torch.nn.Module, tuple[object, ...]], None]:
        def record(_module: torch.nn.Module, args: tuple[object, ...]) -> None:
            if args and isinstance(args[0], torch.Tensor):
                shapes.setdefault(path, []).append(args[0].shape)

        return record

    kinds = (torch.nn.modules.conv._ConvNd, torch.nn.Linear)
    forward_once(module, sample, [sub.register_forward_pre_hook(recorder(path)) for path, sub in module.named_modules()
                                  if isinstance(sub, kinds)])
    return shapes


def quantizers_s(shapes: Mapping[str, list[torch.Size]]) -> dict[str, float]:
    """Seconds one pass of ModelOpt's e4m3 fake quantizer (the simulated FP8 variants' own, on its pure-PyTorch
    path) takes over a tensor of each shape, by the key it is listed under (a key without shapes left out), after
    one untimed pass over them all (its set-up)."""
    import modelopt.torch.quantization as mtq
    import torch
    from modelopt.torch.quantization.nn import TensorQuantizer

    quantizer = TensorQuantizer(mtq.QuantizerAttributeConfig(num_bits=(4, 3), axis=None))
    quantizer.amax = torch.tensor(4.0)
    tensors = {shape: torch.randn(shape) for calls in shapes.values() for shape in calls}
    seconds: dict[str, float] = {}
    with torch.no_grad():
        for tensor in tensors.values():
            quantizer(tensor)
        for key, calls in ((key, calls) for key, calls in shapes.items() if calls):
            started = time.perf_counter()
            for shape in calls:
                quantizer(tensors[shape])
            seconds[key] = time.perf_counter() - started
    return seconds


def _model_bf16_ratio(module: torch.nn.Module, single: torch.Tensor, single_s: float) -> float:
    """The model's forward in bf16 over its fp32 forward (`_steady` both): a study that keeps bf16 runs the model, and
    a convolution's ratio said 1.3 where resnet18's forward in bf16 took 0.63 of fp32's (its quality step, on the
    2-core CPU here)."""
    import copy

    import torch

    converted = copy.deepcopy(module).to(torch.bfloat16)
    sample = single.to(torch.bfloat16)
    with torch.no_grad():
        return _steady(lambda: converted(sample)) / single_s


def bf16_ratio() -> float:
    """A 3 x 3 convolution's time in bf16 over fp32 on this CPU: where the CPU has no fast bf16 path, PyTorch runs it
    many times slower (88x on the 2-core AMD EPYC here: benchmarks/results/cpu/costs.txt). fp32 best of three;
    bf16 once after one untimed call, since a slow bf16 is what this looks for."""
    import torch

    conv = torch.nn.Conv2d(32, 32, 3, padding=1).eval()
    sample = torch.randn(1, 32, 28, 28)
    with torch.no_grad():
        fp32 = _best(lambda: conv(sample), 3)
        conv_bf16, sample_bf16 = conv.to(torch.bfloat16), sample.to(torch.bfloat16)
        conv_bf16(sample_bf16)
        bf16 = _best(lambda: conv_bf16(sample_bf16), 1)
    return bf16 / fp32


def _steady(step: Callable[[], object]) -> float:
    """Seconds of one call of `step` as the study's calls run: after the first call, calls for `STEADY_S` (at least
    one), their mean: the throughput the load leaves, which is what a study's many calls get.

    The first call sets up (allocations, oneDNN's primitives for each shape): resnet18's took 0.42 s against 0.14 s
    per forward over its study on the loaded 2-core CPU, and counting it for every forward put the estimate 1.5-2.5x
    over the time taken (issue 37). A call of a few milliseconds can run between two of the other work's turns on
    the cores; a second of them cannot, so their mean holds the load's share.
    """
    step()
    calls = 0
    started = time.perf_counter()
    while calls == 0 or time.perf_counter() - started < STEADY_S:
        step()
        calls += 1
    return (time.perf_counter() - started) / calls


def _best(step: Callable[[], object], repeats: int) -> float:
    best = math.inf
    for _ in range(repeats):
        started = time.perf_counter()
        step()
        best = min(best, time.perf_counter() - started)
    return best


@dataclass(frozen=True)
class StepEstimate:
    """The plan's estimate split by step: seconds before the first variant (the fp32 reference, the BatchNorm
    folded), per variant (its build, quality and stress inputs, trace, fixed seconds), and the timing rounds (every
    variant's warm-up and rounds). The CPU plan's line states it (`words`) and carries it as data (`PlanLine`), which
    `inspector.eta.Estimate` takes to time what is left at the pace of the steps done."""

    before: float
    variants: dict[str, float]
    timing: float

    @property
    def total(self) -> float:
        return self.before + sum(self.variants.values()) + self.timing

    def words(self) -> str:
        """`per variant: NAME S s, ...; timing rounds S s`, seconds to a tenth."""
        each = ", ".join(f"{name} {seconds:.1f} s" for name, seconds in self.variants.items())
        return f"per variant: {each}; timing rounds {self.timing:.1f} s"


class PlanLine(str):
    """The CPU plan's line, the text as printed, with the estimate it states (`steps`) as data: the line travels as a
    note of the resolver and the message of a set-up `Progress`, and whoever reads the estimate takes `steps`, never
    the figures back out of the text (which rounds them to a tenth)."""

    steps: StepEstimate

    def __new__(cls, text: str, steps: StepEstimate) -> Self:
        line = super().__new__(cls, text)
        line.steps = steps
        return line

    def __getnewargs__(self) -> tuple[str, StepEstimate]:  # type: ignore[override]  # str's: the text alone
        """What a copy or a pickle builds the line again from: the text and the estimate."""
        return str(self), self.steps


def estimate_steps(plan: StudyPlan, machine: Machine, images: int, stress: int) -> StepEstimate:
    """Seconds the study takes after this point (the model is built, ModelOpt imported), by step: the fp32
    reference and the BatchNorm folded; per variant its build, quality and stress inputs and trace, each in forwards
    of the measured cost, and the seconds a variant takes whatever the model (`VARIANT_S`, `FP8_VARIANT_S`); its
    warm-up and timing rounds. The calibration forwards count once, with the first FP8 variant: the study's FP8
    recipes take copies of one calibration (`builders.pytorch.variant_modules.Calibrations`; a recipe that folds or
    scales weights otherwise calibrates again, which this leaves out)."""
    f = machine.forward_s
    quality = plan.eval_count or images
    batches = math.ceil(quality / plan.batch)
    fp8 = [v for v in plan.variants if v.precision == "fp8"]
    before = batches * f + (STRUCTURE_FORWARD * machine.single_s if fp8 else 0.0)
    timing = plan.timing
    variants: dict[str, float] = {}
    timed_s = 0.0
    calibrated = False  # the study calibrates once; its FP8 variants take copies (`Calibrations`)
    for variant in plan.variants:
        ratio = {"fp8": machine.fp8_ratios.get(variant.name, FP8_FORWARD),
                 "bf16": machine.bf16_ratio}.get(variant.precision, 1.0)
        build = 0.0
        if variant.precision == "fp8":
            calibration = 0.0 if calibrated else (plan.calib_count / plan.batch * f * machine.calibration_ratio
                                                  * FP8_CALIBRATION)
            build = (FP8_BUILD + STRUCTURE_FORWARD) * machine.single_s + calibration
            calibrated = True
        checks = batches * f + stress * machine.single_s
        trace = (2 + plan.trace_calls * TRACE_FORWARD) * f
        timed_s += max(timing.warmup_s, f * ratio) + timing.rounds * (timing.switch_warmup + timing.iters) * f * ratio
        fixed = VARIANT_S + (FP8_VARIANT_S if variant.precision == "fp8" else 0.0)
        variants[variant.name] = fixed + build + (checks + trace) * ratio
    return StepEstimate(before, variants, timed_s)


def estimate_s(plan: StudyPlan, machine: Machine, images: int, stress: int) -> float:
    """Seconds the study takes after this point: `estimate_steps`, summed."""
    return estimate_steps(plan, machine, images, stress).total


def fit_cpu_plan(plan: StudyPlan, request: StudyRequest) -> tuple[StudyPlan, list[str]]:
    """`plan` (PyTorch on the CPU) with threads, variants and counts the user left unset chosen to fit `BUDGET_S`,
    and the lines that say so up front: cores, load and threads, the measured forward, what was chosen and
    left out, and the estimated time.

    Counts go down `LADDER` first; where even its last step does not fit, the default FP8 recipes after the first
    are left out too (never a variant or recipe the user named).
    """
    try:
        machine = measure_machine(plan)
    except (RuntimeError, ValueError, TypeError) as exc:  # the study meets the same failure and reports it per step
        return plan, [f"CPU plan: the defaults as they are; timing the model's fp32 forward failed: {first_line(exc)}"]
    notes: list[str] = []
    plan = replace(plan, threads=machine.threads)
    slow_bf16 = machine.bf16_ratio > BF16_SLOW and any(v.precision == "bf16" for v in plan.variants)
    if request.variants is None and slow_bf16:
        plan = replace(plan, variants=tuple(v for v in plan.variants if v.precision != "bf16"))
        notes.append(f"bf16 left out: it ran {machine.bf16_ratio:.0f}x slower than fp32 on this "
                     "CPU just now (--variants fp32,bf16,fp8 runs it)")
    images = _available_images(plan)
    chosen = _fit(plan, request, machine, images)
    dropped = [v.name for v in plan.variants if v not in chosen.variants]
    if dropped:
        notes.append(f"left out to fit the time: {', '.join(dropped)} (--fp8-recipe names the recipes to run)")
    steps = estimate_steps(chosen, machine, images, _stress(chosen))
    estimate = steps.total
    load = " / ".join(f"{x:.1f}" for x in machine.load)
    threads = _plural(machine.threads, "PyTorch thread") + (" (--threads)" if request.threads else "")
    notes.insert(0, f"CPU: {machine.cores} cores, load average {load} (1 / 5 / 15 min): {threads}"
                    + f"; one fp32 forward {machine.forward_s:.2f} s")
    over = "" if estimate <= BUDGET_S else f", over the {_duration(BUDGET_S)} aim: fewer variants or counts shorten it"
    notes.append(PlanLine(f"CPU plan: {', '.join(v.name for v in chosen.variants)}; {_describe(chosen, images)}; "
                          f"estimated {_duration(estimate)} from here{over} ({steps.words()})", steps))
    return chosen, notes


def _fit(plan: StudyPlan, request: StudyRequest, machine: Machine, images: int) -> StudyPlan:
    """The largest counts of `LADDER` that fit, with every variant, else with the first default FP8 recipe only;
    else the smallest."""
    fp8 = [v for v in plan.variants if v.precision == "fp8"]
    named = (request.variants is not None and "fp8-" in request.variants) or bool(request.fp8_recipes)
    variant_sets = [plan.variants]
    if len(fp8) > 1 and not named:
        variant_sets.append(tuple(v for v in plan.variants if v.precision != "fp8" or v == fp8[0]))
    for variants in variant_sets:
        for counts in LADDER:
            chosen = _with_counts(replace(plan, variants=variants), request, counts, images)
            if estimate_s(chosen, machine, images, _stress(chosen)) <= BUDGET_S:
                return chosen
    return chosen


def _with_counts(plan: StudyPlan, request: StudyRequest, counts: Counts, images: int) -> StudyPlan:
    """`plan` with `counts` wherever the request left the value to the machine."""
    calib = counts.calibration if request.calib_count == _declared("calib_count") else plan.calib_count
    quality = plan.eval_count
    if request.eval_count is None and counts.quality is not None:
        quality = min(counts.quality, images - calib) if images > calib else None
    timing = TimingPlan(
        plan.timing.warmup_s if request.warmup_s is not None else counts.warmup_s,
        request.rounds or counts.rounds,
        request.iters or counts.iters,
        plan.timing.switch_warmup,
    )
    stress = counts.stress if plan.stress_count is None else plan.stress_count
    return replace(plan, calib_count=calib, eval_count=quality, timing=timing, stress_count=stress)


def _declared(name: str) -> object:
    return next(f.default for f in fields(StudyRequest) if f.name == name)


def _available_images(plan: StudyPlan) -> int:
    from profilers.images import image_paths, load_images

    return len(image_paths(Path(plan.images))[0]) if plan.images else len(load_images(None).images)


def _stress(plan: StudyPlan) -> int:
    from profilers.images import STRESS_CASES

    return min(plan.stress_count, STRESS_CASES) if plan.stress_count is not None else STRESS_CASES


def _describe(plan: StudyPlan, images: int) -> str:
    quality = f"{plan.eval_count} quality images apart from" if plan.eval_count else f"quality on all {images} images,"
    t = plan.timing
    return (f"{quality} {plan.calib_count} calibration images, {_stress(plan)} stress inputs, {t.rounds} rounds of "
            f"{t.iters} inferences, {t.warmup_s:g} s warm-up")


def _duration(seconds: float) -> str:
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest} s" if minutes else f"{rest} s"


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"
