"""The one small interface every engine backend implements, and the registry that names them.

A backend turns a plan's model and one variant into an `Engine` that can run, be timed, be traced,
report per-layer times where it has them, and describe itself. Optional abilities are declared in
`Capabilities`, never probed: the study reads the flags, and an engine without an ability raises
`NotImplementedError` if asked anyway. A new backend is one module, `builders/<room>/<name>_backend.py`, with one
registered class of that name.
"""

from __future__ import annotations

import contextlib
import importlib
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, NamedTuple

from builders.study_inputs import StudyInputs
from profilers.device import device_for, study_device
from sessions.documents.errors import InputError, MissingEnvironment, first_line
from sessions.documents.model import Layer, Variant
from sessions.documents.plan import StudyPlan, VariantPlan
from sessions.documents.vocab import Device, Precision


@dataclass(frozen=True)
class Capabilities:
    # what the engine's own per-layer profiler measures (TensorRT's IProfiler); None: none
    layer_times: str | None = None
    range_kinds: frozenset[str] = frozenset()  # layer ranges a tracer can see: nvtx, annotation
    devices: frozenset[str] = frozenset({"cuda", "cpu"})
    # device memory allocated through PyTorch's caching allocator (profilers.memory measures it)
    torch_memory: bool = True


@dataclass(frozen=True)
class TimingStep:
    """What the timer repeats: one inference, replaying a CUDA graph where capture worked."""

    run: Callable[[], None]
    graphed: bool
    note: str | None = None  # why it is not a graph, where capture failed


class Engine(ABC):
    """One built variant, bound to a static input of the study's batch size."""

    @abstractmethod
    def infer(self, batch: Any) -> Any:
        """Outputs (logits) for a float32 CPU batch, as a float32 CPU tensor."""

    @abstractmethod
    def run_once(self) -> None:
        """One eager inference on the static input (what the tracers record)."""

    @abstractmethod
    def timing_step(self) -> TimingStep:
        """What the timer repeats: one inference on the static input.

        Returns:
            The step, `graphed` where it replays a captured CUDA graph, else with a `note` saying why not.
            Asked once per variant, after `run_once` has run; the same step may be called many thousand times.
        """

    @abstractmethod
    def layer_ranges(self, kind: str) -> contextlib.AbstractContextManager[None]:
        """While active, each layer runs inside a range of `kind` (one of Capabilities.range_kinds)."""

    @abstractmethod
    def layers(self) -> list[Layer]:
        """The engine's layers in execution order, with what is known before tracing."""

    def range_to_layer(self, name: str) -> str:
        """The layer a range name stands for (TensorRT decorates its NVTX messages)."""
        return name

    def simulated_infer(self, batches: list[Any]) -> Any:
        """Outputs of the simulated variant this engine's numerics should match on every sample of `batches`, in
        order and as one array (float32 CPU), or None."""
        return None

    def layer_outputs(self, visit: Callable[[Any], None]) -> contextlib.AbstractContextManager[None]:
        """While active, an eager inference (`infer` on the CPU) passes each layer's output tensors to `visit`; an
        engine without per-layer outputs (the default) passes none."""
        return contextlib.nullcontext()

    def layer_times(self, calls: int) -> dict[str, list[float]]:
        """Each layer's times (ms) as the profiler reported them over `calls` inferences, one per report
        (one per call where the layer runs once a call); only where Capabilities.layer_times."""
        raise NotImplementedError

    @abstractmethod
    def release(self) -> None:
        """Free device memory."""


@dataclass
class BuildResult:
    engine: Engine
    variant: Variant  # name, precision, recipe, build_s, artifact_bytes filled in


@dataclass
class BackendContext:
    """What every backend is built from: the plan, the loaded model and the study's inputs."""

    plan: StudyPlan
    model: Any  # builders.models.catalog.LoadedModel
    static_input: Any  # the timed and traced batch
    report: Callable[[str, int, int], None] = field(default=lambda phase, step, steps: None)


