"""A whole study, front-end free: plan -> backend -> engines -> tracer and timer -> session.

The CLI and the TUI both run a request (`run_requested_study`), `rerun` and sweep jobs a plan made elsewhere
(`run_study`); each is checked once into an `inspector.resolve.RunPlan` and run by `run_checked`, which reports
progress as immutable snapshots and saves the session after every finished step, so an interrupt or a crash
keeps everything measured so far.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from builders.backend import Backend, BackendContext, Engine, TimingStep
from builders.study_inputs import StudyInputs
from inspector import process
from inspector.build_order import BuildOrder
from inspector.request import StudyRequest
from inspector.resolve import RunPlan, checked, resolve
from profilers.device import study_device
from profilers.memory import device_memory
from profilers.tracers import Tracer
from sessions.analyses.captions import (
    CONSTANT_FP8_LAYERS,
    CONSTANT_LAYERS,
    CONSTANT_WHY_RANDOM,
    NO_REFERENCE,
    quality_caveats,
)
from sessions.analyses.comparison import BASELINE_PRECISION
from sessions.analyses.precision_choice import fp8_outcome, with_covered
from sessions.analyses.summary import VariantSummary, summarize_session
from sessions.documents import document
from sessions.documents.errors import InspectError, first_line
from sessions.documents.model import Layer, Session, TimingMethod, Variant
from sessions.documents.paths import session_file
from sessions.documents.plan import StudyPlan, VariantPlan
from sessions.documents.storage import SessionWriter, session_writer
from sessions.documents.vocab import RAN_FP8

if TYPE_CHECKING:
    from profilers.environment import ConditionSampler


@dataclass(frozen=True)
class Progress:
    """One step of a study, with the finished variants as they stand: what the front ends show."""

    phase: str  # setup | build | quality | trace | timing | done
    message: str
    variant: str | None = None
    done: int = 0
    total: int = 0
    session_path: Path | None = None
    variants: tuple[VariantSummary, ...] = ()
    saved: bool = False  # the session file holds `variants` as they stand: what a front end may call finished
    # what the quality figures of `variants` mean (random weights, a degenerate reference): shown beneath a live table
    caveats: tuple[str, ...] = ()


Report = Callable[[Progress], None]
# Timing rounds are saved at most this often (and after the last): a save reads the file back to check that
# it loads, and a round takes about a second.
ROUND_SAVE_INTERVAL_S = 10.0


class Recorder:
    """Saves the session and reports progress, so that every saved step is also shown."""

    def __init__(self, session: Session, writer: SessionWriter, report: Report) -> None:
        self.session, self.writer, self.report = session, writer, report

    @property
    def path(self) -> Path:
        """Where the steps so far are saved (a partial file while a finished session is being replaced)."""
        return self.writer.current

    def step(self, phase: str, message: str, variant: str | None = None, done: int = 0, total: int = 0,
             saved: bool = True) -> None:
        if saved:
            self.writer.save_step(self.session)
        summaries = tuple(summarize_session(self.session))
        self.report(Progress(phase, message, variant, done, total, self.path, summaries, saved,
                             tuple(quality_caveats(self.session))))

    def finish(self) -> Path:
        """The finished session saved at its path; reported as done."""
        self.writer.finish(self.session)
        self.step("done", f"saved {self.path}", saved=False)
        return self.path


def run_study(plan: StudyPlan, command: list[str], report: Report, force: bool = False) -> tuple[Session, Path]:
    """Run a plan made elsewhere (`rerun`, a sweep job), checked first (`inspector.resolve.checked`)."""
    return run_checked(checked(plan), command, report, force)


def run_requested_study(request: StudyRequest, report: Report, force: bool = False) -> tuple[Session, Path]:
    """Resolve `request` for this machine and run the study: the CLI's and the TUI's one path."""
    report(Progress("setup", f"resolving {request.model} for this machine: backend, device, variants"))
    run = resolve(request)
    for note in run.notes:
        report(Progress("setup", note))
    return run_checked(run, list(request.command), report, force)


def run_checked(run: RunPlan, command: list[str], report: Report, force: bool = False) -> tuple[Session, Path]:
    """Run a checked plan and save its session after every step; an existing session at its path is replaced only
    with `force`, and only when the study is done (see `sessions.documents.storage.session_writer`)."""
    created = dt.datetime.now(dt.UTC)
    with session_writer(session_file(run.plan.out, run.plan.model, created), force) as writer, \
            contextlib.ExitStack() as prepared:
        for builder in dict.fromkeys(run.builder(variant) for variant in run.plan.variants):
            prepared.enter_context(builder.prepared(run.plan))  # before the model loads (`Backend.prepared`)
        return _run_locked(run, command, report, created, writer)


def _run_locked(run: RunPlan, command: list[str], report: Report, created: dt.datetime,
                writer: SessionWriter) -> tuple[Session, Path]:
    plan, tracer = run.plan, run.tracer
    report(Progress("setup", f"loading {plan.model}: the model, its weights and the study's images"))
    inputs = run.backend.load_inputs(plan)
    report(Progress("setup", f"model {inputs.model.name} ({inputs.model.source}), input {inputs.model.input_size}"))
    backend = run.backend(
        BackendContext(plan, inputs.model, inputs.static_input,
                       lambda phase, step, steps: report(Progress("build", phase, None, step, steps)))
    )
    session = new_session(plan, command, inputs, backend, tracer, created)
    recorder = Recorder(session, writer, report)
    recorder.step("setup", f"session: {recorder.path}")
    report(Progress("setup", build_order(run)))
    try:
        reference, no_reference = reference_outputs(backend, inputs), NO_REFERENCE
    except Exception as exc:  # noqa: BLE001  (the variants are still built and timed, without quality figures)
        reference, no_reference = None, f"quality not measured: the fp32 reference failed: {one_line(exc)}"
        report(Progress("setup", no_reference))
    process.settle_heap()  # set up: the builds' garbage collections walk only what they make
    engines, profiled = build_variants(run, backend, inputs, (reference, no_reference), recorder)
    if engines:
        time_variants(session, engines, plan, recorder,
                      lambda graphed: timing_method(plan, backend, tracer, profiled, graphed))
    for name, engine in engines.items():
        release(engine, session.variant(name))
    if not any(v.status == "ok" for v in session.variants):
        raise InspectError(f"every variant failed; see {recorder.path}")
    return session, recorder.finish()


def build_order(run: RunPlan) -> BuildOrder:
    """The plan's variants in the order they are built, each with the label of the backend that builds it."""
    return BuildOrder({variant.name: run.builder(variant).label for variant in run.plan.variants})


