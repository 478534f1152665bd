"""The answer in one line per variant: faster or slower than the baseline, which group explains it, which splits.

e.g. "fp8-all (simulated) is 2.35x slower than fp16; quantize / dequantize adds 4.98 of the 6.58 ms;
layer1.*.conv2 split into 64 kernels in every variant". `show`, `export` and the TUI overview print it.
Baselines, speed-ups and the noise judgement come from `sessions.analyses.comparison`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sessions.analyses import captions
from sessions.analyses.comparison import Comparison, comparisons, speed_factor
from sessions.analyses.groups import Rules, compare_groups
from sessions.analyses.lowering import diagnose
from sessions.analyses.noise import WITHIN
from sessions.documents.model import Session, Variant


@dataclass(frozen=True)
class Verdict:
    variant: str
    baseline: str
    speedup: float  # baseline time / variant time per image: above 1 is faster
    judgement: str | None  # faster, slower, within noise (sessions.analyses.noise); None: no timing spread to judge by
    statistic: str | None  # what the judgement compared
    group: str | None  # the group whose kernel time moved most in the direction of the latency
    group_delta_ms: float | None
    latency_delta_ms: float
    splits: str | None

    @property
    def text(self) -> str:
        return "; ".join(part for part in (self._speed(), self._group(), self.splits) if part)

    def _speed(self) -> str:
        if self.judgement == WITHIN:
            return f"{self.variant} is within noise of {self.baseline} ({self.speedup:.2f}x; {self.statistic})"
        unjudged = "" if self.judgement is not None else " (not judged: no timing spread stored)"
        return f"{self.variant} is {speed_factor(self.speedup)} than {self.baseline}{unjudged}"

    def _group(self) -> str | None:
        if self.group is None or self.group_delta_ms is None or self.judgement == WITHIN:
            return None
        moved, latency = abs(self.group_delta_ms), abs(self.latency_delta_ms)
        verb = "adds" if self.group_delta_ms > 0 else "saves"
        if moved <= latency:
            return f"{self.group} {verb} {moved:.2f} of the {latency:.2f} ms"
        return f"{self.group} {verb} {moved:.2f} ms of kernel time (latency {self.latency_delta_ms:+.2f} ms)"


def verdicts(session: Session, rules: Rules) -> list[Verdict]:
    """One verdict per timed variant against its own baseline (sessions.analyses.comparison), in session order."""
    found = []
    for c in comparisons(session):
        if c.baseline is None or c.is_baseline or c.speedup is None:
            continue
        found.append(_verdict(session, c, rules))
    return found


def verdict_lines(session: Session, rules: Rules) -> list[str]:
    return [v.text for v in verdicts(session, rules)]


def _verdict(session: Session, c: Comparison, rules: Rules) -> Verdict:
    variant, baseline = c.variant, c.baseline
    assert baseline is not None and variant.latency is not None and baseline.latency is not None and c.speedup
    delta = variant.latency.median_ms - baseline.latency.median_ms
    group, moved = _moving_group(session, variant, baseline, rules, delta)
    return Verdict(
        variant=captions.variant_label(variant.name, variant.simulated),
        baseline=baseline.name,
        speedup=c.speedup,
        judgement=c.judgement,
        statistic=c.statistic,
        group=group,
        group_delta_ms=moved,
        latency_delta_ms=delta,
        splits=_splits(session, variant, baseline),
    )


def _moving_group(session: Session, variant: Variant, baseline: Variant, rules: Rules,
                  delta: float) -> tuple[str | None, float | None]:
    """The role group whose kernel time per call changed most in the latency's direction."""
    best: tuple[str | None, float | None] = (None, None)
    for c in compare_groups(session, "role", rules, [baseline.name, variant.name]):
        a, b = c.rows.get(baseline.name), c.rows.get(variant.name)
        moved = ((b.time_ms or 0.0) if b else 0.0) - ((a.time_ms or 0.0) if a else 0.0)
        if moved * delta > 0 and (best[1] is None or abs(moved) > abs(best[1])):
            best = (c.group, moved)
    return best


def _splits(session: Session, variant: Variant, baseline: Variant) -> str | None:
    """Per-group splits of `variant`, named by pattern (layer1.*.conv2), new or shared with the baseline."""
    flags = [f for f in diagnose(variant) if f.reason == "per-group split"]
    if not flags:
        return None
    patterns: dict[str, int] = {}
    for f in flags:
        patterns.setdefault(re.sub(r"\.\d+\.", ".*.", f.layer), round(f.kernels_per_call))
    in_baseline = {f.layer for f in diagnose(baseline) if f.reason == "per-group split"}
    every = all({f.layer for f in diagnose(v) if f.reason == "per-group split"} >= {f.layer for f in flags}
                for v in session.variants if v.status == "ok")
    where = "in every variant" if every else ("as in " + baseline.name if {f.layer for f in flags} <= in_baseline
                                              else f"new in {variant.name}")
    named = ", ".join(f"{p} split into {n} kernels" for p, n in list(patterns.items())[:2])
    more = f" (+{len(patterns) - 2} more)" if len(patterns) > 2 else ""
    return f"{named}{more} {where}"