class Backend(ABC):
    """A way to build and run a model's variants. A subclass sets `name`, `label` and `capabilities`, implements
    `__init__`, `build` and `reference`, and registers itself with `register_backend` in
    `builders/<room>/<name>_backend.py`."""

    name: ClassVar[str]
    label: ClassVar[str]  # how sessions and notes name the engine: "PyTorch", "TensorRT"
    capabilities: Capabilities  # set on the class; an instance may restate it (the TensorRT stand-in's wording)
    auto_rank: ClassVar[int | None] = None  # the order in which `--backend auto` tries it (lowest first); None: never
    auto_devices: ClassVar[frozenset[str]] = frozenset()  # the devices on which `--backend auto` may pick it
    plan_options: ClassVar[tuple[str, ...]] = ()  # plan fields only this engine reads (TensorRT: opt_level)
    # The precisions a variant may ask of this backend in another backend's study, by its variant prefix (its
    # name: `cudnn-fp16`, `compile-fp32`); built beside the study's own variants and compared as they are.
    # Empty: no variant names it.
    variant_precisions: ClassVar[tuple[Precision, ...]] = ()
    # whether a CPU study on it is sized to the machine (inspector.cpu_defaults times PyTorch's eager forwards)
    sizes_cpu_plan: ClassVar[bool] = False

    @classmethod
    def default_variants(cls, device: str) -> str:
        """The variants a study on `device` runs when none are asked for: fp32, fp16 (bf16 on the CPU) and FP8."""
        return "fp32,fp16,fp8" if study_device(device).gpu else "fp32,bf16,fp8"

    @classmethod
    def variant_prefix(cls) -> str:
        """What a variant's name starts with when this backend builds it in another backend's study."""
        return f"{cls.name}-"

    @classmethod
    def variant_words(cls) -> str:
        """The variants a study may ask of this backend, in words: `cudnn-fp16, cudnn-fp8, cudnn-fp8-<recipe>`."""
        words = [f"{cls.variant_prefix()}{precision}" for precision in cls.variant_precisions]
        if "fp8" in cls.variant_precisions:
            words.append(f"{cls.variant_prefix()}fp8-<recipe>")
        return ", ".join(words)

    @classmethod
    def variant_problem(cls, variant: VariantPlan) -> str | None:
        """Why `variant`, which names this backend as its prefix, is not one this backend builds so, or None."""
        if variant.precision in cls.variant_precisions:
            return None
        if not cls.variant_precisions:
            return f"unknown variant {variant.name!r}: the {cls.name} backend builds no variant of another's study"
        return f"unknown variant {variant.name!r}; the {cls.name} backend builds {cls.variant_words()}"

    @classmethod
    def unavailable(cls, device: str) -> str | None:
        """Why this backend cannot run here on `device`, or None; checked before any work."""
        return None

    @classmethod
    def device_for(cls, asked: str | None, has_gpu: bool) -> Device:
        """The device a study on this backend runs on: the GPU where one is visible, unless the CPU is asked for."""
        return device_for(has_gpu and (asked is None or study_device(asked).gpu)).name

    @classmethod
    def choice_label(cls, device: str) -> str:
        """The backend on `device`, as the study's first line names it (`PyTorch on CUDA`)."""
        return f"{cls.label} on {study_device(device).words}"

    @classmethod
    def prepared(cls, plan: StudyPlan) -> contextlib.AbstractContextManager[None]:
        """Entered once a study that builds variants on this backend starts, before its model loads, and left when
        the study ends: a backend may start here, in the background, work its first build would otherwise wait for,
        and end there what no build took. Nothing by default."""
        return contextlib.nullcontext()

    @classmethod
    def load_inputs(cls, plan: StudyPlan) -> StudyInputs:
        """The model and the study's real-image inputs (PyTorch sources; a backend may read others)."""
        from builders.study_inputs import load_study_inputs

        return load_study_inputs(plan)

    @abstractmethod
    def __init__(self, context: BackendContext) -> None:
        """Hold what every variant is built from; load nothing slow here (the first `build` may).

        Args:
            context: the plan, the loaded model, the static input and the progress callback.
        """

    @abstractmethod
    def build(self, variant: VariantPlan, calibration: Any) -> BuildResult:
        """Build one variant of the plan's model.

        Args:
            variant: the precision, recipe and options of the variant (its backend is this one).
            calibration: the calibration batches (images as the model's transform gives them), for FP8 scales.

        Returns:
            The engine bound to the static input, and the variant record with its name, precision, recipe,
            build seconds and artifact size filled in.

        Raises:
            Exception: any; it fails this variant only (the study records its first line as the reason and goes
                on), so an `InspectError` whose message says what to do is the kind to raise on purpose.
        """

    @abstractmethod
    def reference(self, batch: Any) -> Any:
        """fp32 outputs for quality comparisons."""

    def describe(self) -> dict[str, str]:
        """Versions and settings worth recording in the session (e.g. the TensorRT version)."""
        return {}

    def builds_ending(self) -> None:  # noqa: B027 - an optional hook: a backend that holds nothing for building keeps it
        """Called once this backend has built (or failed to build) the last variant the study asks of it, before that
        variant's quality and trace: what it holds only for building may begin to be let go here, without waiting
        for it (`builds_done` follows, and waits). Must not raise (the variant's build is over: an exception here
        would fail it). Does nothing unless a backend overrides it."""

    def builds_done(self) -> None:  # noqa: B027 - an optional hook: a backend that holds nothing for building keeps it
        """Called once the study has built every variant: what the backend holds only for building (worker
        processes) is let go here; the engines it built stay usable. Does nothing unless a backend overrides it."""

    def engine(self) -> str:
        """The engine as sessions name it, with its version (`TensorRT 10.3.0`, `PyTorch 2.11.0`): stored in the
        study, so that renderers never ask which backend made a session."""
        return self.label