def reference_outputs(backend: Backend, inputs: StudyInputs) -> Any:
    """The fp32 reference outputs on the quality images, or None where the backend has none. The study's batches are
    joined into calls of up to `REFERENCE_IMAGES_PER_CALL` images (`reference_calls`): the reference is an eager
    forward pass, launch-bound at a small batch (senet154's 18 at batch 1: 0.85 s of a warm H100 main job,
    benchmarks/results/h100/freeze-count/sampled/), and each image's outputs do not depend on its neighbours. Where
    the joined calls fail (one too large for the device's memory), the study's own batches are tried."""
    try:
        outputs = [backend.reference(batch) for batch in reference_calls(inputs.quality_batches)]
    except Exception:  # noqa: BLE001  (a joined call too large for the device's memory: the study's own batches)
        outputs = [backend.reference(batch) for batch in inputs.quality_batches]
    if any(output is None for output in outputs):
        return None
    return np.concatenate([np.asarray(output) for output in outputs])


REFERENCE_IMAGES_PER_CALL = 32  # the fp32 reference's images per forward pass, at most (a larger study batch stays)


def reference_calls(batches: list[Any]) -> list[Any]:
    """`batches` (consecutive batches of images, torch tensors or numpy arrays) joined in order into as few calls as
    hold at most `REFERENCE_IMAGES_PER_CALL` images or one batch each, whichever is more: every image once, in order."""
    limit = max([REFERENCE_IMAGES_PER_CALL, *(len(batch) for batch in batches)])
    groups: list[list[Any]] = []
    for batch in batches:
        if groups and sum(len(b) for b in groups[-1]) + len(batch) <= limit:
            groups[-1].append(batch)
        else:
            groups.append([batch])
    return [group[0] if len(group) == 1 else _joined(group) for group in groups]


def _joined(batches: list[Any]) -> Any:
    if isinstance(batches[0], np.ndarray):
        return np.concatenate(batches)
    import torch

    return torch.cat(batches)


