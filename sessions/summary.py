"""One row per variant: the figures every view starts from (CLI, JSON, TUI overview, export)."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from sessions.model import SCHEMA_VERSION, Session, Variant


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
    speedup: float | None  # baseline median / this median: above 1 is faster
    per_call: float | None  # kernels (or ops) per call
    unit: str | None
    unattributed: int | None
    top1_agreement: float | None
    mean_kl: float | None
    max_abs_logit_error: float | None
    nonfinite: int | None
    artifact_mib: float | None
    build_s: float | None
    error: str | None


def summarize_variant(variant: Variant, baseline: Variant | None) -> VariantSummary:
    lat, trace, q = variant.latency, variant.trace, variant.quality
    speedup = None
    if lat and baseline is not None and baseline.latency and lat.median_ms > 0:
        speedup = baseline.latency.median_ms / lat.median_ms
    return VariantSummary(
        name=variant.name,
        backend=variant.backend,
        precision=variant.precision,
        status=variant.status,
        simulated=variant.simulated,
        median_ms=lat.median_ms if lat else None,
        p99_ms=lat.p99_ms if lat else None,
        cov=lat.cov if lat else None,
        speedup=speedup,
        per_call=trace.per_call if trace else None,
        unit=trace.unit if trace else None,
        unattributed=trace.unattributed if trace else None,
        top1_agreement=q.top1_agreement if q else None,
        mean_kl=q.mean_kl if q else None,
        max_abs_logit_error=q.max_abs_logit_error if q else None,
        nonfinite=q.nonfinite if q else None,
        artifact_mib=variant.artifact_bytes / (1 << 20) if variant.artifact_bytes is not None else None,
        build_s=variant.build_s,
        error=variant.error,
    )


def summarize_session(session: Session) -> list[VariantSummary]:
    return [summarize_variant(v, session.baseline_for(v)) for v in session.variants]


def summary_document(session: Session, path: str | None = None) -> dict:
    baseline = session.baseline()
    return {
        "schema_version": SCHEMA_VERSION,
        "session": path,
        "model": session.study.model,
        "backend": session.study.backend,
        "device": session.study.device,
        "gpu": session.environment.gpu.name if session.environment.gpu else None,
        "baseline": baseline.name if baseline else None,
        "variants": [asdict(s) for s in summarize_session(session)],
    }


COV_WARN = 0.025  # trtexec warns above 2.5 %: clocks or other load make the figures unstable


def unstable_variants(session: Session) -> list[str]:
    return [v.name for v in session.variants if v.latency is not None and v.latency.cov > COV_WARN]


SUMMARY_HEADERS = ["variant", "backend", "median ms", "p99 ms", "CoV %", "x", "per call", "top-1 %", "KL", "MiB", "status"]


def summary_rows(session: Session) -> list[list]:
    rows = []
    for s in summarize_session(session):
        name = f"{s.name} (simulated)" if s.simulated else s.name
        per_call = f"{s.per_call:.0f} {s.unit}s" if s.per_call is not None else None
        rows.append(
            [
                name,
                s.backend,
                s.median_ms,
                s.p99_ms,
                s.cov * 100 if s.cov is not None else None,
                s.speedup,
                per_call,
                s.top1_agreement * 100 if s.top1_agreement is not None else None,
                s.mean_kl,
                s.artifact_mib,
                s.status if not s.error else f"failed: {s.error}",
            ]
        )
    return rows
