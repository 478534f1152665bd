"""The study's answer: for each quantized variant against its baseline, the verdict, the group behind it,
and the notes that qualify it (simulated or real kernels, noise, NaN/Inf on stress inputs, floored scales).

Quantized variants are those whose session precision is a quantized number format: never a name.
The verdict is `sessions.analyses.verdict.verdicts`' (or, without end-to-end times, the labelled layer-time one).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sessions.analyses import captions
from sessions.analyses.comparison import tone
from sessions.analyses.groups import Rules
from sessions.analyses.layer_verdict import LAYER_SUM_BASIS, layer_time_verdicts
from sessions.analyses.verdict import Verdict, verdicts
from sessions.documents.errors import InputError
from sessions.documents.model import Session, Variant

QUANTIZED = ("fp8", "int8", "int4", "fp4")  # precisions whose variants the answer is about
_FLOORED = re.compile(r"^(\d+) quantizers had an amax below")  # the note the FP8 builders write (variant_modules)


@dataclass(frozen=True)
class Answer:
    verdict: Verdict
    basis: str | None  # None: end-to-end medians; else what the speed-up stands on (LAYER_SUM_BASIS)
    notes: tuple[str, ...]

    @property
    def headline(self) -> str:
        return self.verdict.text + (f" ({self.basis})" if self.basis else "")

    @property
    def tone(self) -> str:
        """good / bad / "" as every speed-up is coloured (within noise, not judged, or no speed verdict: a simulated
        variant timed on a CPU, no colour)."""
        return "" if self.verdict.measured is not None else tone(self.verdict.judgement)


def quantized_variants(session: Session) -> list[Variant]:
    return [v for v in session.variants if v.status == "ok" and v.precision in QUANTIZED]


def answers(session: Session, rules: Rules) -> list[Answer]:
    """One answer per quantized variant that has a verdict, in session order."""
    timed = verdicts(session, rules)
    basis = None
    if not timed:
        timed, basis = layer_time_verdicts(session, rules), LAYER_SUM_BASIS
    by_label = {v.variant: v for v in timed}
    found = []
    for variant in quantized_variants(session):
        verdict = by_label.get(captions.variant_label(variant.name, variant.simulated))
        if verdict is not None:
            found.append(Answer(verdict, basis,
                                tuple(qualifiers(session, variant, _variant(session, verdict.baseline)))))
    return found


def _variant(session: Session, name: str) -> Variant | None:
    try:
        return session.variant(name)
    except InputError:
        return None


def qualifiers(session: Session, variant: Variant, baseline: Variant | None) -> list[str]:
    """What a reader must know before trusting `variant`'s verdict, most important first."""
    notes = [_kernels(variant), *_noise(variant, baseline), *_nonfinite(variant, baseline), *_floored(variant)]
    return [n for n in notes if n]


def _kernels(variant: Variant) -> str:
    if variant.simulated:
        return f"simulated {variant.precision} (fake quantization): its time is not {variant.precision} kernel speed"
    return f"real {variant.precision} kernels ({variant.backend})"


def _noise(variant: Variant, baseline: Variant | None) -> list[str]:
    parts = []
    for v in (variant, baseline):
        stats = v.latency if v is not None else None
        cov = captions.latency_cov(stats)
        if v is None or stats is None or cov is None:
            continue
        what = "round medians" if stats.round_cov is not None else "samples"
        parts.append(f"{v.name} {cov * 100:.2f} % ({what})")
    if not parts:
        return []
    noisy = any((cov := captions.latency_cov(v.latency if v is not None else None)) is not None
                and cov > captions.COV_WARN for v in (variant, baseline))
    verdict = f"above {captions.COV_WARN * 100:g} %: rerun before trusting it" if noisy else (
        "differences inside both latency bands are not called")
    return [f"noise: CoV {', '.join(parts)}; {verdict}"]


def _nonfinite(variant: Variant, baseline: Variant | None) -> list[str]:
    q = variant.quality
    if q is None:
        return []
    notes = []
    if q.stress_inputs:
        base = baseline.quality if baseline is not None else None
        also = (f" ({baseline.name}: {base.stress_nonfinite})"
                if base is not None and base.stress_inputs and baseline else "")
        notes.append(f"NaN/Inf on {q.stress_nonfinite} of {q.stress_inputs} stress inputs{also}")
    if q.nonfinite:
        notes.append(f"NaN/Inf in {q.nonfinite} outputs on real images")
    return notes


def _floored(variant: Variant) -> list[str]:
    for note in variant.notes:
        match = _FLOORED.match(note)
        if match:
            return [f"{match.group(1)} quantizer scales raised to the 2^-14 floor (amax 448 x 2^-14)"]
    return []
