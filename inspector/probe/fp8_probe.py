"""The FP8 probe: every convolution and linear of a model, in fp16 and in FP8 as the cuDNN / cuBLASLt engine runs
that layer (`inspector.probe.engine_layers`: its graphs with the epilogue the engine fuses, plans, GEMMs and scales),
with the activation quantize as its own step, timed in isolation and traced in model order.

Layers come from hooks on the model as the engine builds it, run on the study images; layers of one spec are timed
once in isolation (the count kept, under each layer's `isolated` attributes), then every layer is traced in model
order, as a study traces an engine, for its time. The result is a session like a study's; its sums are an estimate
from layers run alone, never an engine time.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import fnmatch
import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from builders.models.layer_spec import LayerSpec, group_by_spec, spec_of
from inspector.probe.probe_session import (
    ISOLATED,
    STEPS,
    ProbedLayer,
    ShapeTimes,
    fp8_layers,
    fp16_layers,
    probe_variant,
    quantizer_name,
)
from profilers.attribution import TraceRecords
from profilers.tracers import Tracer
from sessions.documents.document import new_session
from sessions.documents.errors import InputError, MissingEnvironment
from sessions.documents.model import Session, TimingMethod
from sessions.documents.options import PROBE, check_values, default
from sessions.documents.paths import session_file
from sessions.documents.plan import TimingPlan
from sessions.documents.storage import session_writer
from sessions.reports.probe_summary import FP8_VARIANT, FP16_VARIANT, estimate_line

if TYPE_CHECKING:  # torch loads after the tracer is prepared (`_probe_session`)
    from inspector.probe.engine_layers import Bound, Kernel

REPLAY_TARGET_MS = 0.2  # one timed replay holds about this much work ...
MAX_CALLS_PER_REPLAY = 128  # ... in at most this many back-to-back calls
TRACE_CALLS = default("trace_calls")  # traced calls, as a study traces a variant: each layer's time and spread
Report = Callable[[str], None]


@dataclass
class ProbeOptions:
    """The probe's options (`sessions.documents.options` declares them, with the probe's defaults and ranges)."""

    model: str
    batch: int = default("batch", PROBE)
    layers: tuple[str, ...] = default("layers", PROBE)  # fnmatch patterns on module paths; empty: all
    images: str | None = default("images", PROBE)
    checkpoint: str | None = default("checkpoint", PROBE)
    calib_count: int = default("calib_count", PROBE)
    seed: int = default("seed", PROBE)  # random weights where no checkpoint is given, as in a study
    rounds: int = default("rounds", PROBE)
    iters: int = default("iters", PROBE)
    warmup_s: float = default("warmup_s", PROBE)
    out: str | None = default("out", PROBE)

    def validate(self) -> None:
        """Every option against the spec, as `run` checks its own: one InputError line for the first wrong one."""
        check_values({name: getattr(self, name) for name in self.__dataclass_fields__})

    def timing_plan(self) -> TimingPlan:
        return TimingPlan(self.warmup_s, self.rounds, self.iters)


def require_fp8_environment():
    """The cuDNN frontend module, once the GPU is known to run FP8; MissingEnvironment otherwise."""
    from builders.fp8.format import gpu_problem

    problem = gpu_problem()
    if problem:
        raise MissingEnvironment(f"probe: {problem}")
    from builders.engine.cudnn_library import import_cudnn

    return import_cudnn()


@dataclass
class CapturedLayer:
    name: str
    module: Any  # torch.nn.Module (torch loads lazily)
    spec: LayerSpec
    amax: float  # the largest |x| of its input over the calibration images
    x16: Any  # torch.Tensor: the layer's input at the probe batch, a convolution's channels-last as the engine's
    residual: Any = None  # torch.Tensor: what the engine's epilogue adds to its output (channels-last), if it adds

    def epilogue_args(self) -> tuple[Any, ...]:
        """What the layer's kernel takes after its input: (its residual,) where its epilogue adds one, else ()."""
        return () if self.residual is None else (self.residual,)


def _selected(name: str, patterns: list[str]) -> bool:
    return not patterns or any(fnmatch.fnmatchcase(name, p) for p in patterns)