BACKEND_MODULE_SUFFIX = "_backend"  # builders/<room>/<name>_backend.py holds the backend called <name>


def builtin_backends() -> dict[str, str]:
    """{name: module} of the backends shipped in this package, found by file name in its rooms, not imported:
    importing torch or TensorRT is slow, so a backend module is loaded when it is first asked for."""
    here = Path(__file__).parent
    return {path.stem.removesuffix(BACKEND_MODULE_SUFFIX):
            ".".join((__package__ or "builders", *path.relative_to(here).with_suffix("").parts))
            for path in sorted(here.glob(f"*/*{BACKEND_MODULE_SUFFIX}.py"))}


_registered: dict[str, type[Backend]] = {}


def register_backend(cls: type[Backend]) -> type[Backend]:
    """Class decorator: make `cls` available by its `name` (tests and plug-ins use it too)."""
    _registered[cls.name] = cls
    return cls


def backend_names() -> list[str]:
    return sorted(set(builtin_backends()) | set(_registered))


class AutoBackends(NamedTuple):
    """What `--backend auto` may try: `backends` in order, and `unimportable`, one line per built-in backend left
    out because its module cannot be imported here (`backend_class`'s reason: the module and the error)."""

    backends: list[type[Backend]]
    unimportable: list[str]


def auto_backends() -> AutoBackends:
    """The backends `--backend auto` tries, in order, and why each built-in one that cannot be imported is not."""
    found, unimportable = [], []
    for name in backend_names():
        try:
            cls = backend_class(name)
        except MissingEnvironment as exc:
            unimportable.append(str(exc))
            continue
        if cls.auto_rank is not None:
            found.append(cls)
    return AutoBackends(sorted(found, key=lambda cls: (cls.auto_rank, cls.name)), unimportable)


def backend_class(name: str) -> type[Backend]:
    if name not in _registered:
        modules = builtin_backends()
        if name not in modules:
            raise InputError(f"unknown backend {name!r}; known: {', '.join(backend_names())}")
        try:
            importlib.import_module(modules[name])  # its class registers itself (@register_backend)
        except ImportError as exc:
            raise MissingEnvironment(f"backend {name}: importing {modules[name]} failed: {first_line(exc)}") from None
        if name not in _registered:
            raise InputError(f"{modules[name]} registers no backend named {name!r}")
    return _registered[name]