def build_variants(run: RunPlan, backend: Backend, inputs: StudyInputs, reference: tuple[Any, str],
                   recorder: Recorder) -> tuple[dict[str, Engine], bool]:
    """Each variant of `run` built (by `backend`, or by the backend it names), its quality measured and its kernels
    traced; the engines of those that built, and whether the backend's own profiler gave any of them per-layer times.

    `reference`: the fp32 outputs on the quality images (None where there are none) and the note that says why
    not. A variant whose build fails for any reason (an assertion in a library, out of memory) is kept as failed
    with one line of reason, and the study goes on; one whose quality or trace fails keeps a note.
    """
    plan, tracer = run.plan, run.tracer
    engines: dict[str, Engine] = {}
    profiled = False  # whether any variant got the backend's own per-layer times
    baselines: dict[str, Any] = {}
    total = len(plan.variants)
    own: dict[str, Backend] = {plan.backend: backend}  # variants that name another backend share one instance of it
    last_builds = {run.builder(variant_plan).name: index for index, variant_plan in enumerate(plan.variants)}
    try:
        for index, variant_plan in enumerate(plan.variants):
            recorder.step("build", f"building {variant_plan.name}", variant_plan.name, index, total, saved=False)
            try:
                builder = _variant_backend(variant_plan, own, run, inputs)
                memory = device_memory(plan.device, builder.capabilities.torch_memory)
                if memory is not None:
                    memory.mark()
                try:
                    result = builder.build(variant_plan, inputs.calibration)
                finally:
                    if last_builds[builder.name] == index:
                        builder.builds_ending()
                if memory is not None:
                    result.variant.peak_memory_bytes = memory.peak_bytes(result.engine.run_once)
            except Exception as exc:  # noqa: BLE001  (any failure costs this variant only)
                recorder.session.variants.append(failed_variant(variant_plan, plan, exc))
                recorder.step("build", f"{variant_plan.name} failed: {one_line(exc)}", variant_plan.name,
                              index + 1, total)
                continue
            variant = result.variant
            if variant.recipe is not None:
                variant.recipe.calibration_source = inputs.image_source
            recorder.session.variants.append(variant)
            engines[variant.name] = result.engine
            try:
                measure_quality(variant, result.engine, reference[0], inputs, recorder, baselines, reference[1])
            except Exception as exc:  # noqa: BLE001  (the built variant is kept, traced and timed)
                variant.notes.append(f"quality not measured in full: {one_line(exc)}")
            try:
                profiled = trace_variant(variant, result.engine, plan, tracer, builder, recorder) or profiled
            except Exception as exc:  # noqa: BLE001  (the built and measured variant is kept)
                variant.layers = result.engine.layers()
                variant.notes.append(f"kernel trace failed, no kernels recorded: {one_line(exc)}")
            recorder.session.method = timing_method(plan, backend, tracer, profiled)
            recorder.step("build", f"{variant.name} built and traced", variant.name, index + 1, total)
    finally:  # on any way out: what a backend holds for building (worker processes) is let go
        for builder in own.values():
            builder.builds_done()
    return engines, profiled


def _variant_backend(variant_plan: VariantPlan, own: dict[str, Backend], run: RunPlan,
                     inputs: StudyInputs) -> Backend:
    """The backend that builds `variant_plan`: its own where it names one (made once), else the plan's."""
    builder = run.builder(variant_plan)
    if builder.name not in own:
        own[builder.name] = builder(BackendContext(run.plan, inputs.model, inputs.static_input))
    return own[builder.name]


def failed_variant(variant_plan: VariantPlan, plan: StudyPlan, exc: BaseException) -> Variant:
    """The record of a variant that did not build: status failed, and `exc` in one line as its error."""
    return Variant(name=variant_plan.name, backend=variant_plan.backend or plan.backend,
                   precision=variant_plan.precision, device=plan.device, status="failed", error=one_line(exc))