def _layers(model) -> list[tuple[str, Any]]:
    """The convolutions and linears the probe times (and the engine lowers): nn.Conv2d and nn.Linear."""
    import torch

    return [(name, m) for name, m in model.named_modules() if isinstance(m, (torch.nn.Conv2d, torch.nn.Linear))]


def calibration_amax(model, calibration) -> dict[str, float]:
    """The largest |x| of every convolution's and linear's input over `calibration`, run in chunks of
    CALIBRATION_CHUNK images as the engine's max calibration runs them; NaN or Inf where the input held one."""
    import torch

    from builders.pytorch.variant_modules import CALIBRATION_CHUNK

    seen: dict[str, list[Any]] = {}

    def hook(name: str):
        def record(_module, inputs) -> None:  # None: the inputs stay as they are
            seen.setdefault(name, []).append(inputs[0].detach().abs().amax())

        return record

    handles = [m.register_forward_pre_hook(hook(name)) for name, m in _layers(model)]
    try:
        with torch.no_grad():
            for chunk in calibration.split(CALIBRATION_CHUNK):
                model(chunk)
    finally:
        for handle in handles:
            handle.remove()
    return {name: float(torch.stack(values).max()) for name, values in seen.items()}


def collect(model, static_input, amax: dict[str, float], patterns: list[str]) -> list[CapturedLayer]:
    """Convolutions and linears matching `patterns`, in call order, with their input at the probe batch (a
    convolution's channels-last, as the engine holds its activations) and `amax` of their input (0 where it has
    none). A module called twice keeps its first call."""
    import torch

    from builders.models.hooks import forward_once

    seen: dict[str, CapturedLayer] = {}

    def hook(name: str):
        def record(module, inputs) -> None:  # None: the inputs stay as they are
            spec = None if name in seen else spec_of(module, inputs[0])
            if spec is not None:
                x = inputs[0].detach().clone()
                x16 = x.contiguous(memory_format=torch.channels_last) if spec.op == "conv" else x
                seen[name] = CapturedLayer(name, module, spec, amax.get(name, 0.0), x16)

        return record

    forward_once(model, static_input, [m.register_forward_pre_hook(hook(name)) for name, m in _layers(model)
                                       if _selected(name, patterns)])
    return list(seen.values())


def with_engine_epilogues(model, static_input, captured: list[CapturedLayer],
                          refused: dict[str, str]) -> list[CapturedLayer]:
    """`captured` with each convolution's epilogue as the engine's lowering of `model` fuses it (`engine_epilogues`:
    in its spec, so layers fused differently are timed apart) and, where that epilogue adds a residual, the value
    added on `static_input` (channels-last, as the engine holds activations). InputError (one line) where the model
    does not trace: the engine could not lower it either."""
    from builders.engine.graph import record_run, trace
    from inspector.probe.engine_layers import engine_epilogues

    try:
        traced = trace(model, static_input)
    except RuntimeError as exc:
        raise InputError(f"probe: {exc}") from None
    names = {layer.name for layer in captured}
    lowered = engine_epilogues(traced, refused, record_run(traced, static_input).shapes)
    epilogues = {path: epilogue for path, epilogue in lowered.items() if path in names}
    residuals = frozenset(e.residual for e in epilogues.values() if e.residual is not None)
    values = record_run(traced, static_input, residuals).values
    layers = []
    for layer in captured:
        epilogue = epilogues.get(layer.name)
        if epilogue is not None:
            residual = None if epilogue.residual is None else values[epilogue.residual]
            layer = dataclasses.replace(layer, spec=dataclasses.replace(layer.spec, epilogue=epilogue.words),
                                        residual=residual)
        layers.append(layer)
    return layers


def relative_error(actual, reference) -> float | None:
    """|actual - reference| / |reference| (L2, in fp32); None where the reference is all zeros."""
    import torch

    ref = reference.float()
    norm = float(torch.linalg.vector_norm(ref))
    if norm == 0 or not torch.isfinite(torch.tensor(norm)):
        return None
    return float(torch.linalg.vector_norm(actual.float() - ref)) / norm


@dataclass
class TimedStep:
    step: Callable[[], None]
    calls: int  # back-to-back calls of the layer per step
    graphed: bool
    note: str = ""
    graph: Any = None  # keeps the CUDA graph (and its memory pool) alive while it is timed


