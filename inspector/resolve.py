"""Request -> plan: choose the backend, device and tracer for this machine, fill in the defaults.

Runs before any model is loaded, so a study that cannot run here fails in a second with one line.
The CUPTI tracer must be prepared before torch or TensorRT loads (NVTX binds its injection once).
"""

from __future__ import annotations

import importlib.util

from builders.backend import backend_class
from builders.fp8_recipes import preflight
from inspector.request import CPU_TIMING, CUDA_TIMING, StudyRequest
from profilers.tracers import get_tracer, tracer_names
from sessions.errors import MissingEnvironment
from sessions.plan import StudyPlan, TimingPlan, parse_variants
from sessions.vocab import Device


def tensorrt_installed() -> bool:
    return importlib.util.find_spec("tensorrt") is not None


def cuda_visible() -> bool:
    """Whether PyTorch sees a CUDA GPU here (imports torch: after CUPTI's preparation, never before)."""
    import torch

    return bool(torch.cuda.is_available())


def choose_backend(request: StudyRequest, has_gpu: bool) -> tuple[str, Device, str]:
    """(backend, device, why)."""
    if request.device == "cuda" and not has_gpu:
        raise MissingEnvironment("--device cuda: no CUDA GPU is visible to PyTorch here")
    if request.backend == "tensorrt":
        if not tensorrt_installed():
            raise MissingEnvironment(
                "--backend tensorrt: TensorRT is not installed (pip install 'trt-inspect[tensorrt]' where NVIDIA's index is reachable)"
            )
        return tensorrt_device(request, has_gpu)
    if request.backend == "torch":
        device: Device = "cpu" if request.device == "cpu" or not has_gpu else "cuda"
        return "torch", device, f"PyTorch on {device}, as asked"
    if tensorrt_installed() and has_gpu and request.device != "cpu":
        return "tensorrt", "cuda", "TensorRT found with a GPU"
    if has_gpu and request.device != "cpu":
        return "torch", "cuda", "PyTorch on CUDA (TensorRT is not installed)"
    return "torch", "cpu", "PyTorch on the CPU (" + ("as asked" if request.device == "cpu" else "no GPU here") + ")"


def tensorrt_device(request: StudyRequest, has_gpu: bool) -> tuple[str, Device, str]:
    """TensorRT needs a CUDA GPU; on the host only its stand-in for tests runs (tests/fake_tensorrt)."""
    device: Device = "cuda" if has_gpu and request.device != "cpu" else "cpu"
    problem = backend_class("tensorrt").unavailable(device)
    if problem:
        raise MissingEnvironment(problem)
    return "tensorrt", device, "TensorRT, as asked" if device == "cuda" else "the TensorRT stand-in for tests, as asked"


def choose_tracer(requested: str, device: str, cupti_problem: str | None) -> tuple[str, str]:
    """(tracer, note); `cupti_problem` is why CUPTI could not be prepared, if it could not."""
    if requested == "none":
        return "none", ""
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
        if candidate.range_kind in kinds and device in candidate.devices and name != "cupti" and candidate.prepare() is None:
            return name, note
    why = f"CUPTI unavailable ({cupti_problem})" if device == "cuda" and cupti_problem else "no tracer here"
    return "none", f"{why}: no kernel trace, since the {backend} backend marks layers with {' or '.join(sorted(kinds))} only"


def default_variants(device: str) -> str:
    return "fp32,fp16,fp8" if device == "cuda" else "fp32,bf16,fp8"


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
    variants = parse_variants(request.variants or default_variants(device), list(request.fp8_recipes), list(request.fp8_exclude))
    explicit = bool(request.fp8_recipes) or "fp8-" in (request.variants or "")
    variants, recipe_notes = preflight(request.model, request.checkpoint, variants, explicit)
    plan = StudyPlan(
        model=request.model, backend=backend, device=device, variants=variants, batch=request.batch,
        timing=default_timing(request, device), tracer=tracer, trace_calls=request.trace_calls,
        images=request.images, calib_count=request.calib_count, eval_count=request.eval_count,
        checkpoint=request.checkpoint, opt_level=request.opt_level, seed=request.seed, out=request.out,
        raw_trace=request.raw_trace, threads=request.threads,
    )
    notes = [f"backend: {why}; tracer: {tracer}"] + ([tracer_note] if tracer_note else []) + recipe_notes
    return plan, notes
