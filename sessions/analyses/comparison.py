"""The comparison model: which variant each variant is compared with, the speed-up, and what it means.

Every view that says "faster", draws a speed-up or names a baseline asks this module: the variant
table, the verdict lines, groups, flags, diff, the Markdown, study and matrix exports, and the TUI.

The baseline rule, in one place:
- a variant is compared within its own job (a merged session's rows never meet another job's);
- with the first timed fp16 variant of its own backend (the engine's FP8 against the same engine's fp16:
  the two differ in precision only);
- that fp16 variant itself, and any variant whose backend has no fp16, with the job's reference: the first
  timed fp16 variant of the study's own backend (PyTorch fp16 in a study), else the first timed fp16,
  else the first timed variant.
Speed-up = baseline time per image / variant time per image: above 1 is faster. Whether a speed-up is
"faster", "slower" or "within noise" is decided by `sessions.analyses.noise.judge` on the two latency bands; a
speed-up without bands (imported layer sums, old sessions) is not judged.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from sessions.analyses.noise import FASTER, SLOWER, Band, judge, latency_band
from sessions.documents.errors import InputError
from sessions.documents.model import Session, Variant

BASELINE_PRECISION = "fp16"  # what FP8 is compared with, as the engineers who ship engines decide
Tone = Literal["", "good", "bad", "warn", "dim"]


@dataclass(frozen=True)
class Comparison:
    """One variant against its baseline."""

    variant: Variant
    baseline: Variant | None  # None: nothing timed to compare with
    speedup: float | None  # baseline time per image / variant time per image; None where either is not a time
    judgement: str | None  # FASTER, SLOWER, WITHIN; None where not judged (no band, itself, no baseline)
    statistic: str | None  # the statistic the judgement used, in words

    @property
    def is_baseline(self) -> bool:
        return self.baseline is self.variant


def job_of(session: Session, variant: Variant) -> int | None:
    """The merged job a variant came from, or None in a plain session; a job the session lacks is an error."""
    if session.merge is None or variant.job is None:
        return None
    if not 0 <= variant.job < len(session.merge.jobs):
        raise InputError(f"variant {variant.name!r} names job {variant.job}, but the merged session has "
                         f"{len(session.merge.jobs)} jobs")
    return variant.job


def batch_of(session: Session, variant: Variant) -> int | None:
    """The batch `variant` was measured at: its own job's in a merged session, else the study's."""
    job = job_of(session, variant)
    if job is not None and session.merge is not None:
        return session.merge.jobs[job].study.batch
    return session.study.batch


def _timed(variant: Variant) -> bool:
    return variant.status == "ok" and variant.latency is not None


def baseline_for(session: Session, variant: Variant) -> Variant | None:
    """The variant `variant` is compared with (itself where it is the reference), by the rule above."""
    job = job_of(session, variant)
    peers = [v for v in session.variants if job_of(session, v) == job and _timed(v)]
    if not peers:
        return None
    fp16 = [v for v in peers if v.precision == BASELINE_PRECISION]
    own = next((v for v in fp16 if v.backend == variant.backend), None)
    if own is not None and own is not variant:
        return own
    return reference_of(session, peers, fp16)


def reference_of(session: Session, peers: list[Variant], fp16: list[Variant]) -> Variant:
    """The job's reference: fp16 of the study's own backend, else any fp16, else the first timed."""
    study_backend = session.study.backend
    return next((v for v in fp16 if v.backend == study_backend), fp16[0] if fp16 else peers[0])


def reference(session: Session) -> Variant | None:
    """The session's (first job's) reference variant: what a single baseline name in a header means."""
    timed = [v for v in session.variants if _timed(v)]
    if not timed:
        return None
    job = job_of(session, timed[0])
    peers = [v for v in timed if job_of(session, v) == job]
    return reference_of(session, peers, [v for v in peers if v.precision == BASELINE_PRECISION])


def ratio(base: float | None, value: float | None) -> float | None:
    """base / value where both are positive, finite times; None otherwise (a zero time is not a speed)."""
    if base is None or value is None or not (math.isfinite(base) and math.isfinite(value)) or base <= 0 or value <= 0:
        return None
    return base / value


def _per_image(band: Band | None, batch: int | None) -> Band | None:
    return band.scaled(batch) if band is not None and batch else band


def compare(session: Session, variant: Variant) -> Comparison:
    """`variant` against its baseline; a variant that is its own baseline gets speed-up 1 and no judgement."""
    baseline = baseline_for(session, variant) if _timed(variant) else None
    if baseline is None or variant.latency is None or baseline.latency is None:
        return Comparison(variant, baseline, None, None, None)
    if baseline is variant:
        return Comparison(variant, baseline, 1.0, None, None)
    batch_v, batch_b = batch_of(session, variant), batch_of(session, baseline)
    per_v = variant.latency.median_ms / batch_v if batch_v else None
    per_b = baseline.latency.median_ms / batch_b if batch_b else None
    speedup = ratio(per_b, per_v)
    band_v = _per_image(latency_band(variant.latency), batch_v)
    band_b = _per_image(latency_band(baseline.latency), batch_b)
    if speedup is None or band_v is None or band_b is None:
        return Comparison(variant, baseline, speedup, None, None)
    return Comparison(variant, baseline, speedup, judge(band_b, band_v), band_v.statistic)


def comparisons(session: Session) -> list[Comparison]:
    """Every variant of the session, in session order, against its baseline."""
    return [compare(session, v) for v in session.variants]


def tone(judgement: str | None) -> Tone:
    """How a front end colours a judged speed-up: only what a rerun would repeat is coloured."""
    return "good" if judgement == FASTER else ("bad" if judgement == SLOWER else "")


def speed_factor(speedup: float) -> str:
    """'1.23x faster', '1.08x slower' (speedup: baseline time / variant time): as many decimals as it takes, from two,
    for the factor not to read 1.00 where the two differ (a judged 0.13 % is '1.001x slower', not '1.00x slower')."""
    factor, direction = (speedup, "faster") if speedup >= 1 else (1 / speedup, "slower")
    decimals = 2
    while decimals < 6 and factor != 1 and f"{factor:.{decimals}f}" == f"{1:.{decimals}f}":
        decimals += 1
    return f"{factor:.{decimals}f}x {direction}"


def batch_words(session: Session) -> str:
    """'batch 8', or for a merged session of several batches 'batch per job (1, 32)'."""
    if session.study.batch is not None:
        return f"batch {session.study.batch}"
    jobs = session.merge.jobs if session.merge is not None else []
    batches = sorted({job.study.batch for job in jobs if job.study.batch is not None})
    return f"batch per job ({', '.join(map(str, batches))})" if batches else "batch unknown"
