"""The FP8 probe: every convolution and linear of a model, in fp16 as PyTorch runs it and in real FP8
kernels (cuDNN, cuBLASLt), with the activation quantize as its own step, timed in isolation.

Layers come from forward hooks on the study images; layers of one spec are timed once (the count
kept) and traced one by one. The result is a session like a study's; its sums are an estimate from
isolated layers, never an engine time.
"""

from __future__ import annotations

import datetime as dt
import fnmatch
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from builders.models.layer_spec import LayerSpec, group_by_spec, spec_of
from inspector.probe.probe_session import (
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

REPLAY_TARGET_MS = 0.2  # one timed replay holds about this much work ...
MAX_CALLS_PER_REPLAY = 128  # ... in at most this many back-to-back calls
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
    from builders.engine.probe_kernels import import_cudnn

    return import_cudnn()


@dataclass
class CapturedLayer:
    name: str
    module: Any  # torch.nn.Module (torch loads lazily)
    spec: LayerSpec
    amax: float  # over the calibration images
    x16: Any  # torch.Tensor: the layer's input at the probe batch


def _selected(name: str, patterns: list[str]) -> bool:
    return not patterns or any(fnmatch.fnmatchcase(name, p) for p in patterns)


def collect(model, static_input, calibration, patterns: list[str]) -> list[CapturedLayer]:
    """Convolutions and linears in call order, with their input at the probe batch and its amax
    over the calibration images. A module called twice keeps its first call."""
    import torch

    amax: dict[str, float] = {}
    seen: dict[str, CapturedLayer] = {}
    recording = {"inputs": False}

    def hook(name: str):
        def record(module, inputs, _output):
            x = inputs[0]
            if not recording["inputs"]:
                amax[name] = max(amax.get(name, 0.0), float(x.detach().abs().max()))
            elif name not in seen:
                spec = spec_of(module, x)
                if spec is not None:
                    seen[name] = CapturedLayer(name, module, spec, 0.0, x.detach().clone())

        return record

    handles = [
        module.register_forward_hook(hook(name))
        for name, module in model.named_modules()
        if isinstance(module, (torch.nn.Conv2d, torch.nn.Linear)) and _selected(name, patterns)
    ]
    try:
        with torch.no_grad():
            model(calibration)
            recording["inputs"] = True
            model(static_input)
    finally:
        for handle in handles:
            handle.remove()
    for layer in seen.values():
        layer.amax = amax.get(layer.name, 0.0)
    return list(seen.values())


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
    from profilers.timing import clock_for, measure

    steps = {name: timed_step(fn) for name, fn in fns.items()}
    samples = measure({name: s.step for name, s in steps.items()}, plan, clock_for("cuda"))
    notes = sorted({s.note for s in steps.values() if s.note})
    return ShapeTimes(
        measured_as=measured_as,
        samples={name: [v / steps[name].calls for v in values] for name, values in samples.items()},
        reps={name: s.calls for name, s in steps.items()},
        graphed=all(s.graphed for s in steps.values()),
        note="; ".join(notes),
    )


@dataclass
class LayerRun:
    """What the traced call runs for one layer, in each variant."""

    fp16: list[tuple[str, Callable[[], object]]]
    fp8: list[tuple[str, Callable[[], object]]]


def _fp8_run(name: str, x16, inverse, op, prepared, quantizer) -> list[tuple[str, Callable[[], object]]]:
    held: dict[str, object] = {}

    def quantize_input() -> None:
        held["x8"] = quantizer.run(x16, inverse, op.channels_last)

    return [(quantizer_name(name), quantize_input), (name, lambda: op(held["x8"], prepared))]


def probe_layers(captured: list[CapturedLayer], plan, cudnn,
                 report: Report) -> tuple[list[ProbedLayer], dict, list[LayerRun], str]:
    """FP8 kernel choice, numerics and timing per spec; what the trace runs per layer."""
    from builders.engine.probe_kernels import make_quantizer

    quantizer = make_quantizer()
    handle = cudnn.create_handle()
    by_name = {layer.name: layer for layer in captured}
    groups = group_by_spec((layer.name, layer.spec) for layer in captured)
    probed: dict[str, tuple[ProbedLayer, LayerRun]] = {}
    times: dict[LayerSpec, ShapeTimes] = {}
    for index, (spec, names) in enumerate(groups.items(), 1):
        members = [by_name[n] for n in names]
        times[spec], refusals = _probe_shape(spec, members, plan, quantizer, cudnn, handle, probed)
        report(_progress_line(index, len(groups), spec, len(names), times[spec], refusals))
    ordered = [probed[layer.name] for layer in captured]
    return [p for p, _ in ordered], times, [r for _, r in ordered], quantizer.implementation


def _probe_shape(spec: LayerSpec, members: list[CapturedLayer], plan, quantizer, cudnn, handle,
                 probed: dict) -> tuple[ShapeTimes, list[str]]:
    """Choose the FP8 kernel on the first layer with a non-zero input, check every member's numerics,
    time the shape once; fills `probed` (name -> ProbedLayer, LayerRun). Returns the refusals where
    no FP8 kernel ran."""
    import torch

    from builders.engine.probe_kernels import choose, scale_from_amax

    rep = next((m for m in members if bool(m.x16.any())), members[0])
    x_timed = rep.x16 if bool(rep.x16.any()) else torch.randn_like(rep.x16)
    rep_scale = scale_from_amax(rep.amax or float(x_timed.abs().max()))
    choice = choose(spec, rep.module.weight, rep.module.bias, rep_scale, x_timed, quantizer, cudnn, handle)
    op = choice.op
    for m in members:
        layer = ProbedLayer(m.name, type(m.module).__name__, spec, op.path if op else None, choice.refusals,
                            zero_input=not bool(m.x16.any()))
        fp16_run: list[tuple[str, Callable[[], object]]] = [(m.name, partial(m.module, m.x16))]
        if op is None:
            probed[m.name] = (layer, LayerRun(fp16_run, fp16_run))
            continue
        scale = scale_from_amax(m.amax)
        inverse = torch.tensor(1.0 / scale, device=m.x16.device)
        prepared = op.prepare(m.module.weight, m.module.bias, scale)
        if not layer.zero_input:  # an all-zero input leaves only the bias: nothing FP8 to judge
            layer.rel_error = relative_error(op(quantizer.run(m.x16, inverse, op.channels_last), prepared),
                                             m.module(m.x16))
        probed[m.name] = (layer, LayerRun(fp16_run, _fp8_run(m.name, m.x16, inverse, op, prepared, quantizer)))
    fns: dict[str, Callable[[], object]] = {"fp16": partial(rep.module, x_timed)}
    if op is not None:
        inverse = torch.tensor(1.0 / rep_scale, device=x_timed.device)
        prepared = op.prepare(rep.module.weight, rep.module.bias, rep_scale)
        fns["fp8"] = partial(op, quantizer.run(x_timed, inverse, op.channels_last), prepared)
        fns["quantize"] = partial(quantizer.run, x_timed, inverse, op.channels_last)
        fns["amax"] = partial(torch.linalg.vector_norm, x_timed, float("inf"))  # max |x| in one reduction
    shape_times = measure_shape(fns, plan, rep.name)
    if x_timed is not rep.x16:
        shape_times.note = "; ".join(filter(None, [shape_times.note,
                                                   "timed on random data: the real input is all zeros"]))
    return shape_times, choice.refusals if op is None else []


def _progress_line(index: int, total: int, spec: LayerSpec, count: int, times: ShapeTimes, refusals: list[str]) -> str:
    from profilers.stats import latency_stats

    parts = [f"{step} {latency_stats(times.samples[step]).median_ms * 1e3:.1f} us"
             for step in STEPS if times.samples.get(step)]
    tail = f"; no FP8 kernel: {'; '.join(refusals)}" if refusals else ""
    return f"{index}/{total} {spec.label()} x{count}: {', '.join(parts)}{tail}"


def _trace(steps: list[tuple[str, Callable[[], object]]], tracer) -> TraceRecords:
    """One eager call of every layer in model order, each inside a range named after its layer."""
    import torch

    from profilers.module_ranges import named_range

    kind = tracer.range_kind or "annotation"

    def run_once() -> None:
        with torch.no_grad():
            for name, fn in steps:
                with named_range(kind, name):
                    fn()

    run_once()  # lazy set-up (plans, handles, compiled kernels) stays out of the trace
    torch.cuda.synchronize()
    return tracer.trace(run_once, 1, "cuda", torch.cuda.synchronize)


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


def _collected(inputs, options: ProbeOptions):
    """The fp16 model on the GPU, the probe batch, and its convolutions and linears."""
    import torch

    loaded = inputs.model
    if getattr(loaded, "module", None) is None:
        raise InputError(f"probe needs a PyTorch model (timm or Hugging Face); {options.model} is an ONNX file")
    model = loaded.module.to(device="cuda", dtype=torch.float16).eval()
    static = inputs.static_input.to(device="cuda", dtype=torch.float16)
    captured = collect(model, static, inputs.calibration.to(device="cuda", dtype=torch.float16), list(options.layers))
    if not captured:
        raise InputError(f"no convolution or linear of {loaded.name} matches --layers {' '.join(options.layers)}")
    return model, static, captured


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

    from sessions.analyses.groups import load_rules

    inputs = probe_inputs(options)
    model, static, captured = _collected(inputs, options)
    report(f"{inputs.model.name}: {len(captured)} layers, {len({c.spec for c in captured})} shapes, batch "
           f"{options.batch}; cuDNN {cudnn.backend_version()}, tracer {'cupti' if cupti_problem is None else 'torch'}")
    plan = options.timing_plan()
    _warm_gpu(model, static, 0.5)
    with torch.no_grad():
        probed, times, runs, quantize_impl = probe_layers(captured, plan, cudnn, report)
    traces = trace_runs(runs, cupti_problem)
    graphed = all(t.graphed for t in times.values())
    session = new_probe_session(options, command, inputs.model, created,
                                probe_method(plan, graphed, quantize_impl, traces))
    session.environment.versions["cudnn-frontend-backend"] = str(cudnn.backend_version())
    scales = (f"FP8 e4m3, per-tensor scales: weights amax / 448 (quantized once, not timed); activations amax / 448 "
              f"over {options.calib_count} calibration images (static, as TensorRT's Q/DQ); fp16 output")
    session.variants = [
        probe_variant(FP16_VARIANT, "fp16", fp16_layers(probed, times), traces.fp16,
                      ["fp16 as PyTorch runs each layer (cuDNN / cuBLAS)"]),
        probe_variant(FP8_VARIANT, "fp8", fp8_layers(probed, times), traces.fp8,
                      [scales, f"quantize: {quantize_impl}"]),
    ]
    session.variant(FP8_VARIANT).notes.append(estimate_line(session, load_rules()))
    return session


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


def probe_method(plan, graphed: bool, quantize_impl: str, traces: Traces) -> TimingMethod:
    replay = ("one CUDA-graph replay" if graphed
              else "one CUDA-graph replay (eager calls where capture failed: see the layers)")
    return TimingMethod(
        timer="cuda-events",
        timed_region=(
            f"per layer shape, in isolation: GPU time between two CUDA events around {replay} of R back-to-back "
            f"calls of the layer alone (R up to {MAX_CALLS_PER_REPLAY}, so that a replay lasts about "
            f"{REPLAY_TARGET_MS:g} ms), divided by R; the layer's real input from the study images, static "
            "(inputs and weights stay in L2 where they fit); fp16, FP8, quantize and amax steps of one shape "
            f"interleaved; {plan.warmup_s:g} s warm-up per step, {plan.rounds} rounds of {plan.iters} replays; "
            "GPU clocks as found"
        ),
        cuda_graph=graphed,
        warmup_s=plan.warmup_s,
        rounds=plan.rounds,
        iters=plan.iters,
        interleaved=True,
        transfers_included=False,
        static_inputs=True,
        per_layer=(
            "median of the isolated timing of the layer's shape: layers of one shape are measured once and share "
            f"the figure; quantize layers time the activation quantize ({quantize_impl}); an engine may fuse it "
            "into the producer or share one between layers that read the same tensor. Sums over layers are an "
            "estimate from isolated layers, not an engine time"
        ),
        kernels="; ".join(filter(None, [
            traces.tracer.describe(1),
            "the traced call runs every layer once, in model order, each in a range of its own", traces.note,
        ])),
    )
