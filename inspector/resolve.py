"""Request -> run plan: choose the backend, device and tracer for this machine, fill in the defaults, check once.

Runs before any model is loaded, so a study that cannot run here fails in a second with one line. A plan made
elsewhere (`rerun`, a sweep job) is checked here the same way (`checked`). What a study runs is a `RunPlan`: the
recipes checked once, the backend looked up once, the tracer prepared once.
The CUPTI tracer must be prepared before torch or TensorRT loads (NVTX binds its injection once).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from builders.backend import Backend, auto_backends, backend_class
from builders.recipes.fp8 import preflight
from inspector.options import validate_plan
from inspector.request import CPU_TIMING, CUDA_TIMING, StudyRequest
from profilers.device import CUDA, study_device
from profilers.tracers import Tracer, get_tracer, tracer_names
from sessions.documents.errors import InputError, MissingEnvironment
from sessions.documents.plan import StudyPlan, TimingPlan, VariantPlan, named_variants, parse_variants
from sessions.documents.vocab import Device


@dataclass(frozen=True)
class RunPlan:
    """A study checked once and ready to run: the plan, its backend's class (looked up once), its tracer (prepared),
    and one line per choice made. Made only by `resolve` (a request) and `checked` (a plan made elsewhere)."""

    plan: StudyPlan
    backend: type[Backend]
    tracer: Tracer
    notes: tuple[str, ...] = ()
    # the classes of the backends that variants name as their own (`cudnn-fp16`), by name, looked up once
    variant_backends: Mapping[str, type[Backend]] = field(default_factory=dict)

    def builder(self, variant: VariantPlan) -> type[Backend]:
        """The class of the backend that builds `variant`: its own where it names one, else the plan's."""
        name = variant.backend or self.plan.backend
        return self.backend if name == self.plan.backend else self.variant_backends[name]


class Prepared:
    """Each tracer prepared at most once while a plan is made: `prepared(tracer)` is why it cannot run, or None."""

    def __init__(self) -> None:
        self._problems: dict[str, str | None] = {}

    def __call__(self, tracer: Tracer) -> str | None:
        if tracer.name not in self._problems:
            self._problems[tracer.name] = tracer.prepare()
        return self._problems[tracer.name]


def cuda_visible() -> bool:
    """Whether PyTorch sees a CUDA GPU here (imports torch: after CUPTI's preparation, never before)."""
    import torch

    return bool(torch.cuda.is_available())


def asks_gpu(request: StudyRequest) -> bool | None:
    """Whether the request asks for the GPU (True), the CPU (False), or leaves the device to the machine (None)."""
    return None if request.device is None else study_device(request.device).gpu


def choose_backend(request: StudyRequest, has_gpu: bool) -> tuple[type[Backend], Device, str]:
    """(backend, device, why): the backend asked for, or for `auto` the first in `auto_backends()` order that
    runs here; each backend says where it runs and what it lacks (`Backend.device_for`, `unavailable`)."""
    if asks_gpu(request) is True and not has_gpu:
        raise MissingEnvironment("--device cuda: no CUDA GPU is visible to PyTorch here")
    if request.backend != "auto":
        cls = backend_class(request.backend)
        device = cls.device_for(request.device, has_gpu)
        problem = cls.unavailable(device)
        if problem:
            raise MissingEnvironment(f"--backend {request.backend}: {problem}")
        return cls, device, f"{cls.choice_label(device)}, as asked"
    candidates = auto_backends()
    passed: list[str] = []
    skipped = list(candidates.unimportable)
    for cls in candidates.backends:
        device = cls.device_for(request.device, has_gpu)
        if device not in cls.auto_devices:
            skipped.append(f"{cls.label}: --backend auto does not pick it on {device}")
            continue
        problem = cls.unavailable(device)
        if problem is None:
            why = "as asked" if request.device else ("a GPU is visible" if study_device(device).gpu else "no GPU here")
            return cls, device, f"{cls.choice_label(device)} ({'; '.join([why, *passed])})"
        passed.append(f"{cls.label}: {problem}")
    raise MissingEnvironment("no backend runs here: " + "; ".join([*passed, *skipped]))


def choose_tracer(requested: str, device: str, cupti_problem: str | None) -> tuple[str, str]:
    """(tracer, note); `cupti_problem` is why CUPTI could not be prepared, if it could not.

    A tracer named on the command line (a plug-in's too) is taken where it runs on `device`; `auto` takes
    CUPTI on CUDA where it loads, else torch.profiler."""
    if requested != "auto":
        devices = get_tracer(requested).devices
        if device not in devices:
            where = "a CUDA GPU" if devices == {CUDA.name} else " or ".join(sorted(devices))
            raise MissingEnvironment(f"--tracer {requested} needs {where}")
        if requested == "cupti" and cupti_problem is not None:
            raise MissingEnvironment(f"--tracer cupti: {cupti_problem}")
        return requested, ""
    if not study_device(device).gpu:
        return "torch", ""
    if cupti_problem is None:
        return "cupti", ""
    return "torch", f"CUPTI unavailable ({cupti_problem}): kernels from torch.profiler"


def fit_tracer(tracer: str, note: str, backend: type[Backend], device: str, cupti_problem: str | None,
               prepare: Callable[[Tracer], str | None] = Tracer.prepare) -> tuple[str, str]:
    """For --tracer auto: a tracer that sees the backend's layer ranges here, else none (with a note).

    TensorRT marks layers with NVTX only: where CUPTI is missing, torch.profiler would see no layer,
    so the study runs untraced (latency and TensorRT's own per-layer times) instead of failing.
    """
    kinds = backend.capabilities.range_kinds
    if get_tracer(tracer).range_kind in kinds:
        return tracer, note
    for name in tracer_names():
        candidate = get_tracer(name)
        if (candidate.range_kind in kinds and device in candidate.devices and name != "cupti"
                and prepare(candidate) is None):
            return name, note
    why = f"CUPTI unavailable ({cupti_problem})" if study_device(device).gpu and cupti_problem else "no tracer here"
    return "none", (f"{why}: no kernel trace, since the {backend.name} backend marks layers with "
                    f"{' or '.join(sorted(kinds))} only")


