"""Compare two sessions: latency, kernels per call (total, per group, per layer), layers, precisions.

A change counts as a regression only past `threshold` and past the sessions' own spread: twice the
larger coefficient of variation for latency, so that noise a rerun would show is never flagged.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from sessions.groups import Rules, compare_groups, kernels_per_layer, role_of
from sessions.lowering import diagnose
from sessions.model import Layer, Session, Variant


@dataclass
class Change:
    variant: str
    what: str  # latency | kernels | group kernels | layer kernels | precision | new layer | removed layer | split
    item: str  # the variant, group or layer concerned
    a: float | str | None
    b: float | str | None
    regression: bool
    note: str = ""

    @property
    def relative(self) -> float | None:
        if isinstance(self.a, (int, float)) and isinstance(self.b, (int, float)) and self.a:
            return (self.b - self.a) / self.a
        return None


@dataclass
class SessionDiff:
    a: str
    b: str
    threshold: float
    matched_variants: list[str]
    only_a: list[str]
    only_b: list[str]
    changes: list[Change] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def regressions(self) -> list[Change]:
        return [c for c in self.changes if c.regression]


def _signature(layer: Layer) -> tuple:
    """What identifies a layer whose name changed: its kind, shape parameters and tensor sizes."""
    dims = tuple(tuple(t.shape or ()) for t in layer.inputs + layer.outputs)
    return (layer.kind, layer.groups, tuple(layer.kernel_shape or ()), layer.out_channels, dims)


def align_layers(a: list[Layer], b: list[Layer]) -> tuple[list[tuple[int, int]], list[int], list[int]]:
    """Pairs of (index in a, index in b): by name, then by ONNX nodes, then by signature in order."""
    pairs: list[tuple[int, int]] = []
    free_b = set(range(len(b)))
    unmatched_a = list(range(len(a)))
    keys = (lambda layer: layer.name, lambda layer: tuple(layer.onnx_nodes) or None, _signature)
    for key in keys:
        index: dict = {}
        for j in sorted(free_b):
            k = key(b[j])
            if k:
                index.setdefault(k, []).append(j)
        still = []
        for i in unmatched_a:
            k = key(a[i])
            queue = index.get(k) if k else None
            if queue:
                j = queue.pop(0)
                pairs.append((i, j))
                free_b.discard(j)
            else:
                still.append(i)
        unmatched_a = still
    return sorted(pairs), unmatched_a, sorted(free_b)


def _latency_change(name: str, va: Variant, vb: Variant, threshold: float) -> Change | None:
    if not (va.latency and vb.latency):
        return None
    a, b = va.latency.median_ms, vb.latency.median_ms
    noise = 2 * max(va.latency.cov, vb.latency.cov)
    rel = (b - a) / a if a else 0.0
    limit = max(threshold, noise)
    note = f"noise band ±{noise * 100:.1f}%"
    return Change(name, "latency", name, a, b, rel > limit, note)


def _count_change(name: str, what: str, item: str, a: float | None, b: float | None, threshold: float) -> Change | None:
    if a is None or b is None or abs(b - a) < 0.5:
        return None
    regression = b > a * (1 + threshold) and b - a >= 1
    return Change(name, what, item, a, b, regression)


def diff_sessions(a: Session, b: Session, rules: Rules, threshold: float = 0.05, a_name: str = "A", b_name: str = "B") -> SessionDiff:
    names_a = [v.name for v in a.variants if v.status == "ok"]
    names_b = [v.name for v in b.variants if v.status == "ok"]
    matched = [n for n in names_a if n in names_b]
    result = SessionDiff(
        a_name, b_name, threshold, matched, [n for n in names_a if n not in names_b], [n for n in names_b if n not in names_a]
    )
    if a.study.batch != b.study.batch:
        result.notes.append(f"batch {a.study.batch} against {b.study.batch}: latency is per batch of that size")
    if a.study.model != b.study.model:
        result.notes.append(f"different models: {a.study.model} against {b.study.model}")
    groups_a = {c.group: c for c in compare_groups(a, "role", rules, matched)}
    groups_b = {c.group: c for c in compare_groups(b, "role", rules, matched)}
    for name in matched:
        va, vb = a.variant(name), b.variant(name)
        changes = [_latency_change(name, va, vb, threshold)]
        changes.append(
            _count_change(name, "kernels", name, va.trace.per_call if va.trace else None, vb.trace.per_call if vb.trace else None, threshold)
        )
        for group in dict.fromkeys([*groups_a, *groups_b]):
            ra = groups_a.get(group).rows.get(name) if group in groups_a else None
            rb = groups_b.get(group).rows.get(name) if group in groups_b else None
            ka = ra.kernels_per_call if ra else (0.0 if va.kernels is not None else None)
            kb = rb.kernels_per_call if rb else (0.0 if vb.kernels is not None else None)
            changes.append(_count_change(name, "group kernels", group, ka, kb, threshold))
        changes.extend(_layer_changes(name, va, vb, rules, threshold))
        result.changes.extend(c for c in changes if c is not None)
    return result


def _layer_changes(name: str, va: Variant, vb: Variant, rules: Rules, threshold: float) -> list[Change]:
    changes: list[Change] = []
    pairs, only_a, only_b = align_layers(va.layers, vb.layers)
    ka, kb = kernels_per_layer(va), kernels_per_layer(vb)
    for i, j in pairs:
        la, lb = va.layers[i], vb.layers[j]
        if la.precision != lb.precision and la.precision and lb.precision:
            changes.append(Change(name, "precision", lb.name, la.precision, lb.precision, False))
        if ka is not None and kb is not None:
            change = _count_change(name, "layer kernels", lb.name, ka[i], kb[j], threshold)
            if change is not None:
                changes.append(change)
    for i in only_a:
        changes.append(Change(name, "removed layer", va.layers[i].name, role_of(va.layers[i], rules), None, False))
    for j in only_b:
        changes.append(Change(name, "new layer", vb.layers[j].name, None, role_of(vb.layers[j], rules), False))
    splits_a = {f.layer for f in diagnose(va)}
    for flag in diagnose(vb):
        if flag.reason == "per-group split" and flag.layer not in splits_a:
            changes.append(
                Change(name, "split", flag.layer, None, flag.kernels_per_call, True, f"kernels per call reached {flag.groups} groups")
            )
    return changes


def kind_counts(diff: SessionDiff) -> Counter:
    return Counter(c.what for c in diff.changes)
