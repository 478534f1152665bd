"""The answer in one line per variant: faster or slower than the baseline, which group explains it, which splits.

e.g. "fp8-all (simulated) is 2.35x slower than fp16; quantize / dequantize adds 4.98 of the 6.58 ms;
layer1.*.conv2 split into 64 kernels in every variant". `show`, `export` and the TUI overview print it.
Baselines, speed-ups and the noise judgement come from `sessions.analyses.comparison`.

A real FP8 variant on a GPU whose peaks are known also says how much of its layer time FP8 cannot speed up
(`sessions.analyses.roofline.fp8_floor`): launch-bound products and layers that compute no product, and apart from
them the products far below every roof (latency bound).

The group is named only where the groups can hold the time on both sides: more than half (`GROUPED_MAJORITY`) of
each variant's kernel time per call lies in layers of one group (`time_held`). Time no layer owns
(torch.compile's kernels, which belong to the whole graph) and time of a region fused across layers (a layer that
covers several of the model's, `attrs[COVERS]`: one role for the work of several groups) lies in none, so a group
that seems to vanish there says nothing of the speed-up. Otherwise the verdict gives the speed-up and says why it
names no group (`Verdict.no_group`).

A verdict whose variant or baseline was timed on subnormal values says so last, naming the cause
(`sessions.analyses.subnormals`).

A simulated variant timed on a CPU gets no speed words: its time is fake quantization's on a CPU, which says
nothing of FP8 kernels. Its line says so first (`CPU_NO_SPEED`) and then what the run did measure: the recipe,
the numerics and the structure. Its `Verdict` still carries the speed-up and judgement for a caller that asks.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sessions.analyses import captions
from sessions.analyses.captions import SIMULATES
from sessions.analyses.comparison import Comparison, comparisons, speed_factor
from sessions.analyses.groups import Rules, compare_groups
from sessions.analyses.lowering import diagnose
from sessions.analyses.noise import WITHIN, paces_apart
from sessions.analyses.roofline import LATENCY_FACTOR, fp8_floor
from sessions.analyses.subnormals import subnormal_line
from sessions.documents.model import Session, Variant
from sessions.documents.vocab import COVERS


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
    measured: str | None = None  # set for a simulated variant timed on a CPU: what the run measured, in place of speed
    floor: str | None = None  # a real FP8 variant's time FP8 cannot speed up (roofline.fp8_floor), in words
    subnormal: str | None = None  # either side timed on subnormal values (sessions.analyses.subnormals), in words
    no_group: str | None = None  # why no group explains it (`ungrouped_words`), in words

    @property
    def text(self) -> str:
        if self.measured is not None:
            return self.measured
        return "; ".join(part for part in (self._speed(), self._group(), self.splits, self.floor, self.subnormal)
                         if part)

    def _speed(self) -> str:
        if self.judgement == WITHIN:
            return f"{self.variant} is within noise of {self.baseline} ({self.speedup:.2f}x; {self.statistic})"
        unjudged = "" if self.judgement is not None else " (not judged: no timing spread stored)"
        return f"{self.variant} is {speed_factor(self.speedup)} than {self.baseline}{unjudged}"

    def _group(self) -> str | None:
        if self.judgement == WITHIN:
            return None
        if self.group is None or self.group_delta_ms is None:
            return self.no_group
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
    """The verdicts' lines; those of simulated variants timed on a CPU first, so the first line says what a CPU
    run can answer."""
    found = verdicts(session, rules)
    return [v.text for v in found if v.measured is not None] + [v.text for v in found if v.measured is None]


def _verdict(session: Session, c: Comparison, rules: Rules) -> Verdict:
    variant, baseline = c.variant, c.baseline
    assert baseline is not None and variant.latency is not None and baseline.latency is not None and c.speedup
    delta = variant.latency.median_ms - baseline.latency.median_ms
    no_group = ungrouped_words(baseline, variant)
    group, moved = (None, None) if no_group else _moving_group(session, variant, baseline, rules, delta)
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
        measured=cpu_measured(variant, baseline) if variant.simulated and variant.device == "cpu" else None,
        floor=floor_words(session, variant),
        subnormal="; ".join(line for v in (baseline, variant) if (line := subnormal_line(session, v))) or None,
        no_group=no_group,
    )


GROUPED_MAJORITY = 0.5  # a verdict names a group where more than this share of each side's time lies in groups


@dataclass(frozen=True)
class TimeHeld:
    """Where a variant's kernel time per call lies, as shares of it: outside every layer, in regions fused across
    layers (`attrs[COVERS]`), and the rest, in layers of one group (`grouped`)."""

    outside: float
    regions: float

    @property
    def grouped(self) -> float:
        return 1.0 - self.outside - self.regions


def time_held(variant: Variant) -> TimeHeld | None:
    """Where `variant`'s kernel time lies (`TimeHeld`): read from the kernel table where the variant has one, else
    from its layer times (all in layers); None where neither holds any time."""
    regions = {i for i, layer in enumerate(variant.layers) if COVERS in layer.attrs}
    table = variant.kernels
    if table is not None and variant.trace is not None and len(table):
        owned = list(zip(table.duration_ns, table.layer, strict=True))
        total = sum(table.duration_ns)
        outside = sum(ns for ns, owner in owned if owner < 0)
        fused = sum(ns for ns, owner in owned if owner in regions)
    else:
        times = [(i, layer.time_ms) for i, layer in enumerate(variant.layers) if layer.time_ms]
        total, outside = sum(ms for _, ms in times), 0.0
        fused = sum(ms for i, ms in times if i in regions)
    return TimeHeld(outside / total, fused / total) if total > 0 else None


def ungrouped_words(baseline: Variant, variant: Variant) -> str | None:
    """Why a verdict of `variant` against `baseline` names no group: each side whose share of kernel time in layers of
    one group (`time_held`) is at or under `GROUPED_MAJORITY`, or unknown, with where the rest lies; None where both
    are over it and a group may explain the speed-up. Where the two traces ran at different paces
    (`sessions.analyses.noise.paces_apart`), that is why."""
    apart = paces_apart(baseline, variant)
    if apart is not None:  # group times that differ by what the load did between the traces explain nothing
        return (f"no group named: the traces ran at different paces ({variant.name}'s layers' summed times per call "
                f"{apart[1]:.2f}x its timed median, {baseline.name}'s {apart[0]:.2f}x)")
    parts = []
    for side in (baseline, variant):
        held = time_held(side)
        if held is None:
            parts.append(f"{side.name} records no kernel or layer time")
        elif held.grouped <= GROUPED_MAJORITY:
            rest = [f"{share * 100:.0f} % {where}" for share, where in
                    ((held.outside, "outside every layer"), (held.regions, "in regions fused across layers")) if share]
            parts.append(f"{held.grouped * 100:.0f} % of {side.name}'s kernel time lies in layers of one group "
                         f"({', '.join(rest)})")
    return f"no group named: {' and '.join(parts)}" if parts else None


def floor_words(session: Session, variant: Variant) -> str | None:
    """How much of a real FP8 variant's layer time FP8 cannot speed up, and how much runs far below every roof; None
    where `roofline.fp8_floor` has no answer (not real FP8, no GPU peaks)."""
    floor = fp8_floor(session, variant)
    if floor is None:
        return None
    share = floor.cannot_ms / floor.total_ms * 100
    parts = [(f"{floor.cannot_ms:.2f} of its {floor.total_ms:.2f} ms of layer time ({share:.0f} %) is in layers FP8 "
              f"cannot speed up ({floor.launch_ms:.2f} ms launch-bound products, {floor.no_product_ms:.2f} ms in "
              "layers without a convolution or matrix product)")]
    if floor.latency_ms:
        parts.append(f"{floor.latency_ms:.2f} ms in products running at under 1/{LATENCY_FACTOR:g} of their nearest "
                     "roof (latency bound: their kernels limit them, not FP8)")
    if floor.unknown_ms:
        parts.append(f"{floor.unknown_ms:.2f} ms in products without recorded shapes")
    return "; ".join(parts)


CPU_NO_SPEED = "FP8 speed needs an FP8 GPU (compute capability 8.9 or later) or TensorRT files"


def cpu_measured(variant: Variant, baseline: Variant) -> str:
    """What a simulated variant timed on a CPU measured: `CPU_NO_SPEED`, then its recipe (layers quantized), its
    numerics (agreement, KL, NaN/Inf on stress inputs, each warning of a degenerate reference:
    `captions.reference_caveats`) and its structure (layers simulating the format, records per traced call against the
    baseline's); a part the session lacks is left out. No speed words."""
    label = captions.variant_label(variant.name, variant.simulated)
    parts = []
    if variant.recipe is not None:
        r = variant.recipe
        parts.append(f"the recipe ({r.number_format} on {len(r.quantized)} of {r.layer_count} layers"
                     f"{captions.unquantized_words(r)})")
    q = variant.quality
    if q is not None:
        stress = f", NaN/Inf on {q.stress_nonfinite} of {q.stress_inputs} stress inputs" if q.stress_inputs else ""
        caveats = "".join(f"; {line}" for line in captions.reference_caveats([q]))
        parts.append(f"the numerics (top-1 agreement {q.top1_agreement * 100:.1f} % with {q.reference} on {q.images} "
                     f"images, mean KL {q.mean_kl:.2g}{stress}{caveats})")
    structure = []
    simulating = sum(1 for layer in variant.layers if layer.attrs.get(SIMULATES))
    if simulating:
        structure.append(f"{simulating} layers simulate {variant.precision}")
    if variant.trace is not None and baseline.trace is not None:
        unit = variant.trace.unit
        structure.append(f"{variant.trace.per_call:.0f} {unit}s per call, "
                         f"{baseline.name} {baseline.trace.per_call:.0f}")
    if structure:
        parts.append(f"the structure ({'; '.join(structure)})")
    measured = ", ".join(parts[:-1]) + f" and {parts[-1]}" if len(parts) > 1 else "".join(parts)
    tail = f"; this CPU run measured {measured}" if measured else "; this CPU run measured no FP8 figure"
    return f"{label} ran on a CPU: {CPU_NO_SPEED}{tail}"


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