def default_timing(request: StudyRequest, device: str) -> TimingPlan:
    defaults = CUDA_TIMING if study_device(device).gpu else CPU_TIMING
    return TimingPlan(
        request.warmup_s if request.warmup_s is not None else defaults.warmup_s,
        request.rounds or defaults.rounds,
        request.iters or defaults.iters,
        request.switch_warmup if request.switch_warmup is not None else defaults.switch_warmup,
    )


def resolve(request: StudyRequest) -> RunPlan:
    """The checked run plan for this machine, with one line per choice made (what the user sees first)."""
    request.validate()
    prepared = Prepared()
    cupti_problem: str | None = "not asked for"
    if request.tracer in ("auto", "cupti") and asks_gpu(request) is not False:
        cupti_problem = prepared(get_tracer("cupti"))  # before torch loads
    backend, device, why = choose_backend(request, cuda_visible())
    tracer, tracer_note = choose_tracer(request.tracer, device, cupti_problem)
    if request.tracer == "auto":
        tracer, tracer_note = fit_tracer(tracer, tracer_note, backend, device, cupti_problem, prepared)
    variants = parse_variants(request.variants or backend.default_variants(device), list(request.fp8_recipes),
                              list(request.fp8_exclude))
    if request.variants:
        named = named_variants(request.variants, list(request.fp8_recipes), list(request.fp8_exclude))
    else:  # the backend's default variants: named only where the user named their recipes
        named = frozenset(v.name for v in variants) if request.fp8_recipes else frozenset()
    variants, recipe_notes = preflight(request.model, request.checkpoint, variants, named)
    chosen: dict[str, Any] = {"backend": backend.name, "device": device, "variants": variants,
                              "timing": default_timing(request, device), "tracer": tracer}
    given = {name: getattr(request, name) for name in StudyPlan.__dataclass_fields__ if name not in chosen}
    plan = StudyPlan(**chosen, **given)  # every other plan field is the request's option of that name
    notes = [f"backend: {why}; tracer: {tracer}"] + ([tracer_note] if tracer_note else []) + recipe_notes
    runs = ready(plan, backend, prepared)  # before sizing: a plan that cannot run here costs no forward timed
    if backend.sizes_cpu_plan and not study_device(device).gpu:
        from inspector.cpu_defaults import fit_cpu_plan

        plan, cpu_notes = fit_cpu_plan(plan, request)
        notes += cpu_notes
    return replace(runs, plan=plan, notes=tuple(notes))


def checked(plan: StudyPlan) -> RunPlan:
    """A plan made elsewhere (read back by `rerun`, a sweep job's) checked completely, as `resolve` checks its own:
    its options and recipes against the spec, then whether it runs on this machine. Its tracer, where registered
    already, is prepared before the backend's class is looked up (which loads torch); a tracer a backend's library
    registers is prepared by `ready`."""
    validate_plan(plan)
    prepared = Prepared()
    if plan.tracer in tracer_names() and plan.device in get_tracer(plan.tracer).devices:
        prepared(get_tracer(plan.tracer))  # before the backend's class loads torch; `ready` reports what it says
    run = ready(plan, backend_class(plan.backend), prepared)
    if study_device(plan.device).gpu and not cuda_visible():  # recorded on another machine
        raise MissingEnvironment("the plan runs on CUDA, and no CUDA GPU is visible to PyTorch here")
    return run


def ready(plan: StudyPlan, backend: type[Backend], prepared: Prepared) -> RunPlan:
    """The run plan, or one line on why `plan` cannot run here: every variant's backend builds it here, the plan's
    backend runs on its device, and its tracer runs there, sees the backend's layer ranges and is prepared."""
    own = {name: backend_class(name) for name in dict.fromkeys(v.backend for v in plan.variants if v.backend)}
    for variant in plan.variants:  # a variant that names its own backend: one that backend builds so
        problem = own[variant.backend].variant_problem(variant) if variant.backend else None
        if problem:
            raise InputError(problem)
    for name, cls in own.items():  # the backends variants name: each runs here
        problem = cls.unavailable(plan.device) or (
            None if plan.device in cls.capabilities.devices else f"the {name} backend does not run on {plan.device}")
        if problem:
            raise MissingEnvironment(problem)
    if plan.device not in backend.capabilities.devices:
        raise MissingEnvironment(f"the {plan.backend} backend does not run on {plan.device}")
    problem = backend.unavailable(plan.device)  # first: a backend's library may register the tracer that serves it
    if problem:
        raise MissingEnvironment(problem)
    tracer = get_tracer(plan.tracer)
    if plan.device not in tracer.devices:
        raise MissingEnvironment(f"--tracer {plan.tracer} needs a CUDA GPU")
    if tracer.range_kind is not None and tracer.range_kind not in backend.capabilities.range_kinds:
        kinds = " or ".join(sorted(backend.capabilities.range_kinds)) or "no ranges"
        raise MissingEnvironment(f"the {plan.backend} backend marks layers with {kinds}, "
                                 f"which --tracer {plan.tracer} cannot see")
    problem = prepared(tracer)
    if problem:
        raise MissingEnvironment(problem)
    return RunPlan(plan, backend, tracer, variant_backends=own)
