"""Request -> plan: choose the backend, device and tracer for this machine, fill in the defaults.

Runs before any model is loaded, so a study that cannot run here fails in a second with one line.
The CUPTI tracer must be prepared before torch or TensorRT loads (NVTX binds its injection once).
"""

from __future__ import annotations

from typing import Any

from builders.backend import auto_backends, backend_class
from builders.recipes.fp8 import preflight
from inspector.request import CPU_TIMING, CUDA_TIMING, StudyRequest
from profilers.tracers import get_tracer, tracer_names
from sessions.documents.errors import MissingEnvironment
from sessions.documents.plan import StudyPlan, TimingPlan, parse_variants
from sessions.documents.vocab import Device


def cuda_visible() -> bool:
    """Whether PyTorch sees a CUDA GPU here (imports torch: after CUPTI's preparation, never before)."""
    import torch

    return bool(torch.cuda.is_available())


def choose_backend(request: StudyRequest, has_gpu: bool) -> tuple[str, Device, str]:
    """(backend, device, why): the backend asked for, or for `auto` the first in `auto_backends()` order that
    runs here; each backend says where it runs and what it lacks (`Backend.device_for`, `unavailable`)."""
    if request.device == "cuda" and not has_gpu:
        raise MissingEnvironment("--device cuda: no CUDA GPU is visible to PyTorch here")
    if request.backend != "auto":
        cls = backend_class(request.backend)
        device = cls.device_for(request.device, has_gpu)
        problem = cls.unavailable(device)
        if problem:
            raise MissingEnvironment(f"--backend {request.backend}: {problem}")
        return cls.name, device, f"{cls.choice_label(device)}, as asked"
    passed: list[str] = []
    for cls in auto_backends():
        device = cls.device_for(request.device, has_gpu)
        if device not in cls.auto_devices:
            continue
        problem = cls.unavailable(device)
        if problem is None:
            why = "as asked" if request.device else ("a GPU is visible" if device == "cuda" else "no GPU here")
            return cls.name, device, f"{cls.choice_label(device)} ({'; '.join([why, *passed])})"
        passed.append(f"{cls.label}: {problem}")
    raise MissingEnvironment("no backend runs here: " + "; ".join(passed))


def choose_tracer(requested: str, device: str, cupti_problem: str | None) -> tuple[str, str]:
    """(tracer, note); `cupti_problem` is why CUPTI could not be prepared, if it could not.

    A tracer named on the command line (a plug-in's too) is taken where it runs on `device`; `auto` takes
    CUPTI on CUDA where it loads, else torch.profiler."""
    if requested != "auto":
        devices = get_tracer(requested).devices
        if device not in devices:
            where = "a CUDA GPU" if devices == {"cuda"} else " or ".join(sorted(devices))
            raise MissingEnvironment(f"--tracer {requested} needs {where}")
        if requested == "cupti" and cupti_problem is not None:
            raise MissingEnvironment(f"--tracer cupti: {cupti_problem}")
        return requested, ""
    if device == "cpu":
        return "torch", ""
    if cupti_problem is None:
        return "cupti", ""
    return "torch", f"CUPTI unavailable ({cupti_problem}): kernels from torch.profiler"


def fit_tracer(tracer: str, note: str, backend: str, device: str, cupti_problem: str | None) -> tuple[str, str]:
    """For --tracer auto: a tracer that sees the backend's layer ranges here, else none (with a note).

    TensorRT marks layers with NVTX only: where CUPTI is missing, torch.profiler would see no layer,
    so the study runs untraced (latency and TensorRT's own per-layer times) instead of failing.
    """
    kinds = backend_class(backend).capabilities.range_kinds
    if get_tracer(tracer).range_kind in kinds:
        return tracer, note
    for name in tracer_names():
        candidate = get_tracer(name)
        if (candidate.range_kind in kinds and device in candidate.devices and name != "cupti"
                and candidate.prepare() is None):
            return name, note
    why = f"CUPTI unavailable ({cupti_problem})" if device == "cuda" and cupti_problem else "no tracer here"
    return "none", (f"{why}: no kernel trace, since the {backend} backend marks layers with "
                    f"{' or '.join(sorted(kinds))} only")


def default_timing(request: StudyRequest, device: str) -> TimingPlan:
    defaults = CUDA_TIMING if device == "cuda" else CPU_TIMING
    return TimingPlan(
        request.warmup_s if request.warmup_s is not None else defaults.warmup_s,
        request.rounds or defaults.rounds,
        request.iters or defaults.iters,
        request.switch_warmup if request.switch_warmup is not None else defaults.switch_warmup,
    )


def resolve(request: StudyRequest) -> tuple[StudyPlan, list[str]]:
    """The plan for this machine, and one line per choice made (what the user sees first)."""
    request.validate()
    cupti_problem: str | None = "not asked for"
    if request.tracer in ("auto", "cupti") and request.device != "cpu":
        cupti_problem = get_tracer("cupti").prepare()  # before torch loads
    backend, device, why = choose_backend(request, cuda_visible())
    tracer, tracer_note = choose_tracer(request.tracer, device, cupti_problem)
    if request.tracer == "auto":
        tracer, tracer_note = fit_tracer(tracer, tracer_note, backend, device, cupti_problem)
    backend_cls = backend_class(backend)
    variants = parse_variants(request.variants or backend_cls.default_variants(device), list(request.fp8_recipes),
                              list(request.fp8_exclude))
    explicit = bool(request.fp8_recipes) or "fp8-" in (request.variants or "")
    variants, recipe_notes = preflight(request.model, request.checkpoint, variants, explicit)
    chosen: dict[str, Any] = {"backend": backend, "device": device, "variants": variants,
                              "timing": default_timing(request, device), "tracer": tracer}
    given = {name: getattr(request, name) for name in StudyPlan.__dataclass_fields__ if name not in chosen}
    plan = StudyPlan(**chosen, **given)  # every other plan field is the request's option of that name
    notes = [f"backend: {why}; tracer: {tracer}"] + ([tracer_note] if tracer_note else []) + recipe_notes
    if backend_cls.sizes_cpu_plan and device == "cpu":
        from inspector.cpu_defaults import fit_cpu_plan

        plan, cpu_notes = fit_cpu_plan(plan, request)
        notes += cpu_notes
    return plan, notes
