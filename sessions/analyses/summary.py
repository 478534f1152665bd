"""One row per variant: the figures every view starts from (CLI, JSON, TUI overview, export)."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from sessions.analyses.captions import quality_caveats
from sessions.analyses.comparison import Comparison, batch_of, comparisons, reference
from sessions.analyses.precision_choice import asked_fp8
from sessions.documents.model import SCHEMA_VERSION, Session, Variant
from sessions.documents.vocab import RAN_FP8


@dataclass
class VariantSummary:
    name: str
    backend: str
    precision: str
    status: str
    simulated: bool
    median_ms: float | None
    p99_ms: float | None
    cov: float | None
    speedup: float | None  # baseline time / this time per image: above 1 is faster (sessions.analyses.comparison)
    baseline: str | None  # the variant it is compared with (itself where it is the reference)
    judgement: str | None  # faster, slower, within noise; None where not judged
    per_call: float | None  # kernels (or ops) per call
    unit: str | None
    unattributed_per_call: float | None  # kernels (or ops) no layer owns, per call, as `per_call` counts them
    top1_agreement: float | None
    mean_kl: float | None
    max_abs_logit_error: float | None
    nonfinite: int | None
    artifact_mib: float | None
    fp8_weight_mib: float | None  # the weights with the recipe's quantized ones at one byte (FP8 recipes only)
    build_s: float | None
    error: str | None
    layer_sum_ms: float | None = None  # sum of per-layer times, where the variant has no latency (imported profiles)
    images_per_s: float | None = None  # batch / median: throughput of the timed calls
    peak_memory_mib: float | None = None  # Variant.peak_memory_bytes (profilers.memory); None where not measured
    simulation_top1_agreement: float | None = None  # a real-FP8 engine against the simulated variant of its recipe
    simulation_max_logit_difference: float | None = None
    relative_error: float | None = None  # max abs logit error over the reference's largest |logit| (Quality)


def summarize_variant(comparison: Comparison, batch: int | None) -> VariantSummary:
    """The variant's row against its baseline; `batch` (images per call, None where unknown) gives throughput."""
    variant = comparison.variant
    lat, trace, q = variant.latency, variant.trace, variant.quality
    return VariantSummary(
        name=variant.name,
        backend=variant.backend,
        precision=variant.precision,
        status=variant.status,
        simulated=variant.simulated,
        median_ms=lat.median_ms if lat else None,
        p99_ms=lat.p99_ms if lat else None,
        cov=lat.cov if lat else None,
        speedup=comparison.speedup,
        baseline=comparison.baseline.name if comparison.baseline is not None else None,
        judgement=comparison.judgement,
        per_call=trace.per_call if trace else None,
        unit=trace.unit if trace else None,
        unattributed_per_call=trace.unattributed_per_call if trace else None,
        top1_agreement=q.top1_agreement if q else None,
        mean_kl=q.mean_kl if q else None,
        max_abs_logit_error=q.max_abs_logit_error if q else None,
        nonfinite=q.nonfinite if q else None,
        artifact_mib=_mib(variant.artifact_bytes),
        fp8_weight_mib=_mib(variant.recipe.weight_bytes_fp8) if variant.recipe else None,
        build_s=variant.build_s,
        error=variant.error,
        layer_sum_ms=layer_sum_ms(variant) if lat is None else None,
        images_per_s=batch / lat.median_ms * 1e3 if lat and batch and lat.median_ms > 0 else None,
        peak_memory_mib=_mib(variant.peak_memory_bytes),
        simulation_top1_agreement=variant.simulation.top1_agreement if variant.simulation else None,
        simulation_max_logit_difference=variant.simulation.max_abs_logit_error if variant.simulation else None,
        relative_error=q.relative_error if q else None,
    )


def simulation_lines(session: Session) -> list[str]:
    """Whether the simulation predicted each real-FP8 variant's numerics, one line each: the variant's agreement
    with fp32 and with the simulated variant of its recipe, per image (classification) or per pixel
    (segmentation: the fraction of pixels whose class is the same)."""
    lines = []
    for v in session.variants:
        simulation = v.simulation
        if simulation is None:
            continue
        measure = "pixel agreement" if simulation.task == "segmentation" else "top-1 agreement"
        over = (f"pixels of {simulation.images} images" if simulation.task == "segmentation"
                else f"{simulation.images} images")
        with_fp32 = f"{v.quality.top1_agreement * 100:.2f} % with {v.quality.reference}, " if v.quality else ""
        asked = asked_fp8(v)
        kept_out = sum(ran != RAN_FP8 for _, ran in asked)
        apart = (f"; the simulation quantizes every layer of the recipe, the engine ran {kept_out} of those "
                 f"{len(asked)} in higher precision (by timing or refused), so they differ by construction"
                 if kept_out else "")
        lines.append(f"{v.name} (real FP8): {measure} {with_fp32}{simulation.top1_agreement * 100:.2f} % with "
                     f"{simulation.reference}, over {over}; largest logit difference from the simulated "
                     f"{simulation.max_abs_logit_error:.3g}{apart}")
    return lines


def _mib(size: int | None) -> float | None:
    return size / (1 << 20) if size is not None else None


def layer_sum_ms(variant: Variant) -> float | None:
    times = [layer.time_ms for layer in variant.layers if layer.time_ms is not None]
    return sum(times) if times else None


def median_cell(s: VariantSummary) -> float | str | None:
    """The median, or the sum of layer times labelled as such where no latency was measured."""
    if s.median_ms is None and s.layer_sum_ms is not None:
        return f"{s.layer_sum_ms:.4g} ms (sum of layer times)"
    return s.median_ms


def summarize_session(session: Session) -> list[VariantSummary]:
    return [summarize_variant(c, batch_of(session, c.variant)) for c in comparisons(session)]


def summary_document(session: Session, path: str | None = None) -> dict[str, object]:
    baseline = reference(session)
    return {
        "schema_version": SCHEMA_VERSION,
        "session": path,
        "model": session.study.model,
        "backend": session.study.backend,
        "device": session.study.device,
        "gpu": session.environment.gpu.name if session.environment.gpu else None,
        "baseline": baseline.name if baseline else None,  # the reference; each variant names its own baseline
        "weights": session.study.weights,  # "random (pretrained=False, seed N)": quality compares numerics only
        "quality_caveats": quality_caveats(session),
        "variants": [asdict(s) for s in summarize_session(session)],
    }