def timed_step(fn: Callable[[], object]) -> TimedStep:
    """A CUDA-graph replay of enough back-to-back calls of `fn` to last about REPLAY_TARGET_MS;
    eager calls where capture fails. The call count comes from replays of a one-call graph: eager
    calls would measure the host, which is slower than the GPU for most single layers."""
    import torch

    fn()
    torch.cuda.synchronize()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    try:
        single = _capture(fn, 1)
    except Exception as exc:  # noqa: BLE001  (capture refused: time eager calls instead)
        torch.cuda.synchronize()
        return _eager_step(fn, f"eager: CUDA-graph capture failed ({type(exc).__name__})")
    calls = _calls_per_replay(_per_call_ms(single.replay))
    if calls == 1:
        return TimedStep(single.replay, 1, True, graph=single)
    try:
        graph = _capture(fn, calls)
    except Exception:  # noqa: BLE001  (the one-call graph still times it)
        return TimedStep(single.replay, 1, True, "one call per replay: a longer capture failed", graph=single)
    return TimedStep(graph.replay, calls, True, graph=graph)


def _capture(fn: Callable[[], object], calls: int):
    import torch

    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            fn()
    return graph


def _per_call_ms(step: Callable[[], object], repeats: int = 20) -> float:
    import torch

    step()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(repeats):
        step()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / repeats


def _calls_per_replay(per_call_ms: float) -> int:
    return max(1, min(MAX_CALLS_PER_REPLAY, int(REPLAY_TARGET_MS / max(per_call_ms, 1e-4))))


def _eager_step(fn: Callable[[], object], note: str) -> TimedStep:
    calls = _calls_per_replay(_per_call_ms(fn, 5))

    def eager() -> None:
        for _ in range(calls):
            fn()

    return TimedStep(eager, calls, False, note)


def measure_shape(fns: dict[str, Callable[[], object]], plan, measured_as: str) -> ShapeTimes:
    from profilers.device import study_device
    from profilers.timing import clock_for, measure

    steps = {name: timed_step(fn) for name, fn in fns.items()}
    gpu_state = study_device("cuda").settle()  # its graphs are made: timed in the state the engine's rows are
    samples = measure({name: s.step for name, s in steps.items()}, plan, clock_for("cuda"))
    notes = sorted({s.note for s in steps.values() if s.note})
    return ShapeTimes(
        measured_as=measured_as,
        samples={name: [v / steps[name].calls for v in values] for name, values in samples.items()},
        reps={name: s.calls for name, s in steps.items()},
        graphed=all(s.graphed for s in steps.values()),
        note="; ".join(notes),
        gpu_state=gpu_state,
    )


@dataclass
class TracedStep:
    """One layer of a traced call: `run` runs it inside a range named `name`; `write`, just before that range and
    outside it, writes the stored inputs `run` reads into the buffers it reads them from, so the layer reads what
    was just written, as an engine's layer reads what the layer before it just wrote (from L2 where it fits)."""

    name: str
    run: Callable[[], object]
    write: Callable[[], object] | None = None


@dataclass
class LayerRun:
    """What the traced call runs for one layer, in each variant."""

    fp16: list[TracedStep]
    fp8: list[TracedStep]


class WrittenInputs:
    """Buffers the traced layers read their inputs from, one per argument position, shape, layout and dtype (layers
    run one at a time, so they share them; a layer's input (position 0) and residual (1) never do, nor an FP8 layer's
    residual and the input its quantize read), each written from a layer's stored input just before the layer runs
    (`TracedStep.write`)."""

    def __init__(self) -> None:
        self._buffers: dict[tuple[int, tuple[int, ...], tuple[int, ...], Any, Any], Any] = {}

    def buffer(self, stored: Any, position: int = 0) -> Any:
        """The buffer `stored`, a layer's argument at `position`, is written into: same shape, strides and dtype."""
        key = (position, tuple(stored.shape), tuple(stored.stride()), stored.dtype, stored.device)
        if key not in self._buffers:
            import torch

            self._buffers[key] = torch.empty_like(stored)
        return self._buffers[key]

    def step(self, name: str, run: Callable[..., object], stored: tuple[Any, ...],
             first_position: int = 0) -> TracedStep:
        """`run` on buffers holding `stored` (the arguments from `first_position` on), written just before its
        range."""
        buffers = tuple(self.buffer(tensor, position) for position, tensor in enumerate(stored, first_position))

        def write() -> None:
            for buffer, tensor in zip(buffers, stored, strict=True):
                buffer.copy_(tensor)

        return TracedStep(name, partial(run, *buffers), write)