def new_session(plan: StudyPlan, command: list[str], inputs: StudyInputs, backend: Backend, tracer: Tracer,
                created: dt.datetime) -> Session:
    from profilers import environment

    model = inputs.model
    if plan.checkpoint:
        weights = plan.checkpoint
    elif model.source == "onnx":
        weights = "from the ONNX file"
    else:
        weights = f"random (pretrained=False, seed {plan.seed})"
    env = environment.collect(plan.device)
    env.versions.update(backend.describe())
    return document.new_session(
        model=model.name, source=model.source, input_shape=list(model.input_size), batch=plan.batch,
        command=command, created=created, backend=plan.backend, device=plan.device, weights=weights, plan=plan,
        engine=backend.engine(), engine_options={name: str(getattr(plan, name)) for name in backend.plan_options},
        environment=env,
        method=timing_method(plan, backend, tracer),
    )


def timing_method(plan: StudyPlan, backend: Backend, tracer: Tracer, profiled: bool = False,
                  graphed: bool = False) -> TimingMethod:
    """The session's timing method, made from what has run so far: `profiled` once the backend's own profiler gave
    a variant per-layer times, `graphed` once every timed step replays a CUDA graph. The one place it is made: the
    session holds it from the start (a study saves after every step), and it is made again as those facts arrive."""
    from profilers.timing import describe

    device = study_device(plan.device)
    cuda_graph = device.gpu and graphed
    return TimingMethod(
        timer=device.timer,
        timed_region=describe(plan.device, cuda_graph, plan.timing, tracer.timing_words()), cuda_graph=cuda_graph,
        warmup_s=plan.timing.warmup_s, rounds=plan.timing.rounds, iters=plan.timing.iters,
        interleaved=True, transfers_included=False, static_inputs=True,
        per_layer=per_layer_words(backend, tracer, plan.device, profiled), kernels=tracer.describe(plan.trace_calls),
    )


def per_layer_words(backend: Backend, tracer: Tracer, device: str, profiled: bool) -> str:
    """What a layer's time means: the backend's own profiler where it measured, else kernel sums."""
    if backend.capabilities.layer_times and profiled:
        return backend.capabilities.layer_times
    if tracer.range_kind is None:
        return "not measured (--tracer none)"
    unit = "kernels' GPU time" if study_device(device).gpu else "outermost aten ops' host time"
    return (
        f"sum of the layer's own {unit} in the traced eager call(s), per call (mean; each call's time is stored, "
        "the spread diff judges layers by); a layer is a module, and a parent module owns what its own forward code "
        "launches outside its children"
    )


def measure_quality(variant: Variant, engine: Engine, reference: Any, inputs: StudyInputs, recorder: Recorder,
                    baselines: dict[str, Any], no_reference: str = NO_REFERENCE) -> None:
    """Quality against fp32, agreement with the first fp16 variant (kept in `baselines` once measured), stress inputs;
    where `reference` is None, the note `no_reference` instead."""
    from profilers.quality import compare, predicted_classes, stress_check

    if reference is None:
        variant.notes.append(no_reference)
        return
    count = inputs.image_count
    recorder.step("quality", f"{variant.name}: quality on {count} images", variant.name, saved=False)
    outputs = quality_outputs(variant, engine, inputs)
    baseline = baselines.get(BASELINE_PRECISION)
    variant.quality = compare(reference, outputs, "fp32 (PyTorch)", inputs.image_source, count, baseline, inputs.masks)
    if variant.precision == BASELINE_PRECISION and baseline is None:
        baselines[BASELINE_PRECISION] = (variant.name, predicted_classes(outputs))
    simulated = engine.simulated_infer(inputs.quality_batches) if inputs.quality_batches else None
    if simulated is not None:
        recipe = variant.recipe.layout if variant.recipe else "its recipe"
        variant.simulation = compare(np.asarray(simulated), outputs,
                                     f"fp8-{recipe} simulated (ModelOpt, same scales)", inputs.image_source, count)
    constant = constant_layers_note(variant, inputs, recorder.session.study.weights, engine.layers)
    if constant is not None:
        variant.notes.append(constant)
    failed = stress_check(engine.infer, inputs.stress)
    variant.quality.stress_inputs, variant.quality.stress_nonfinite = len(inputs.stress), len(failed)
    if failed:
        variant.notes.append(f"NaN or Inf on {len(failed)} of {len(inputs.stress)} stress inputs: {', '.join(failed)}")


