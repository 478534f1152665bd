"""A whole study, front-end free: model -> variants -> engines -> measurements -> session.

The CLI and the TUI both call `run_study`; it reports progress through a callback and saves the
session after every finished step, so an interrupt or a crash keeps everything measured so far.
"""

from __future__ import annotations

import datetime as dt
import importlib.util
import re
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from sessions.errors import InputError, InspectError, MissingEnvironment
from sessions.model import Session, Study, TimingMethod, Variant
from sessions.storage import save, sessions_dir

DEFAULT_LAYOUTS = ["all", "no-se"]


@dataclass
class StudyOptions:
    model: str
    backend: str = "auto"  # auto | torch | tensorrt
    device: str | None = None  # cuda | cpu; None picks
    variants: str | None = None  # None: fp32,fp16,fp8 on CUDA; fp32,bf16,fp8 on the CPU
    batch: int = 1
    fp8_layouts: list[str] = field(default_factory=list)
    fp8_exclude: list[str] = field(default_factory=list)
    images: str | None = None
    calib_count: int = 16
    rounds: int | None = None
    iters: int | None = None
    warmup_s: float | None = None
    tracer: str = "auto"  # auto | cupti | torch | none
    trace_calls: int = 1
    checkpoint: str | None = None
    out: str | None = None
    raw_trace: str | None = None  # folder for each variant's raw tracer records
    opt_level: int = 3  # TensorRT builder_optimization_level

    def validate(self) -> None:
        for name in ("batch", "calib_count", "trace_calls"):
            if getattr(self, name) < 1:
                raise InputError(f"--{name.replace('_', '-')} must be at least 1")
        for name in ("rounds", "iters"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise InputError(f"--{name} must be at least 1")
        if self.warmup_s is not None and self.warmup_s < 0:
            raise InputError("--warmup must not be negative")
        if self.tracer not in ("auto", "cupti", "torch", "none"):
            raise InputError(f"unknown tracer {self.tracer!r}; use auto, cupti, torch or none")
        if self.backend not in ("auto", "torch", "tensorrt"):
            raise InputError(f"unknown backend {self.backend!r}; use auto, torch or tensorrt")
        if self.device not in (None, "cuda", "cpu"):
            raise InputError(f"unknown device {self.device!r}; use cuda or cpu")
        from builders.fp8_layouts import LAYOUTS

        for layout in self.fp8_layouts:
            if layout not in LAYOUTS:
                raise InputError(f"unknown FP8 layout {layout!r}; known: {', '.join(LAYOUTS)}")


@dataclass
class Progress:
    phase: str  # setup | build | quality | trace | timing | done
    message: str
    variant: str | None = None
    done: int = 0
    total: int = 0
    session_path: Path | None = None  # set once the session file exists


Report = Callable[[Progress], None]


def tensorrt_available() -> bool:
    return importlib.util.find_spec("tensorrt") is not None


def choose_backend(options: StudyOptions) -> tuple[str, str, str]:
    """(backend, device, why) for the options, before anything heavy is imported."""
    import torch

    has_gpu = torch.cuda.is_available()
    if options.device == "cuda" and not has_gpu:
        raise MissingEnvironment("--device cuda: no CUDA GPU is visible to PyTorch here")
    if options.backend == "tensorrt":
        if not tensorrt_available():
            raise MissingEnvironment(
                "--backend tensorrt: TensorRT is not installed (pip install 'trt-inspect[tensorrt]' where NVIDIA's index is reachable)"
            )
        if not has_gpu or options.device == "cpu":
            raise MissingEnvironment("--backend tensorrt needs a CUDA GPU")
        return "tensorrt", "cuda", "TensorRT, as asked"
    if options.backend == "torch":
        device = options.device or ("cuda" if has_gpu else "cpu")
        return "torch", device, f"PyTorch on {device}, as asked"
    if tensorrt_available() and has_gpu and options.device != "cpu":
        return "tensorrt", "cuda", "TensorRT found with a GPU"
    if has_gpu and options.device != "cpu":
        why = "TensorRT is not installed" if not tensorrt_available() else "as asked"
        return "torch", "cuda", f"PyTorch on CUDA ({why})"
    why = "as asked" if options.device == "cpu" else "no GPU here"
    return "torch", "cpu", f"PyTorch on the CPU ({why})"


def default_variants(device: str) -> str:
    return "fp32,fp16,fp8" if device == "cuda" else "fp32,bf16,fp8"


def timing_plan(options: StudyOptions, device: str):
    from profilers.timing import TimingPlan

    if device == "cuda":
        return TimingPlan(options.warmup_s if options.warmup_s is not None else 1.0, options.rounds or 5, options.iters or 50)
    return TimingPlan(options.warmup_s if options.warmup_s is not None else 0.5, options.rounds or 3, options.iters or 5)


def session_path(options: StudyOptions, created: dt.datetime) -> Path:
    if options.out:
        return Path(options.out)
    stem = re.sub(r"[^A-Za-z0-9._-]+", "_", Path(options.model).stem if options.model.endswith(".onnx") else options.model)
    return sessions_dir() / f"{stem}-{created:%Y%m%d-%H%M%S}.json"


def _choose_tracer(requested: str, device: str, cupti_problem: str | None) -> tuple[str, str]:
    """(tracer, note); `cupti_problem` is why NVTX injection could not be set up, if it could not."""
    if requested == "none":
        return "none", "kernel tracing off (--tracer none)"
    if device == "cpu":
        if requested == "cupti":
            raise MissingEnvironment("--tracer cupti needs a CUDA GPU")
        return "torch", ""
    if requested in ("auto", "cupti"):
        if cupti_problem is None:
            return "cupti", ""
        if requested == "cupti":
            raise MissingEnvironment(f"--tracer cupti: {cupti_problem}")
        return "torch", f"CUPTI unavailable ({cupti_problem}): kernels from torch.profiler"
    return "torch", ""


def run_study(options: StudyOptions, command: list[str], report: Report) -> tuple[Session, Path]:
    options.validate()
    cupti_problem = "not asked for"
    if options.tracer in ("auto", "cupti") and options.device != "cpu":
        from profilers.kernel_trace import prepare_nvtx_injection

        cupti_problem = prepare_nvtx_injection()  # before torch loads: NVTX binds its injection once
    backend_name, device, why = choose_backend(options)
    tracer, tracer_note = _choose_tracer(options.tracer, device, cupti_problem)
    report(Progress("setup", f"backend: {why}; tracer: {tracer}"))

    import torch

    from builders.backend import parse_variants
    from profilers import environment
    from profilers.timing import describe

    specs = parse_variants(
        options.variants or default_variants(device), options.fp8_layouts or DEFAULT_LAYOUTS, options.fp8_exclude
    )
    inputs = load_inputs(options)
    model, images, pixels = inputs.model, inputs.images, inputs.pixels
    report(Progress("setup", f"model {model.name} ({model.source}), input {model.input_size}"))
    static_input, calibration = inputs.static_input, inputs.calibration
    backend = _make_backend(backend_name, model, device, static_input, options, report)
    reference = backend.reference(pixels)

    plan = timing_plan(options, device)
    created = dt.datetime.now(dt.timezone.utc)
    path = session_path(options, created)
    settings = asdict(options)
    session = Session(
        study=Study(
            model=model.name,
            source=model.source,
            input_shape=list(model.input_size),
            batch=options.batch,
            command=command,
            created=created.isoformat(timespec="seconds"),
            backend=backend_name,
            device=device,
            tool_version=environment.tool_version(),
            weights=options.checkpoint or ("random (pretrained=False)" if model.source != "onnx" else "from the ONNX file"),
            settings=settings,
        ),
        environment=environment.collect(device, torch.version.cuda if device == "cuda" else None),
        method=TimingMethod(
            timer="cuda-events" if device == "cuda" else "perf_counter",
            timed_region=describe(device, False, plan),  # restated once timing knows whether graphs captured
            cuda_graph=False,
            warmup_s=plan.warmup_s,
            rounds=plan.rounds,
            iters=plan.iters,
            interleaved=True,
            transfers_included=False,
            static_inputs=True,
            per_layer=_per_layer_words(tracer, device, backend_name),
            kernels=_kernel_words(tracer, options.trace_calls, tracer_note),
        ),
    )
    save(session, path)
    report(Progress("setup", f"session: {path}", session_path=path))

    engines = {}
    for index, spec in enumerate(specs):
        report(Progress("build", f"building {spec.name}", spec.name, index, len(specs)))
        try:
            result = backend.build(spec, calibration)
        except (InspectError, RuntimeError, ValueError) as exc:
            failed = Variant(name=spec.name, backend=backend_name, precision=spec.precision, device=device)
            failed.status, failed.error = "failed", _one_line(exc)
            session.variants.append(failed)
            save(session, path)
            report(Progress("build", f"{spec.name} failed: {failed.error}", spec.name, index + 1, len(specs)))
            continue
        variant = result.variant
        if variant.recipe is not None:
            variant.recipe.calibration_source = images.source
        session.variants.append(variant)
        engines[spec.name] = result.engine
        _measure_variant(variant, result.engine, reference, pixels, images.source, tracer, options, device, report)
        save(session, path)
        report(Progress("build", f"{spec.name} built and traced", spec.name, index + 1, len(specs)))

    if not engines:
        raise InspectError(f"every variant failed; see {path}")
    _time_variants(session, engines, plan, device, path, report)
    for name, engine in engines.items():
        graph_error = getattr(engine, "graph_error", None)
        if graph_error:
            session.variant(name).notes.append(graph_error)
        engine.release()
    save(session, path)
    report(Progress("done", f"saved {path}"))
    return session, path


@dataclass
class StudyInputs:
    model: object  # builders.models.LoadedModel
    images: object  # profilers.images.ImageSet
    pixels: object  # every image, preprocessed: the quality batch
    static_input: object  # the timed and traced input, `batch` images
    calibration: object  # `calib_count` images


def load_inputs(options: StudyOptions) -> StudyInputs:
    """The model and its real-image inputs, preprocessed with the model's own transform."""
    import torch

    from builders.models import load_model
    from profilers.images import load_images

    model = load_model(options.model, Path(options.checkpoint) if options.checkpoint else None)
    images = load_images(Path(options.images) if options.images else None)
    pixels = torch.stack([model.transform(image) for image in images.images])
    return StudyInputs(model, images, pixels, _cycle(pixels, options.batch), _cycle(pixels, options.calib_count))


def _make_backend(name: str, model, device: str, static_input, options: StudyOptions, report: Report):
    if name == "tensorrt":
        from builders.tensorrt_backend import TensorRTBackend

        return TensorRTBackend(
            model, static_input, opt_level=options.opt_level,
            report=lambda phase, step, steps: report(Progress("build", f"TensorRT {phase}", None, step, steps)),
        )
    from builders.torch_backend import TorchBackend

    return TorchBackend(model, device, static_input)


def _measure_variant(variant, engine, reference, pixels, image_source, tracer, options, device, report) -> None:
    """Quality and the kernel trace of one freshly built variant."""
    import torch

    from profilers.quality import compare

    report(Progress("quality", f"{variant.name}: quality on {len(pixels)} images", variant.name))
    outputs = torch.cat([engine.infer(chunk) for chunk in pixels.split(options.batch)])
    variant.quality = compare(reference, outputs, "fp32 (PyTorch)", image_source, len(pixels))
    if tracer == "none":
        variant.layers = engine.layers()
        return
    report(Progress("trace", f"{variant.name}: tracing {options.trace_calls} call(s) with {tracer}", variant.name))
    from profilers.attribution import LayerIndex, prune_unused, summarize
    from profilers.demangle import demangle
    from profilers.module_ranges import ROOT

    synchronize = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    untraced_ms = _wall_ms(engine.run_once, synchronize, 3)  # also warms: lazy set-up stays out of the trace
    started = time.perf_counter()
    if tracer == "cupti":
        from profilers import kernel_trace

        with engine.layer_ranges(kernel_trace.RANGE_KIND):
            records = kernel_trace.trace(engine.run_once, options.trace_calls, synchronize)
    else:
        from profilers import torch_trace

        with engine.layer_ranges(torch_trace.RANGE_KIND):
            records = torch_trace.trace(engine.run_once, options.trace_calls, device)
    traced_ms = (time.perf_counter() - started) * 1e3 / options.trace_calls
    if options.raw_trace:
        from profilers import raw_trace

        raw_trace.dump(records, Path(options.raw_trace) / f"{variant.name}.trace.json")
    if variant.backend == "tensorrt":
        from builders.trt_compat import range_to_layer
        from profilers.attribution import Range
        from profilers.trt_files import normalize_name

        records.ranges = [Range(normalize_name(range_to_layer(r.name)), r.thread, r.start, r.end) for r in records.ranges]
    index = LayerIndex(engine.layers())
    table, summary = summarize(records, index)
    summary.untraced_call_ms, summary.traced_call_ms = untraced_ms, traced_ms
    table.names = demangle(table.names)
    variant.layers = prune_unused(index.layers, table, {ROOT})
    variant.kernels = table
    variant.trace = summary
    layer_times = getattr(engine, "layer_times", None)
    if layer_times is not None:  # TensorRT: IProfiler times, in a pass of their own, replace kernel sums
        times = layer_times(max(options.trace_calls, 10))
        for layer in variant.layers:
            layer.time_ms = times.get(layer.name, layer.time_ms)


def _time_variants(session: Session, engines: dict, plan, device: str, path: Path, report: Report) -> None:
    from profilers.stats import latency_stats
    from profilers.timing import describe, measure

    steps = {}
    graphs = []
    for name, engine in engines.items():
        step, graphed = engine.timing_step()
        steps[name] = step
        graphs.append(graphed)
    session.method.cuda_graph = device == "cuda" and all(graphs)
    session.method.timed_region = describe(device, session.method.cuda_graph, plan)

    def on_round(index: int, samples: dict[str, list[float]]) -> None:
        for name, values in samples.items():
            session.variant(name).latency = latency_stats(values)
        save(session, path)
        report(Progress("timing", f"round {index + 1}/{plan.rounds}", None, index + 1, plan.rounds))

    report(Progress("timing", f"warm-up {plan.warmup_s:g} s per variant, then {plan.rounds} rounds", None, 0, plan.rounds))
    measure(steps, plan, device, on_round)


def _wall_ms(step, synchronize, repeats: int) -> float:
    """Best host wall time of `step` over `repeats`, device work included."""
    best = float("inf")
    for _ in range(repeats):
        synchronize()
        t0 = time.perf_counter()
        step()
        synchronize()
        best = min(best, (time.perf_counter() - t0) * 1e3)
    return best


def _cycle(pixels, count: int):
    import torch

    reps = -(-count // len(pixels))
    return torch.cat([pixels] * reps)[:count].contiguous()


def _one_line(exc: BaseException) -> str:
    text = exc.message if isinstance(exc, InspectError) else f"{type(exc).__name__}: {exc}"
    return text.strip().splitlines()[0] if text.strip() else type(exc).__name__



def _per_layer_words(tracer: str, device: str, backend: str) -> str:
    if backend == "tensorrt":
        return (
            "TensorRT IProfiler time per layer, mean over a pass of its own after tracing (includes profiling "
            "overhead; does not add up to the latency)"
        )
    if tracer == "none":
        return "not measured (--tracer none)"
    unit = "kernels' GPU time" if device == "cuda" else "outermost aten ops' host time"
    return (
        f"sum of the layer's own {unit} in the traced eager call(s), per call; a layer is a module, and a "
        "parent module owns what its own forward code launches outside its children"
    )


def _kernel_words(tracer: str, calls: int, note: str) -> str:
    words = {
        "cupti": "cupti-python activity records (kernels, NVTX markers, runtime and driver launches), "
        "each kernel attributed to the innermost NVTX range open on its launching thread at launch",
        "torch": "torch.profiler trace, each record attributed to the innermost record_function range "
        "open on its launching thread at launch",
        "none": "not traced",
    }[tracer]
    text = f"{words}; {calls} eager call(s) traced, separately from the timed (graph) runs"
    return f"{text}; {note}" if note else text