def _fp16_run(layer: CapturedLayer, fp16: Bound, inputs: WrittenInputs) -> list[TracedStep]:
    return [inputs.step(layer.name, fp16.run, (layer.x16, *layer.epilogue_args()))]


def _fp8_run(layer: CapturedLayer, inverse: Any, fp8: Bound, quantizer: Any, channels_last: bool,
             inputs: WrittenInputs) -> list[TracedStep]:
    """The quantize of `layer`'s input (its stored fp16 input written just before), then the FP8 layer on what the
    quantize wrote (and its residual, written just before it)."""
    held: dict[str, object] = {}

    def quantize_input(x16: Any) -> None:
        held["x8"] = quantizer.run(x16, inverse, channels_last)

    def layer_run(*epilogue_args: Any) -> object:
        return fp8.run(held["x8"], *epilogue_args)

    return [inputs.step(quantizer_name(layer.name), quantize_input, (layer.x16,)),
            inputs.step(layer.name, layer_run, layer.epilogue_args(), first_position=1)]


def probe_layers(captured: list[CapturedLayer], plan, context, refused: dict[str, str], per_channel: bool,
                 report: Report) -> tuple[list[ProbedLayer], dict, list[LayerRun], str]:
    """Per spec, the engine's kernels of the layer alone in fp16 and FP8 (`engine_layers`: asked, their graphs built,
    chosen), then numerics and timing; what the trace runs per layer. `context` is the engine's BuildContext,
    `refused` the engine's refusals before building (`static_refusals`), `per_channel` the weight scales'."""
    from inspector.probe.engine_layers import PRECISIONS, ask, build_graphs, choose, reserve_workspace

    by_name = {layer.name: layer for layer in captured}
    groups = group_by_spec((layer.name, layer.spec) for layer in captured)
    asked = {spec: [ask(spec, precision, refused, names[0], context.cold_weights) for precision in PRECISIONS]
             for spec, names in groups.items()}
    build_graphs(context, (kernel for kernels in asked.values() for kernel in kernels))
    chosen = {spec: [choose(context, kernel) for kernel in kernels] for spec, kernels in asked.items()}
    if context.cache is not None:
        context.cache.save()
    reserve_workspace(context, (kernel for kernels in chosen.values() for kernel in kernels))
    probed: dict[str, tuple[ProbedLayer, LayerRun]] = {}
    times: dict[LayerSpec, ShapeTimes] = {}
    inputs = WrittenInputs()
    for index, (spec, names) in enumerate(groups.items(), 1):
        fp16, fp8 = chosen[spec]
        members = [by_name[n] for n in names]
        times[spec] = _probe_shape(spec, members, plan, (fp16, fp8), context, per_channel, probed, inputs)
        report(_progress_line(index, len(groups), spec, len(names), times[spec], [fp8.refusal] if fp8.refusal else []))
    ordered = [probed[layer.name] for layer in captured]
    return [p for p, _ in ordered], times, [r for _, r in ordered], context.quantizer().implementation


def _bound(context, kernels: tuple[Kernel, Kernel], layer: CapturedLayer, amax: float,
           per_channel: bool) -> tuple[Bound, Bound | None, Any]:
    """`layer`'s fp16 and FP8 kernels bound to its weights, with the engine's scales for an input of `amax`
    (`layer_scales`); the FP8 one None where it was refused; the inverse input scale the quantize takes."""
    import torch

    from inspector.probe.engine_layers import bind

    fp16, fp8 = kernels
    x_scale, w_scale = layer_scales(layer, amax, per_channel, fp8.refusal is None)
    bound16 = bind(context, fp16, layer.module, None, None)
    assert bound16 is not None  # fp16 always runs: PyTorch's op where the engine has no graph
    inverse = torch.tensor(1.0 / x_scale, device=layer.x16.device)
    return bound16, bind(context, fp8, layer.module, x_scale, w_scale), inverse