def quality_outputs(variant: Variant, engine: Engine, inputs: StudyInputs) -> np.ndarray:
    """The variant's outputs on the quality images, as one array; on a CPU, the first image's forward and every output
    sampled for subnormal values on the way (`profilers.subnormal`, kept in `variant.subnormal_values`: a GPU computes
    them at full speed, and its hooks' copies to the host would cost the study time for nothing)."""
    from profilers.subnormal import Sampler

    if study_device(variant.device).gpu:
        return np.concatenate([np.asarray(engine.infer(batch)) for batch in inputs.quality_batches])
    sampler = Sampler()
    outputs = []
    for index, batch in enumerate(inputs.quality_batches):
        with engine.layer_outputs(sampler.visit) if index == 0 else contextlib.nullcontext():
            outputs.append(np.asarray(engine.infer(batch)))
    joined = np.concatenate(outputs)
    sampler.visit(joined)
    variant.subnormal_values = sampler.result()
    return joined


def constant_layers_note(variant: Variant, inputs: StudyInputs, weights_from: str,
                         built: Callable[[], Sequence[Layer]] = tuple) -> str | None:
    """The note a quantized variant carries where layers its recipe quantizes output the same in any precision
    (all-zero weights, as stored or as their forward computes them, once BatchNorm is folded,
    `builders.models.constant_layers`), so its quality figures hold none
    of their FP8 error; where every layer `built()` gives (the engine's layers, with the precision each runs in,
    asked for only where such layers exist) that runs in FP8 is one of them (an engine that kept the rest fp16 by
    timing), the note says the figures hold no FP8 error at all. `weights_from` (Study.weights) says whether random
    initialisation explains them. None where there are none, no recipe, no PyTorch module, or its structure cannot
    be found (the note is advice, never a failure)."""
    module = getattr(inputs.model, "module", None)
    if variant.recipe is None or not variant.recipe.quantized or module is None:
        return None
    from builders.models.constant_layers import constant_output_layers
    from builders.models.structure import model_structure
    from builders.pytorch.variant_modules import folds

    quantized = list(dict.fromkeys(variant.recipe.quantized))
    try:
        parameter = next(module.parameters())
        example = inputs.static_input[:1].to(device=parameter.device, dtype=parameter.dtype)
        modules = dict(module.named_modules())
        pairs = [(layer, norm) for layer, norm in model_structure(module, example).conv_bn if folds(modules[norm])]
        names = constant_output_layers(module, pairs, quantized, example)
    except (RuntimeError, ValueError, AssertionError, StopIteration):  # no parameters, a structure pass that fails
        return None
    if not names:
        return None
    why = CONSTANT_WHY_RANDOM if weights_from.startswith("random") else ""
    layers = built()
    ran_fp8 = {layer.name for layer in layers if layer.precision == "fp8"} & set(quantized)
    if ran_fp8 and ran_fp8 <= set(names) and len(ran_fp8) < len(quantized):
        outcomes = Counter(outcome for layer in with_covered(layers)
                           if (outcome := fp8_outcome(layer)) not in (None, RAN_FP8))
        rest = ", ".join(f"{count} {outcome}" for outcome, count in outcomes.items()) or "the rest run fp16"
        return CONSTANT_FP8_LAYERS.format(count=len(ran_fp8), total=len(quantized), rest=rest, why=why)
    return CONSTANT_LAYERS.format(count=len(names), total=len(quantized), why=why)


def trace_variant(variant: Variant, engine: Engine, plan: StudyPlan, tracer: Tracer, backend: Backend,
                  recorder: Recorder) -> bool:
    """Kernels of `plan.trace_calls` eager calls, attributed to layers; per-layer times.

    A tracer that fails (CUPTI taken by another profiler) leaves the variant without kernels and
    a note, never ends the study. Returns whether the backend's own per-layer profiler gave times.
    """
    variant.layers = engine.layers()
    if tracer.range_kind is not None:
        recorder.step("trace", f"{variant.name}: tracing {plan.trace_calls} call(s) with {tracer.name}", variant.name,
                      saved=False)
        try:
            trace_kernels(variant, engine, plan, tracer)
        except Exception as exc:  # noqa: BLE001  (CUPTI raises its own error types; any failure costs the kernels only)
            variant.notes.append(f"kernel trace failed, no kernels recorded: {one_line(exc)}")
    if not backend.capabilities.layer_times:
        return False
    calls = max(plan.trace_calls, 10)
    try:
        times = engine.layer_times(calls)  # in a pass of its own; replaces kernel sums
    except InspectError as exc:
        variant.notes.append(f"per-layer profiler failed: {one_line(exc)}")
        return False
    matched = [layer for layer in variant.layers if times.get(layer.name)]
    for layer in matched:
        values = times[layer.name]
        layer.time_ms = sum(values) / len(values)
        layer.call_times_ms = list(values) if len(values) == calls else []  # one report per call: a spread
    if not matched:
        variant.notes.append(f"the per-layer profiler reported {len(times)} layers, none of them by a known name")
    return bool(matched)


