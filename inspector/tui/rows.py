"""What each TUI table shows, as plain rows: no Textual here, so it is tested and timed directly."""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass

from sessions.diff import SessionDiff
from sessions.group_report import flags
from sessions.groups import Rules, compare_groups, kernels_per_layer, role_of
from sessions.lowering import diagnose
from sessions.model import Session, Variant
from sessions.summary import summarize_session


@dataclass
class TableData:
    columns: list[tuple[str, bool]]  # (label, numeric)
    rows: list[tuple]
    keys: list
    styles: list[str]


def overview(session: Session) -> TableData:
    """One column per variant, one row per figure."""
    return overview_of(summarize_session(session))


def overview_of(summaries: list) -> TableData:
    metrics = [
        ("median ms", lambda s: s.median_ms),
        ("p99 ms", lambda s: s.p99_ms),
        ("CoV %", lambda s: s.cov * 100 if s.cov is not None else None),
        ("x vs baseline", lambda s: s.speedup),
        ("kernels / call", lambda s: s.per_call),
        ("outside layers", lambda s: s.unattributed),
        ("top-1 agreement %", lambda s: s.top1_agreement * 100 if s.top1_agreement is not None else None),
        ("mean KL", lambda s: s.mean_kl),
        ("max abs logit error", lambda s: s.max_abs_logit_error),
        ("NaN / Inf", lambda s: s.nonfinite),
        ("size MiB", lambda s: s.artifact_mib),
        ("build s", lambda s: s.build_s),
        ("backend", lambda s: s.backend + (" (simulated)" if s.simulated else "")),
        ("status", lambda s: s.status if not s.error else f"failed: {s.error}"),
    ]
    columns = [("figure", False)] + [(s.name, True) for s in summaries]
    rows = [tuple([label] + [get(s) for s in summaries]) for label, get in metrics]
    return TableData(columns, rows, [label for label, _ in metrics], [""] * len(rows))


def latency_bars(session: Session, width: int = 40) -> list[str]:
    """A bar per variant: median latency, scaled to the slowest."""
    timed = [(v.name, v.latency.median_ms) for v in session.variants if v.latency]
    if not timed:
        return ["no latency measured"]
    longest = max(ms for _, ms in timed) or 1.0
    label = max(len(name) for name, _ in timed)
    return [f"{name.ljust(label)} {'█' * max(1, round(ms / longest * width))} {ms:.3f} ms" for name, ms in timed]


def groups(session: Session, rules: Rules, by: str = "role") -> TableData:
    comparisons = compare_groups(session, by, rules)
    names = list(comparisons[0].rows) if comparisons else []
    columns = [(by, False)]
    for name in names:
        columns += [(f"{name} k/call", True), (f"{name} ms", True), (f"{name} %", True), (f"{name} x", True)]
    rows, keys = [], []
    for c in comparisons:
        row: list = [c.group]
        for name in names:
            r = c.rows[name]
            row += [r.kernels_per_call if r else None, r.time_ms if r else None,
                    r.share * 100 if r and r.share is not None else None, c.time_ratio[name]]
        rows.append(tuple(row))
        keys.append(c.group)
    return TableData(columns, rows, keys, [""] * len(rows))


def layers(variant: Variant, rules: Rules, group: str | None, by: str = "role") -> TableData:
    from sessions.groups import stage_of

    per_layer = kernels_per_layer(variant)
    flagged = {f.layer: f.reason for f in diagnose(variant)}
    key_of = (lambda layer: role_of(layer, rules)) if by == "role" else (lambda layer: stage_of(layer, rules))
    rows, keys, styles = [], [], []
    for i, layer in enumerate(variant.layers):
        if group is not None and key_of(layer) != group:
            continue
        rows.append((layer.name, layer.kind, layer.groups, per_layer[i] if per_layer else None, layer.time_ms,
                     layer.precision, flagged.get(layer.name, "")))
        keys.append(i)
        styles.append("bold red" if layer.name in flagged else "")
    columns = [("layer", False), ("kind", False), ("groups", True), ("k/call", True), ("ms", True), ("precision", False), ("flag", False)]
    return TableData(columns, rows, keys, styles)


def kernels_of_layer(variant: Variant, layer_index: int | None) -> TableData:
    """Kernels aggregated by name: count per call, total and mean duration, launch shape."""
    table = variant.kernels
    columns = [("kernel", False), ("count/call", True), ("total us", True), ("mean us", True), ("grid", False), ("block", False)]
    if table is None:
        return TableData(columns, [], [], [])
    calls = max(variant.trace.calls if variant.trace else 1, 1)
    count: Counter[int] = Counter()
    total: defaultdict[int, int] = defaultdict(int)
    shape: dict[int, tuple] = {}
    for i, (name, layer, duration) in enumerate(zip(table.name, table.layer, table.duration_ns)):
        if layer_index is not None and layer != layer_index:
            continue
        count[name] += 1
        total[name] += duration
        shape.setdefault(name, (table.grid[i], table.block[i]))
    rows = [
        (table.names[n], c / calls, total[n] / 1e3 / calls, total[n] / 1e3 / c, "x".join(map(str, shape[n][0])), "x".join(map(str, shape[n][1])))
        for n, c in count.most_common()
    ]
    return TableData(columns, rows, [r[0] for r in rows], [""] * len(rows))


def all_kernels(variant: Variant) -> TableData:
    """Every kernel record in launch order: the large table."""
    table = variant.kernels
    columns = [("#", True), ("call", True), ("layer", False), ("kernel", False), ("us", True), ("stream", True), ("grid", False), ("block", False)]
    if table is None:
        return TableData(columns, [], [], [])
    names = [layer.name for layer in variant.layers]
    rows = [
        (i, table.call[i], names[table.layer[i]] if table.layer[i] >= 0 else "(outside layers)", table.names[table.name[i]],
         table.duration_ns[i] / 1e3, table.stream[i], "x".join(map(str, table.grid[i])), "x".join(map(str, table.block[i])))
        for i in range(len(table))
    ]
    return TableData(columns, rows, list(range(len(rows))), [""] * len(rows))


def flagged(session: Session) -> TableData:
    found = flags(session)
    columns = [("variant", False), ("layer", False), ("reason", False), ("k/call", True), ("groups", True), ("baseline k/call", True), ("top kernel", False)]
    rows = [(f.variant, f.layer, f.reason, f.kernels_per_call, f.groups, f.baseline_kernels_per_call,
             f"{f.evidence[0][1]}x {f.evidence[0][0]}" if f.evidence else None) for f in found]
    return TableData(columns, rows, [(f.variant, f.layer) for f in found], ["bold red"] * len(rows))


def diff_rows(diff: SessionDiff) -> TableData:
    columns = [("variant", False), ("change", False), ("item", False), ("A", True), ("B", True), ("delta %", True), ("status", False)]
    ordered = sorted(diff.changes, key=lambda c: (not c.regression, -abs(c.relative or 0)))
    rows, styles = [], []
    for c in ordered:
        rel = c.relative
        rows.append((c.variant, c.what, c.item, c.a, c.b, rel * 100 if rel is not None else None, "REGRESSION" if c.regression else ""))
        if c.regression:
            styles.append("bold red")
        elif rel is not None and rel < -diff.threshold:
            styles.append("green")
        elif rel is not None and abs(rel) <= diff.threshold:
            styles.append("dim")
        else:
            styles.append("")
    return TableData(columns, rows, list(range(len(rows))), styles)