def layer_scales(layer: CapturedLayer, amax: float, per_channel: bool, fp8: bool) -> tuple[float, Any]:
    """`layer`'s input scale for an input of `amax` and its weight scales (None where it runs no FP8: `fp8` False),
    by the engine's rule (`calibrated_scale`); InputError (one line, naming the layer) where an amax is not finite."""
    from builders.fp8.format import calibrated_scale
    from inspector.probe.engine_layers import weight_scales

    try:
        return calibrated_scale(amax), weight_scales(layer.module.weight, per_channel) if fp8 else None
    except ValueError as exc:
        raise InputError(f"{layer.name}: {exc}") from exc


def _probe_shape(spec: LayerSpec, members: list[CapturedLayer], plan, kernels: tuple[Kernel, Kernel], context,
                 per_channel: bool, probed: dict, inputs: WrittenInputs) -> ShapeTimes:
    """Every member's numerics (against its fp16 module with the spec's epilogue in PyTorch) and what the trace runs
    for it (fills `probed`: name -> ProbedLayer, LayerRun; inputs written into `inputs`' buffers), then the shape
    timed once, on the first member with a non-zero input."""
    import torch

    from builders.engine.conv_tactics import apply_epilogue

    quantizer, channels_last = context.quantizer(), spec.op == "conv"
    bound: dict[str, tuple[Bound, Bound | None, Any]] = {}
    for m in members:
        bound16, bound8, inverse = bound[m.name] = _bound(context, kernels, m, m.amax, per_channel)
        layer = ProbedLayer(m.name, type(m.module).__name__, spec, bound8.path if bound8 else None,
                            [kernels[1].refusal] if kernels[1].refusal else [], zero_input=not bool(m.x16.any()),
                            fp16_path=bound16.path)
        fp16_run = _fp16_run(m, bound16, inputs)
        if bound8 is None:
            probed[m.name] = (layer, LayerRun(fp16_run, fp16_run))
            continue
        if not layer.zero_input:  # an all-zero input leaves only the bias: nothing FP8 to judge
            x8 = quantizer.run(m.x16, inverse, channels_last)
            layer.rel_error = relative_error(bound8.run(x8, *m.epilogue_args()),
                                             apply_epilogue(m.module(m.x16), spec.epilogue, m.residual))
        probed[m.name] = (layer, LayerRun(fp16_run, _fp8_run(m, inverse, bound8, quantizer, channels_last, inputs)))
    rep = next((m for m in members if bool(m.x16.any())), members[0])
    x_timed = rep.x16 if bool(rep.x16.any()) else torch.randn_like(rep.x16)
    bound16, bound8, inverse = (bound[rep.name] if x_timed is rep.x16
                                else _bound(context, kernels, rep, float(x_timed.abs().max()), per_channel))
    fns: dict[str, Callable[[], object]] = {"fp16": partial(bound16.run, x_timed, *rep.epilogue_args())}
    if bound8 is not None:
        fns["fp8"] = partial(bound8.run, quantizer.run(x_timed, inverse, channels_last), *rep.epilogue_args())
        fns["quantize"] = partial(quantizer.run, x_timed, inverse, channels_last)
        fns["amax"] = partial(torch.linalg.vector_norm, x_timed, float("inf"))  # max |x| in one reduction
    shape_times = measure_shape(fns, plan, rep.name)
    if x_timed is not rep.x16:
        shape_times.note = "; ".join(filter(None, [shape_times.note,
                                                   "timed on random data: the real input is all zeros"]))
    return shape_times


def _progress_line(index: int, total: int, spec: LayerSpec, count: int, times: ShapeTimes, refusals: list[str]) -> str:
    from profilers.stats import latency_stats

    parts = [f"{step} {latency_stats(times.samples[step]).median_ms * 1e3:.1f} us"
             for step in STEPS if times.samples.get(step)]
    tail = f"; no FP8 kernel: {'; '.join(refusals)}" if refusals else ""
    return f"{index}/{total} {spec.label()} x{count}: {', '.join(parts)}{tail}"


