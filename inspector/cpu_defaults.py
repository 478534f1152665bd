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

Every cost is work: seconds of this process on a core of its own (its CPU seconds at one thread), which the load does
not change; the estimate divides it by the share of a core the load leaves (`Machine.share`, measured over the
process's life so far; what both rest on: docs/evidence.md ("Grounds of rules in the code")). The warm-up alone is
wall time (the study warms each variant up for `warmup_s` whatever the load).
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
from sessions.documents.plan import StudyPlan, TimingPlan, VariantPlan

if TYPE_CHECKING:
    import torch

BUDGET_S = 200.0  # the study after start-up: the main job within 5 minutes on 2 cores that others also use
BF16_SLOW = 1.5  # bf16 leaves the defaults where its convolution takes more than this times fp32's
# alternated calls of the probe convolution in fp32 and in bf16, each side's least kept (`bf16_ratio`): the other work
# lengthens a call it preempts, never shortens one, so the least of several is the call it left alone
BF16_CALLS = 7
STEADY_S = 1.0  # time spent on the calls after the first, to measure one (`_steady`; both sides: `_steady_in_turn`)

# Steps of a study, in fp32 forwards of the model at the study's batch, measured on senet154 at 1 thread (where, and
# how near their sum came to the time taken: docs/evidence.md ("Grounds of rules in the code")).
# A simulated FP8 forward where neither it nor its quantizers could be timed (senet154's as measured: same section).
# Measured, it is the fp32 forward plus one e4m3 input quantizer per convolution and linear the recipe quantizes, which
# small models pay most for: the quantizers' time is per activation element and per call, a convolution's per multiply.
FP8_FORWARD = 1.4
# What each calibration image after the first adds, in fp32 forwards of one sample: ModelOpt's max calibrator only
# takes the largest |x| at each quantizer, over batches of up to `builders.pytorch.variant_modules.CALIBRATION_CHUNK`
# images (what it added on six models at the ladder's counts: docs/evidence.md ("Grounds of rules in the code")).
CALIBRATION_FORWARD = 0.9
TRACE_FORWARD = 1.5  # a forward under torch.profiler, and the attribution after it, where it could not be timed
# finding the model's structure (a recorded forward at the input size), then copying and folding (what the pass at
# the input size costs: docs/evidence.md ("Grounds of rules in the code"))
STRUCTURE_FORWARD = 3.0
FP8_BUILD = 6.0  # ModelOpt's quantize, the amax floor and the baked weights, per FP8 variant
# Work (CPU seconds) whatever the model's size, beside its forwards (traced ones timed with their export, `traced_s`):
# per variant, the trace attributed to layers and the session saved; per FP8 variant, ModelOpt's quantizers copied
# and their scales floored; the first FP8 trace's set-up on top; before the first variant, the model and the images
# loaded and the session written (the steps they were read from: docs/evidence.md ("Grounds of rules in the code")).
VARIANT_S = 0.25
FP8_VARIANT_S = 0.1
FIRST_FP8_TRACE_S = 0.4
BEFORE_S = 0.35
MIN_SHARE = 0.05  # the least share of a core taken from a measurement: a process that ran at all had some
ONE_THREAD = 1  # a plan of one PyTorch thread: its calls' CPU seconds are their work, its process's share the load's


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
    forward_s: float  # work of one fp32 forward at the study's batch and `threads`, after the first call: `_steady`
    single_s: float  # work of one fp32 forward of one sample (stress inputs), as `forward_s`
    bf16: Bf16Timing  # the model's forward in bf16 against fp32 where a convolution's ratio is below BF16_SLOW, else it
    # a simulated FP8 variant's forward / the fp32 forward, by variant name, over the layers its recipe quantizes
    # (`fp8_forward_ratios`); FP8_FORWARD for a variant it does not name
    fp8_ratios: Mapping[str, float] = field(default_factory=dict)
    share: float = 1.0  # the share of a core each thread gets: wall seconds = work / share (`process_share`)
    fp8_build_s: float | None = None  # work of building the first FP8 variant on one calibration sample (measured)
    traced_s: float | None = None  # work of one fp32 call traced as a variant's (`traced_call_s`); None: not timed

    @property
    def bf16_ratio(self) -> float:
        """bf16 / fp32 of what was timed (`bf16`)."""
        return self.bf16.ratio

    @property
    def forward_wall_s(self) -> float:
        """Wall seconds of one fp32 forward at the study's batch, at the load measured."""
        return self.forward_s / self.share


def choose_threads(cores: int, load_1min: float) -> int:
    """The cores that other work leaves free (the 1-minute load average, rounded), at least one.

    More threads than free cores makes PyTorch's threads wait on each other (by how much on 2 cores under load:
    docs/evidence.md ("Grounds of rules in the code")).
    """
    return max(1, min(cores, math.floor(cores - load_1min + 0.5)))


def measure_machine(plan: StudyPlan) -> Machine:
    """Cores, load and threads; then the model built (and handed to the study), its fp32 forward timed as the study's
    later calls run (`_steady`) with its BatchNorm folded as the study folds it, one traced call (`traced_call_s`),
    bf16 against fp32, and where the plan has FP8, ModelOpt imported (the study would import it) and the first FP8
    variant built and timed as the study builds it (`measure_fp8`); last, the share of a core the load leaves
    (`process_share`; at more than one thread, the forward's own: the load is low there)."""
    import torch

    from builders.models.catalog import torch_module
    from builders.pytorch.variant_modules import folded_reference
    from builders.study_inputs import build_model, keep_model

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    load = os.getloadavg() if hasattr(os, "getloadavg") else (0.0, 0.0, 0.0)
    threads = plan.threads or choose_threads(cores, load[0])
    torch.set_num_threads(threads)
    model = build_model(plan.model, plan.checkpoint, plan.seed)
    keep_model(plan, model)
    single = torch.randn(1, *model.input_size)
    module = folded_reference(torch_module(model).float().eval(), single)[0]  # what the study runs
    with torch.no_grad():
        single_pace = _steady(lambda: module(single))
        batch = torch.randn(plan.batch, *model.input_size)
        forward_pace = single_pace if plan.batch == len(single) else _steady(lambda: module(batch))

        def run_batch() -> None:
            module(batch)

        traced_s = traced_call_s(run_batch, threads)
    single_s, forward_s = single_pace.work_s(threads), forward_pace.work_s(threads)
    fp8 = [v for v in plan.variants if v.precision == "fp8"]
    fp8_ratios, fp8_build_s = dict[str, float](), None
    if fp8:
        from builders.pytorch.variant_modules import prepare_fp8
        from builders.recipes.fp8 import quantized_paths

        prepare_fp8()
        paths = {v.name: set(quantized_paths(plan.model, plan.checkpoint, v)) for v in fp8}
        fp8_ratios = fp8_forward_ratios(module, single, single_s, paths)
        measured = measure_fp8(module, fp8[0], single, threads)
        if measured is not None:
            fp8_build_s, ratio = measured
            scale = fp8_scale(fp8_ratios.get(fp8[0].name, FP8_FORWARD), ratio)
            fp8_ratios = {name: 1.0 + (value - 1.0) * scale for name, value in fp8_ratios.items()}
    bf16 = bf16_ratio()
    if bf16.ratio <= BF16_SLOW and any(v.precision == "bf16" for v in plan.variants):
        bf16 = _model_bf16_ratio(module, single, single_s, threads)
    share = process_share() if threads == ONE_THREAD else None
    return Machine(cores, (load[0], load[1], load[2]), threads, forward_s, single_s, bf16, fp8_ratios,
                   share or forward_pace.share(threads), fp8_build_s, traced_s)


def traced_call_s(step: Callable[[], None], threads: int) -> float | None:
    """Work of one call of `step` traced as the study traces a variant's calls (`profilers.torch_trace.trace` on the
    CPU: torch.profiler, its trace exported and read back), after one untimed traced call (the profiler's set-up,
    which the study's first trace pays); None where tracing fails (the study reports that on its variant).

    A traced call costs its forward and a part per op recorded, the most where the forward is shortest and has the
    most ops (docs/evidence.md ("Grounds of rules in the code"))."""
    from profilers.torch_trace import trace

    try:
        trace(step, 1, "cpu")
        started = _Clock()
        trace(step, 1, "cpu")
    except Exception:  # noqa: BLE001  (the profiler's own errors: the study meets them and records no kernels)
        return None
    return started.work_s(threads)


def measure_fp8(module: torch.nn.Module, variant: VariantPlan, single: torch.Tensor,
                threads: int) -> tuple[float, float] | None:
    """The work of building `variant` (simulated FP8) as the study builds it (`variant_module`, weights baked),
    calibrated on `single`, and its forward of `single` over `module`'s, the two timed in turn (`_steady_in_turn`);
    None where either fails (the study meets that failure itself and reports it on its variant) or the fp32 call's
    work reads 0 (a clock too coarse for it).

    Its quantizers' time apart (`quantizers_s`) says less than its FP8 forward takes in a study: the quantized
    modules cost more per call than their quantizers alone (docs/evidence.md ("Grounds of rules in the code"))."""
    import torch

    from builders.pytorch.variant_modules import bake_fp8_weights, variant_module

    try:
        started = _Clock()
        built = variant_module(module, variant, single, torch.float32)
        bake_fp8_weights(built)
        build_s = started.work_s(threads)
        with torch.no_grad():
            fp32, fp8 = _steady_in_turn(lambda: module(single), lambda: built.module(single))
    except Exception:  # noqa: BLE001  (ModelOpt's assertions, a library's own errors: the study reports them)
        return None
    fp32_s = fp32.work_s(threads)
    return (build_s, fp8.work_s(threads) / fp32_s) if fp32_s > 0 else None


def fp8_scale(estimated: float, measured: float) -> float:
    """What the quantizers' own time (`estimated`, a forward's ratio to fp32's) is multiplied by to give a variant's
    `measured` ratio: applied to every FP8 variant, whose quantized modules cost in proportion to their quantizers; 1
    where either adds nothing."""
    return (measured - 1.0) / (estimated - 1.0) if estimated > 1.0 and measured > 1.0 else 1.0


def process_share() -> float | None:
    """The share of a core this process got over its life so far: its CPU seconds over its wall seconds (Linux's
    /proc), between `MIN_SHARE` and 1; None where they cannot be read.

    The resolver's imports, the model's build and the plan's timings run seconds before the study, as CPU bound as
    it: their share follows the load of that while, not of the one second the fp32 forward is timed in, and it tells
    the study's own share (its CPU over wall seconds) where the load holds, not where it changes after the plan (how
    near it came: docs/evidence.md ("Grounds of rules in the code"))."""
    try:
        return share_from_proc(Path("/proc/self/stat").read_text(), Path("/proc/uptime").read_text(),
                               os.sysconf("SC_CLK_TCK"))
    except (OSError, IndexError, ValueError):
        return None


def share_from_proc(stat: str, uptime: str, ticks: int) -> float | None:
    """`process_share` from the texts of /proc/self/stat and /proc/uptime and the clock ticks per second: user and
    system CPU time (the 14th and 15th fields) over the seconds since the process started (the 22nd, in ticks after
    boot); None where no time has passed."""
    fields_after_name = stat.rsplit(")", 1)[1].split()
    wall = float(uptime.split()[0]) - int(fields_after_name[19]) / ticks
    cpu = (int(fields_after_name[11]) + int(fields_after_name[12])) / ticks
    return min(1.0, max(MIN_SHARE, cpu / wall)) if wall > 0 else None


def fp8_forward_ratios(module: torch.nn.Module, single: torch.Tensor, single_s: float,
                       quantized: Mapping[str, Collection[str]]) -> dict[str, float]:
    """Each simulated FP8 variant's forward over the fp32 one: the fp32 forward plus ModelOpt's quantizer over the
    inputs it quantizes (`quantized_inputs`, `quantizers_s`) at the module paths `quantized` names for the variant
    (the layers its recipe quantizes). `FP8_FORWARD` where none is found, and for all where timing them fails (the
    study meets that failure itself and reports it on its variant; the plan keeps what else it measured)."""
    placed = set().union(*quantized.values())
    try:
        seconds = quantizers_s({path: shapes for path, shapes in quantized_inputs(module, single).items()
                                if path in placed})
    except (RuntimeError, ValueError, TypeError):
        return dict.fromkeys(quantized, FP8_FORWARD)

    def ratio(paths: Collection[str]) -> float:
        added = sum(s for path, s in seconds.items() if path in paths)
        return (single_s + added) / single_s if added > 0 else FP8_FORWARD

    return {name: ratio(paths) for name, paths in quantized.items()}


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
    """Work (`Pace.work_s`, at PyTorch's threads now) of one pass of ModelOpt's e4m3 fake quantizer (the simulated
    FP8 variants' own, on its pure-PyTorch path) over a tensor of each shape, by the key it is listed under (a key
    without shapes left out), after one untimed pass over them all (its set-up)."""
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
            started = _Clock()
            for shape in calls:
                quantizer(tensors[shape])
            seconds[key] = started.work_s(torch.get_num_threads())
    return seconds


@dataclass(frozen=True)
class Bf16Timing:
    """The same work timed in bf16 and in fp32 on this CPU, in seconds, and how (`how`: what each figure is)."""

    subject: str  # what was timed, e.g. "a 3 x 3 convolution"
    fp32_s: float
    bf16_s: float
    how: str

    @property
    def ratio(self) -> float:
        """bf16 / fp32."""
        return self.bf16_s / self.fp32_s

    def words(self) -> str:
        """The figures behind the ratio, e.g. "a 3 x 3 convolution took 44.1 ms in bf16 against 0.501 ms in fp32 (the
        least of 7 alternated calls each)"."""
        return (f"{self.subject} took {self.bf16_s * 1e3:.3g} ms in bf16 against {self.fp32_s * 1e3:.3g} ms in fp32 "
                f"({self.how})")


def _model_bf16_ratio(module: torch.nn.Module, single: torch.Tensor, single_s: float, threads: int) -> Bf16Timing:
    """The model's forward in bf16 against its fp32 forward (`_steady` both, at one thread the process's CPU seconds,
    which the load does not lengthen): a study that keeps bf16 runs the model, whose ratio a convolution's need not
    tell (an example: docs/evidence.md ("Grounds of rules in the code"))."""
    import copy

    import torch

    converted = copy.deepcopy(module).to(torch.bfloat16)
    sample = single.to(torch.bfloat16)
    with torch.no_grad():
        bf16_s = _steady(lambda: converted(sample)).work_s(threads)
    return Bf16Timing("the model's forward", single_s, bf16_s, f"the work of one call over {STEADY_S:g} s of calls")


def bf16_ratio(clock: Callable[[], float] = time.perf_counter) -> Bf16Timing:
    """A 3 x 3 convolution in bf16 against fp32 on this CPU: where the CPU has no fast bf16 path, PyTorch runs it
    many times slower (docs/evidence.md ("Grounds of rules in the code")). One untimed call of each, then
    `BF16_CALLS` of each alternated (`least_alternated`), so that a load that comes and goes meets both."""
    import copy

    import torch

    conv = torch.nn.Conv2d(32, 32, 3, padding=1).eval()
    sample = torch.randn(1, 32, 28, 28)
    with torch.no_grad():
        conv_bf16 = copy.deepcopy(conv).to(torch.bfloat16)  # `to` converts in place: fp32's calls keep their own
        sample_bf16 = sample.to(torch.bfloat16)
        fp32_s, bf16_s = least_alternated(lambda: conv(sample), lambda: conv_bf16(sample_bf16), BF16_CALLS, clock)
    return Bf16Timing("a 3 x 3 convolution", fp32_s, bf16_s, f"the least of {BF16_CALLS} alternated calls each")


def least_alternated(first: Callable[[], object], second: Callable[[], object], calls: int,
                     clock: Callable[[], float] = time.perf_counter) -> tuple[float, float]:
    """The least seconds of one call of `first` and of `second` by `clock`, after one untimed call of each, over
    `calls` of each taken in turn (first, second, first, ...): the other work only lengthens a call, so each
    least is a call it left alone, and taking them in turn exposes both to the same load."""
    first()
    second()
    least_first = least_second = math.inf
    for _ in range(calls):
        started = clock()
        first()
        middle = clock()
        second()
        ended = clock()
        least_first, least_second = min(least_first, middle - started), min(least_second, ended - middle)
    return least_first, least_second


@dataclass(frozen=True)
class Pace:
    """Seconds of one call: wall, and this process's CPU (all its threads)."""

    wall_s: float
    cpu_s: float

    def work_s(self, threads: int) -> float:
        """The call's work: at one thread its CPU seconds (never above the wall's), which the load does not change;
        at more, its wall seconds (more threads are chosen only where the load leaves their cores free)."""
        return min(self.wall_s, self.cpu_s) if threads == ONE_THREAD else self.wall_s

    def share(self, threads: int) -> float:
        """The share of a core each of `threads` threads got in the calls, between `MIN_SHARE` and 1."""
        return min(1.0, max(MIN_SHARE, self.cpu_s / (self.wall_s * threads))) if self.wall_s > 0 else 1.0


class _Clock:
    """Wall and CPU seconds from its making."""

    def __init__(self) -> None:
        self.wall, self.cpu = time.perf_counter(), time.process_time()

    def pace(self, calls: int = 1) -> Pace:
        return Pace((time.perf_counter() - self.wall) / calls, (time.process_time() - self.cpu) / calls)

    def work_s(self, threads: int) -> float:
        return self.pace().work_s(threads)


def _steady(step: Callable[[], object]) -> Pace:
    """One call of `step` as the study's calls run: after the first call, calls for `STEADY_S` (at least one),
    their mean wall and CPU seconds: the throughput the load leaves, which is what a study's many calls get.

    The first call sets up (allocations, oneDNN's primitives for each shape) and takes longer than the calls after
    it, which are what a study's forwards cost (what counting it did to the estimate: docs/evidence.md ("Grounds of
    rules in the code")). A call of a few milliseconds can run between two of the other work's turns on
    the cores; a second of them cannot, so their mean holds the load's share.
    """
    step()
    calls = 0
    started = _Clock()
    while calls == 0 or time.perf_counter() - started.wall < STEADY_S:
        step()
        calls += 1
    return started.pace(calls)


def _steady_in_turn(first: Callable[[], object], second: Callable[[], object]) -> tuple[Pace, Pace]:
    """One call of `first` and one of `second` as the study's calls run, timed in turn: after one call of each
    (`_steady`'s set-up call), a call of each in turn for `STEADY_S` (at least one of each), each side's mean wall and
    CPU seconds.

    In turn, both meet the same stretches of the machine (another process's burst, a slower spell of a shared host),
    so their ratio holds where the means of two windows of a second each, one after the other, do not (how far those
    moved: docs/evidence.md ("Grounds of rules in the code"))."""
    first()
    second()
    spent = [Pace(0.0, 0.0), Pace(0.0, 0.0)]
    calls = 0
    started = time.perf_counter()
    while calls == 0 or time.perf_counter() - started < STEADY_S:
        for side, step in enumerate((first, second)):
            clock = _Clock()
            step()
            pace = clock.pace()
            spent[side] = Pace(spent[side].wall_s + pace.wall_s, spent[side].cpu_s + pace.cpu_s)
        calls += 1
    return Pace(spent[0].wall_s / calls, spent[0].cpu_s / calls), Pace(spent[1].wall_s / calls, spent[1].cpu_s / calls)


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
    """Seconds the study takes after this point (the model is built, ModelOpt imported), by step: before the first
    variant, the model and images loaded, the fp32 reference and the BatchNorm folded; per variant its build, quality
    and stress inputs and trace, each in forwards of the measured work, and the work a variant takes whatever the
    model (`VARIANT_S`, `FP8_VARIANT_S`); its warm-up and timing rounds. Work is divided by the share of a core the
    load leaves (`Machine.share`); the warm-up's seconds are wall seconds, the same at any load.

    The first FP8 variant's build is the measured one (`Machine.fp8_build_s`, one calibration sample) and the
    calibration forwards of the other samples; it counts once, with the first FP8 variant: the study's FP8 recipes
    take copies of one calibration (`builders.pytorch.variant_modules.Calibrations`; a recipe that folds or scales
    weights otherwise calibrates again, which this leaves out)."""
    f, share = machine.forward_s, machine.share
    quality = plan.eval_count or images
    batches = math.ceil(quality / plan.batch)
    fp8 = [v for v in plan.variants if v.precision == "fp8"]
    before = BEFORE_S + batches * f + (STRUCTURE_FORWARD * machine.single_s if fp8 else 0.0)
    timing = plan.timing
    variants: dict[str, float] = {}
    timed_s = 0.0
    calibrated = False  # the study calibrates once; its FP8 variants take copies (`Calibrations`)
    for variant in plan.variants:
        ratio = {"fp8": machine.fp8_ratios.get(variant.name, FP8_FORWARD),
                 "bf16": machine.bf16_ratio}.get(variant.precision, 1.0)
        build, fixed = 0.0, VARIANT_S
        if variant.precision == "fp8":
            if calibrated:
                build, fixed = (FP8_BUILD + STRUCTURE_FORWARD) * machine.single_s, fixed + FP8_VARIANT_S
            else:
                build, fixed = _fp8_build(plan, machine), fixed + FP8_VARIANT_S + FIRST_FP8_TRACE_S
            calibrated = True
        checks = batches * f + stress * machine.single_s
        traced = machine.traced_s if machine.traced_s is not None else TRACE_FORWARD * f
        trace = 2 * f + plan.trace_calls * traced
        timed_s += (max(timing.warmup_s, f * ratio / share)
                    + timing.rounds * (timing.switch_warmup + timing.iters) * f * ratio / share)
        variants[variant.name] = (fixed + build + (checks + trace) * ratio) / share
    return StepEstimate(before / share, variants, timed_s)


def _fp8_build(plan: StudyPlan, machine: Machine) -> float:
    """Work of the first FP8 variant's build: the measured build on one sample and what each other sample adds to
    the calibration (`CALIBRATION_FORWARD` fp32 forwards of one sample); where it was not measured, ModelOpt's
    quantize and the structure in forwards, and `CALIBRATION_FORWARD` for every sample (the first one's set-up,
    which the measured build holds, left out)."""
    per_sample = machine.single_s * CALIBRATION_FORWARD
    if machine.fp8_build_s is not None:
        return machine.fp8_build_s + max(plan.calib_count - 1, 0) * per_sample
    return (FP8_BUILD + STRUCTURE_FORWARD) * machine.single_s + plan.calib_count * per_sample


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
        notes.append(f"bf16 left out: it ran {machine.bf16_ratio:.3g}x slower than fp32 on this CPU just now: "
                     f"{machine.bf16.words()} (--variants fp32,bf16,fp8 runs it)")
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
                    + f"; one fp32 forward {machine.forward_wall_s:.2f} s, at the {machine.share:.0%} of a core "
                    "the load leaves it")
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