def trace_kernels(variant: Variant, engine: Engine, plan: StudyPlan, tracer: Tracer) -> None:
    from profilers.attribution import ROOT, LayerIndex, prune_unused, summarize
    from profilers.demangle import demangle

    synchronize = study_device(plan.device).synchronize
    untraced_ms = _wall_ms(engine.run_once, synchronize, 2)  # also warms: lazy set-up stays out of the trace
    started = time.perf_counter()
    with engine.layer_ranges(tracer.range_kind or ""):
        records = tracer.trace(engine.run_once, plan.trace_calls, plan.device, synchronize)
    traced_ms = (time.perf_counter() - started) * 1e3 / plan.trace_calls
    if plan.raw_trace:
        from profilers import raw_trace

        raw_trace.dump(records, Path(plan.raw_trace) / f"{variant.name}.trace.json")
    records.ranges = [replace(r, name=engine.range_to_layer(r.name)) for r in records.ranges]
    index = LayerIndex(variant.layers)
    table, summary = summarize(records, index)
    summary.untraced_call_ms, summary.traced_call_ms = untraced_ms, traced_ms
    table.names = demangle(table.names)
    variant.layers = prune_unused(index.layers, table, {ROOT})
    variant.kernels, variant.trace = table, summary


def time_variants(session: Session, engines: dict[str, Engine], plan: StudyPlan, recorder: Recorder,
                  method: Callable[[bool], TimingMethod]) -> None:
    """The variants of `engines` timed in interleaved rounds; the session's method made by `method` from whether
    every timed step replays a CUDA graph.

    A variant whose timing step cannot be made, or whose inference fails while it is timed, is marked failed with
    one line of reason and its engine let go (taken out of `engines`); the rounds then start again without it, so
    that the variants left are timed in the same rounds.

    Reports what the rounds do as they go (`RoundReports`), again each time they start over.
    """
    from profilers import environment
    from profilers.timing import clock_for, measure

    session.environment.torch = environment.torch_settings()  # as in effect while timing
    sampler = environment.timing_sampler(plan.device)
    steps: dict[str, TimingStep] = {}
    for name, engine in list(engines.items()):
        try:
            steps[name] = engine.timing_step()
        except Exception as exc:  # noqa: BLE001  (a CUDA graph capture out of memory, a library's error)
            fail_timing(session, engines, name, exc, recorder)
    for name, step in steps.items():
        if step.note:
            session.variant(name).notes.append(step.note)
    session.environment.gpu_state = study_device(plan.device).settle()  # every graph is made: one state for all

    reports = RoundReports(session, plan, recorder, sampler)
    with sampler:
        while steps:
            session.method = method(all(step.graphed for step in steps.values()))
            reports.warm_ups_start()
            try:
                measure({name: _guarded(name, step.run) for name, step in steps.items()}, plan.timing,
                        clock_for(plan.device), reports.round_done, reports.warmed_up)
                break
            except StepFailed as failed:
                del steps[failed.name]
                for name in steps:  # timed again from the start, in rounds of their own
                    session.variant(name).latency = None
                fail_timing(session, engines, failed.name, failed.cause, recorder)
    session.environment.during_timing = sampler.conditions()