def _trace(steps: list[TracedStep], tracer) -> TraceRecords:
    """`TRACE_CALLS` eager calls, each running every layer once in model order inside a range named after it, its
    inputs written just before the range (outside every layer)."""
    import torch

    from profilers.module_ranges import named_range

    kind = tracer.range_kind or "annotation"

    def run_once() -> None:
        with torch.no_grad():
            for step in steps:
                if step.write is not None:
                    step.write()
                with named_range(kind, step.name):
                    step.run()

    run_once()  # lazy set-up (plans, handles, compiled kernels) stays out of the trace
    torch.cuda.synchronize()
    return tracer.trace(run_once, TRACE_CALLS, "cuda", torch.cuda.synchronize)


@dataclass
class Traces:
    fp16: TraceRecords
    fp8: TraceRecords
    tracer: Tracer
    note: str = ""


def trace_runs(runs: list[LayerRun], cupti_problem: str | None) -> Traces:
    """CUPTI where it loads, torch.profiler otherwise; the timings stand either way."""
    from profilers.tracers import get_tracer

    fp16 = [step for run in runs for step in run.fp16]
    fp8 = [step for run in runs for step in run.fp8]
    note = "" if cupti_problem is None else f"CUPTI unavailable ({cupti_problem}): kernels from torch.profiler"
    tracer = get_tracer("cupti" if cupti_problem is None else "torch")
    try:
        records16 = _trace(fp16, tracer)
    except MissingEnvironment as exc:  # CUPTI taken by another profiler, or refused
        tracer, note = get_tracer("torch"), f"CUPTI refused ({exc.message}): kernels from torch.profiler"
        records16 = _trace(fp16, tracer)
    return Traces(records16, _trace(fp8, tracer), tracer, note)


def _warm_gpu(model, x, seconds: float) -> None:
    """Whole-model forwards until the clocks have ramped up."""
    import torch

    deadline = time.perf_counter() + seconds
    with torch.no_grad():
        while time.perf_counter() < deadline:
            model(x)
            torch.cuda.synchronize()


def probe_inputs(options: ProbeOptions):
    """The study's model and real images (builders.study_inputs), chosen as a study with these options would."""
    from builders.study_inputs import InputChoice, load_inputs

    return load_inputs(InputChoice(options.model, options.batch, options.calib_count, options.images,
                                   options.checkpoint, options.seed))


@dataclass
class EngineModel:
    """The model as the engine builds it (fp16, on the GPU), the probe batch, the layers captured on it, and the
    precision their calibration ran in."""

    model: Any
    static: Any
    captured: list[CapturedLayer]
    calibrated_in: str  # fp16, or fp32 where fp16 activations overflowed (ModelOpt's calibration then runs in fp32)


def _collected(inputs, options: ProbeOptions) -> EngineModel:
    """The model as the engine builds it (`plain_model`), its convolutions and linears on the probe batch, and each
    one's input amax over the calibration images (`engine_calibration`: in fp32 where fp16 overflows)."""
    import torch

    from builders.models.structure import model_structure
    from inspector.probe.engine_layers import plain_model

    loaded = inputs.model
    if getattr(loaded, "module", None) is None:
        raise InputError(f"probe needs a PyTorch model (timm or Hugging Face); {options.model} is an ONNX file")
    reference = loaded.module.to(device="cuda", dtype=torch.float32).eval()
    conv_bn = model_structure(reference, inputs.static_input[:1].to("cuda")).conv_bn
    model = plain_model(reference, conv_bn, torch.float16)
    amax, calibrated_in = engine_calibration(model, partial(plain_model, reference, conv_bn, torch.float32),
                                             inputs.calibration.to("cuda"))
    static = inputs.static_input.to(device="cuda", dtype=torch.float16)
    captured = collect(model, static, amax, list(options.layers))
    if not captured:
        raise InputError(f"no convolution or linear of {loaded.name} matches --layers {' '.join(options.layers)}")
    return EngineModel(model, static, captured, calibrated_in)


