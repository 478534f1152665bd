"""A session diff as text, Markdown or JSON (what `diff` prints)."""

from __future__ import annotations

from dataclasses import asdict

from sessions.diff import Change, SessionDiff, kind_counts
from sessions.model import SCHEMA_VERSION
from sessions.tables import render_markdown, render_text

LAYER_ROWS = 40  # per-layer changes beyond this are summarised, not listed


def _row(c: Change) -> list:
    rel = c.relative
    return [
        c.variant,
        c.what,
        c.item[:80],
        c.a,
        c.b,
        f"{rel * 100:+.1f}%" if rel is not None else None,
        "REGRESSION" if c.regression else "",
        c.note,
    ]


HEADERS = ["variant", "change", "item", "A", "B", "delta", "status", ""]


def diff_text(diff: SessionDiff, markdown: bool = False) -> str:
    render = render_markdown if markdown else render_text
    lines = [f"A: {diff.a}", f"B: {diff.b}", f"threshold {diff.threshold * 100:g}%; variants compared: {', '.join(diff.matched_variants) or 'none'}"]
    if diff.only_a:
        lines.append(f"only in A: {', '.join(diff.only_a)}")
    if diff.only_b:
        lines.append(f"only in B: {', '.join(diff.only_b)}")
    lines.extend(f"note: {note}" for note in diff.notes)
    head = [c for c in diff.changes if c.what in ("latency", "kernels", "group kernels", "split")]
    layer = sorted(
        (c for c in diff.changes if c.what not in ("latency", "kernels", "group kernels", "split")),
        key=lambda c: (not c.regression, -abs(c.relative or 0)),
    )
    parts = ["\n".join(lines)]
    if head:
        parts.append(render(HEADERS, [_row(c) for c in head]))
    if layer:
        shown = layer[:LAYER_ROWS]
        parts.append(render(HEADERS, [_row(c) for c in shown]))
        if len(layer) > len(shown):
            counts = ", ".join(f"{n} {k}" for k, n in kind_counts(diff).items())
            parts.append(f"... {len(layer) - len(shown)} more layer changes ({counts})")
    verdict = f"{len(diff.regressions)} regression(s)" if diff.regressions else "no regression"
    parts.append(verdict)
    return "\n\n".join(parts)


def diff_document(diff: SessionDiff) -> dict:
    return {
        "schema_version": SCHEMA_VERSION,
        "a": diff.a,
        "b": diff.b,
        "threshold": diff.threshold,
        "matched_variants": diff.matched_variants,
        "only_a": diff.only_a,
        "only_b": diff.only_b,
        "notes": diff.notes,
        "regressions": len(diff.regressions),
        "changes": [{**asdict(c), "relative": c.relative} for c in diff.changes],
    }
