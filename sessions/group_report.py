"""The group table and the flagged layers, as text and as JSON (what `groups` prints)."""

from __future__ import annotations

from dataclasses import asdict

from sessions.groups import Rules, compare_groups
from sessions.lowering import diagnose
from sessions.model import SCHEMA_VERSION, Session
from sessions.tables import render_markdown, render_text


def flags(session: Session, variants: list[str] | None = None):
    baseline = session.baseline()
    found = []
    for variant in session.variants:
        if variant.status == "ok" and (variants is None or variant.name in variants):
            found.extend(diagnose(variant, baseline))
    return found


def group_table(session: Session, by: str, rules: Rules, variants: list[str] | None = None):
    """(headers, rows): per group, per variant layers, kernels per call (traced variants), ms per call, share,
    and the time ratio against the baseline (where there is more than one variant)."""
    comparisons = compare_groups(session, by, rules, variants)
    names = list(comparisons[0].rows) if comparisons else []
    traced = {name: session.variant(name).kernels is not None for name in names}
    baseline = session.baseline()
    ratio_label = f"x vs {baseline.name}" if baseline else "x"
    headers = [by]
    for name in names:
        headers += [f"{name} layers"] + ([f"{name} k/call"] if traced[name] else []) + [f"{name} ms", f"{name} %"]
        headers += [f"{name} {ratio_label}"] if len(names) > 1 else []
    rows = []
    for c in comparisons:
        row: list = [c.group]
        for name in names:
            r = c.rows[name]
            row.append(r.layers if r and (by != "kernel" or not traced[name]) else None)  # kernel classes own kernels, not layers
            row += [r.kernels_per_call if r else None] if traced[name] else []
            row += [r.time_ms if r else None, r.share * 100 if r and r.share is not None else None]
            row += [c.time_ratio[name]] if len(names) > 1 else []
        rows.append(row)
    return headers, rows


def flag_rows(session: Session, variants: list[str] | None = None):
    headers = ["variant", "layer", "reason", "k/call", "groups", "baseline k/call", "top kernel"]
    rows = [
        [f.variant, f.layer, f.reason, f.kernels_per_call, f.groups, f.baseline_kernels_per_call,
         f"{f.evidence[0][1]}x {f.evidence[0][0][:70]}" if f.evidence else None]
        for f in flags(session, variants)
    ]
    return headers, rows


def group_text(session: Session, by: str, rules: Rules, variants: list[str] | None = None, markdown: bool = False) -> str:
    render = render_markdown if markdown else render_text
    headers, rows = group_table(session, by, rules, variants)
    parts = [render(headers, rows)]
    if session.variants and all(v.kernels is None for v in session.variants):
        parts.append("(no kernel table: these files hold layers and times, not kernel launches)")
    f_headers, f_rows = flag_rows(session, variants)
    parts.append(f"flagged layers: {len(f_rows)}")
    if f_rows:
        parts.append(render(f_headers, f_rows))
    return "\n\n".join(parts)


def group_document(session: Session, by: str, rules: Rules, variants: list[str] | None = None) -> dict:
    return {
        "schema_version": SCHEMA_VERSION,
        "by": by,
        "baseline": session.baseline().name if session.baseline() else None,
        "groups": [
            {
                "group": c.group,
                "variants": {n: (asdict(r) if r else None) for n, r in c.rows.items()},
                "time_ratio": c.time_ratio,
                "kernel_ratio": c.kernel_ratio,
            }
            for c in compare_groups(session, by, rules, variants)
        ],
        "flags": [asdict(f) for f in flags(session, variants)],
    }