def engine_calibration(model, fp32: Callable[[], Any], calibration) -> tuple[dict[str, float], str]:
    """Each convolution's and linear's input amax over `calibration` as the engine's calibration takes it, and the
    precision it ran in: on `model` (fp16); on `fp32()` (the same model in fp32) where an fp16 amax is not finite, as
    the engine's calibration falls back; InputError (one line) where one is not finite in fp32 either: no FP8 scale
    holds it."""
    amax = calibration_amax(model, calibration.half())
    if all(math.isfinite(value) for value in amax.values()):
        return amax, "fp16"
    amax = calibration_amax(fp32(), calibration.float())
    overflowed = [name for name, value in amax.items() if not math.isfinite(value)]
    if overflowed:
        raise InputError(f"calibration: the input of {overflowed[0]} reaches {amax[overflowed[0]]} even in fp32 "
                         f"({len(overflowed)} layers): no FP8 scale holds it")
    return amax, "fp32"


def run_probe(options: ProbeOptions, command: list[str], report: Report, force: bool = False) -> tuple[Session, Path]:
    """Probe the model and save its session, as `run` saves a study's: the options and the session file are
    checked before any work (`session_writer`: the lock held to the end, an existing file replaced only with
    `force`, a default name never shared with another probe). Returns the session and where it was saved."""
    options.validate()
    created = dt.datetime.now(dt.UTC)
    with session_writer(session_file(options.out, options.model, created, "probe", f"b{options.batch}"),
                        force) as writer:
        session = _probe_session(options, command, report, created)
        return session, writer.finish(session)


def _probe_session(options: ProbeOptions, command: list[str], report: Report, created: dt.datetime) -> Session:
    """The probe's measurements as a session (started at `created`); nothing is saved here."""
    from profilers.tracers import get_tracer

    cupti_problem = get_tracer("cupti").prepare()  # before torch loads: NVTX binds its injection once
    cudnn = require_fp8_environment()
    import torch

    from builders.engine.build import static_refusals
    from inspector.probe.engine_layers import engine_context, probe_recipe
    from sessions.analyses.groups import load_rules

    inputs, recipe = probe_inputs(options), probe_recipe()
    built = _collected(inputs, options)
    captured = built.captured
    report(f"{inputs.model.name}: {len(captured)} layers, {len({c.spec for c in captured})} shapes, batch "
           f"{options.batch}; cuDNN {cudnn.backend_version()}, tracer {'cupti' if cupti_problem is None else 'torch'}")
    plan = options.timing_plan()
    _warm_gpu(built.model, built.static, 0.5)
    refused = static_refusals(built.model, {c.name for c in captured})
    captured = with_engine_epilogues(built.model, built.static, captured, refused)
    context = engine_context(cudnn, built.static, built.model)  # its plan workers are closed below, whatever happens
    try:
        with torch.no_grad():
            probed, times, runs, quantize_impl = probe_layers(captured, plan, context, refused,
                                                              recipe.weights == "per-channel", report)
    finally:
        context.compiler.close()
    traces = trace_runs(runs, cupti_problem)
    graphed = all(t.graphed for t in times.values())
    session = new_probe_session(options, command, inputs.model, created,
                                probe_method(plan, graphed, quantize_impl, traces))
    session.environment.versions["cudnn-frontend-backend"] = str(cudnn.backend_version())
    session.environment.gpu_state = probe_gpu_state(times.values())
    session.variants = [
        probe_variant(FP16_VARIANT, "fp16", fp16_layers(probed, times), traces.fp16, [FP16_NOTE]),
        probe_variant(FP8_VARIANT, "fp8", fp8_layers(probed, times), traces.fp8,
                      [scales_note(recipe, options.calib_count, built.calibrated_in), f"quantize: {quantize_impl}"]),
    ]
    session.variant(FP8_VARIANT).notes.append(estimate_line(session, load_rules()))
    return session


FP16_NOTE = ("fp16 as the cuDNN / cuBLASLt engine runs each layer: a convolution's graph with the epilogue the "
             "engine fuses into it (its activation, the residual it adds; fp16 output), its plans timed as the engine "
             "times them (the engine's timing cache), or the other library's tactic the engine picks (a cuBLASLt "
             "GEMM, ATen's depthwise kernel); a linear as PyTorch's op")