class RoundReports:
    """What the timing rounds report as they go: a timing step at round 0 as the warm-ups start (`warm_ups_start`),
    another at round 0 once every variant has warmed up (`warmed_up`, given the inferences per sample `measure`
    chose), then one per round done (`round_done`: every variant's latency so far stored, the NVML conditions read,
    the session saved at most every `ROUND_SAVE_INTERVAL_S` and after the last round). The time left
    (`inspector.eta.Estimate`) counts the first round from the last step at round 0."""

    def __init__(self, session: Session, plan: StudyPlan, recorder: Recorder, sampler: ConditionSampler) -> None:
        self.session, self.plan, self.recorder, self.sampler = session, plan, recorder, sampler
        self.sizes = SampleSizes(session)
        self.last_save = time.monotonic()

    def warm_ups_start(self) -> None:
        rounds = self.plan.timing.rounds
        self.recorder.step("timing", f"warm-up {self.plan.timing.warmup_s:g} s per variant, then {rounds} rounds",
                           None, 0, rounds, saved=False)

    def warmed_up(self, counts: dict[str, int]) -> None:
        self.sizes(counts)
        rounds = self.plan.timing.rounds
        self.recorder.step("timing", f"every variant warmed up; round 1 of {rounds} starts", None, 0, rounds,
                           saved=False)

    def round_done(self, index: int, samples: dict[str, list[float]]) -> None:
        from profilers.stats import latency_stats

        rounds = self.plan.timing.rounds
        for name, values in samples.items():
            latency = latency_stats(values, self.plan.timing.iters)
            latency.inferences_per_sample = self.sizes.of(name)
            self.session.variant(name).latency = latency
        self.session.environment.during_timing = self.sampler.conditions()
        due = index + 1 == rounds or time.monotonic() - self.last_save >= ROUND_SAVE_INTERVAL_S
        self.recorder.step("timing", f"round {index + 1}/{rounds}", None, index + 1, rounds, saved=due)
        if due:
            self.last_save = time.monotonic()


class SampleSizes:
    """The inferences one timed sample spans, by variant, as `measure` chose them (`profilers.timing`); a variant's
    notes say so where it is more than one."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.counts: dict[str, int] = {}

    def __call__(self, counts: dict[str, int]) -> None:
        self.counts.update(counts)
        for name, count in counts.items():
            note = sample_note(count)
            if note and note not in self.session.variant(name).notes:
                self.session.variant(name).notes.append(note)

    def of(self, name: str) -> int:
        return self.counts.get(name, 1)


def sample_note(inferences: int) -> str | None:
    """What a variant's latency figures are where one sample spans several inferences; None for one."""
    if inferences <= 1:
        return None
    return (f"each timed sample is the mean of {inferences} back-to-back inferences (a short model's GPU jitter "
            "narrowed): its percentiles and CoV are of such means")


class StepFailed(Exception):
    """A timed inference of variant `name` raised `cause`."""

    def __init__(self, name: str, cause: Exception) -> None:
        super().__init__(f"{name}: {one_line(cause)}")
        self.name, self.cause = name, cause


def _guarded(name: str, run: Callable[[], None]) -> Callable[[], None]:
    """`run`, its exceptions raised as StepFailed naming `name` (an interrupt passes as it is)."""

    def step() -> None:
        try:
            run()
        except Exception as exc:
            raise StepFailed(name, exc) from exc

    return step


def fail_timing(session: Session, engines: dict[str, Engine], name: str, exc: Exception, recorder: Recorder) -> None:
    """Variant `name` marked failed in timing (`exc` in one line), its engine let go and taken out of `engines`."""
    variant = session.variant(name)
    variant.status, variant.error, variant.latency = "failed", f"timing failed: {one_line(exc)}", None
    release(engines.pop(name), variant)
    recorder.step("timing", f"{name} {variant.error}; timing the others", name)


def release(engine: Engine, variant: Variant) -> None:
    """`engine`'s device memory let go; where that fails, a note on `variant`, never the end of the study."""
    try:
        engine.release()
    except Exception as exc:  # noqa: BLE001  (the measurements are taken; only the memory is at stake)
        variant.notes.append(f"its engine could not be released: {one_line(exc)}")


def _wall_ms(step: Callable[[], None], synchronize: Callable[[], None], repeats: int) -> float:
    """Best host wall time of `step` over `repeats`, device work included."""
    best = float("inf")
    for _ in range(repeats):
        synchronize()
        t0 = time.perf_counter()
        step()
        synchronize()
        best = min(best, (time.perf_counter() - t0) * 1e3)
    return best


def one_line(exc: BaseException) -> str:
    line = first_line(exc)
    return line if isinstance(exc, InspectError) or line == type(exc).__name__ else f"{type(exc).__name__}: {line}"