def scales_note(recipe, calib_count: int, calibrated_in: str) -> str:
    """How the FP8 layers were scaled: the engine's rule for `recipe`, on `calib_count` images; the e4m3 maximum and
    the scale floor as `builders.fp8.format` has them."""
    from builders.fp8 import format as fp8_format

    divisor, floor = f"{fp8_format.E4M3_MAX:g}", f"2^{math.log2(fp8_format.MIN_SCALE):g}"
    return (f"FP8 e4m3 with the engine's scales (recipe {recipe.name}): weights {recipe.weights} amax / {divisor} "
            f"(quantized once, not timed); activations per-tensor amax / {divisor} over {calib_count} calibration "
            f"images (max calibration in {calibrated_in}, static); every scale at least {floor}; BatchNorm folded into "
            "the convolutions it reads; fp16 output")


def new_probe_session(options: ProbeOptions, command: list[str], model, created: dt.datetime,
                      method: TimingMethod) -> Session:
    import torch

    from profilers import environment

    env = environment.collect("cuda", torch.version.cuda)
    env.versions["cudnn"] = str(torch.backends.cudnn.version())
    return new_session(
        model=model.name, source=model.source, input_shape=list(model.input_size), batch=options.batch,
        command=command, created=created, backend="probe", device="cuda",
        weights=options.checkpoint or f"random (pretrained=False, seed {options.seed})",
        engine=f"layers alone: PyTorch {torch.__version__}, cuDNN {env.versions['cudnn']} and cuBLASLt",
        environment=env,
        method=method,
    )


def probe_gpu_state(times: Iterable[ShapeTimes]) -> str | None:
    """The GPU state the probe's shapes were timed in: where one shape's was not settled, its words (a caveat), else
    the words they share."""
    from sessions.documents.vocab import shared_gpu_state

    return shared_gpu_state(t.gpu_state for t in times)


def probe_method(plan, graphed: bool, quantize_impl: str, traces: Traces) -> TimingMethod:
    from profilers.timing import ROUND_ORDER_WORDS

    replay = ("one CUDA-graph replay" if graphed
              else "one CUDA-graph replay (eager calls where capture failed: see the layers)")
    return TimingMethod(
        timer="cuda-events",
        timed_region=(
            f"per layer shape, in isolation: GPU time between two CUDA events around {replay} of R back-to-back "
            f"calls of the layer alone (R up to {MAX_CALLS_PER_REPLAY}, so that a replay lasts about "
            f"{REPLAY_TARGET_MS:g} ms), divided by R; the layer's real input from the study images, static "
            "(inputs and weights stay in L2 where they fit); fp16, FP8, quantize and amax steps of one shape "
            f"interleaved; {plan.warmup_s:g} s warm-up per step, {plan.rounds} rounds{ROUND_ORDER_WORDS} of "
            f"{plan.iters} replays; "
            "Python's garbage collector off during warm-ups and rounds; GPU clocks as found; "
            "each shape's graphs timed after another process made and ended a CUDA context "
            "(the state the engine's rows are timed in: profilers/gpu_contexts.py; the environment's CUDA-graph "
            "state says whether it did)"
        ),
        cuda_graph=graphed,
        warmup_s=plan.warmup_s,
        rounds=plan.rounds,
        iters=plan.iters,
        interleaved=True,
        transfers_included=False,
        static_inputs=True,
        per_layer=(
            f"the layer's own kernels' GPU time per traced eager call (mean of {TRACE_CALLS}; each call runs every "
            "layer once, in model order, on the layer's own input, written just before the layer's range (a copy "
            "outside every layer, so the layer reads what was just written, as an engine's layer reads its "
            "producer's output), as a study times an engine's layers, so the two "
            "compare layer by layer; the isolated timing of the layer's shape (the timed region above: layers of one "
            f"shape are measured once and share it) is kept in the layer's {ISOLATED!r} attributes; quantize layers "
            f"time the activation quantize ({quantize_impl}); an engine may fuse it into the producer or share one "
            "between layers that read the same tensor. Sums over layers are an estimate from layers run alone, not "
            "an engine time"
        ),
        kernels="; ".join(filter(None, [
            traces.tracer.describe(TRACE_CALLS),
            "each traced call runs every layer once, in model order, each in a range of its own", traces.note,
        ])),
    )
