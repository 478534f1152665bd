"""A session diff as text, Markdown or JSON (what `diff` prints)."""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict

from sessions.analyses.diff import Change, SessionDiff
from sessions.documents.model import SCHEMA_VERSION
from sessions.reports.tables import md_text, render_markdown, render_text, terminal_text

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
        _status(c),
        c.note,
    ]


TIMES = ("latency", "summed layer time", "group time", "layer time")


def _status(c: Change) -> str:
    """REGRESSION, else the noise rule's word for a time (faster, slower, within noise, not judged)."""
    if c.regression:
        return "REGRESSION"
    if c.what in TIMES:
        return c.verdict or "not judged"
    return ""


HEADERS = ["variant", "change", "item", "A", "B", "delta", "status", ""]


HEAD_KINDS = ("latency", "summed layer time", "kernels", "group kernels", "group time", "split")
UNMATCHED = ("removed layer", "new layer", "fused layer", "split layer")


def _layer_order(c: Change) -> tuple:
    """Regressions first, then the largest changes: time and kernels by relative size, then the rest."""
    return (not c.regression, c.what in UNMATCHED, -abs(c.relative or 0))


def diff_text(diff: SessionDiff, markdown: bool = False, layer_rows: int = LAYER_ROWS) -> str:
    render = render_markdown if markdown else render_text
    prose = md_text if markdown else terminal_text
    per = "; per image" if diff.per_image else ""
    lines = [f"A: {diff.a}", f"B: {diff.b}",
             (f"threshold {diff.threshold * 100:g}%{per}; "
              f"variants compared: {', '.join(diff.matched_variants) or 'none'}")]
    if diff.only_a:
        lines.append(f"only in A: {', '.join(diff.only_a)}")
    if diff.only_b:
        lines.append(f"only in B: {', '.join(diff.only_b)}")
    lines.extend(f"warning: {warning}" for warning in diff.warnings)
    lines.extend(f"note: {note}" for note in diff.notes)
    head = [c for c in diff.changes if c.what in HEAD_KINDS]
    layer = sorted((c for c in diff.changes if c.what not in HEAD_KINDS and c.what not in UNMATCHED), key=_layer_order)
    unmatched = [c for c in diff.changes if c.what in UNMATCHED]
    parts = ["\n".join(map(prose, lines))]
    if head:
        parts.append(render(HEADERS, [_row(c) for c in head]))
    for rows, what in ((layer, "layer changes"),
                       (unmatched, ("unmatched and fused layers (time ms on the side that has the layer; "
                                    "its role, or what it fused into, last)"))):
        if not rows:
            continue
        shown = rows[:layer_rows]
        parts.append(f"{what}:" + ("\n\n" if markdown else "\n") + render(HEADERS, [_row(c) for c in shown]))
        if len(rows) > len(shown):
            counts = ", ".join(f"{n} {k}" for k, n in Counter(c.what for c in rows[len(shown):]).items())
            parts.append(prose(f"... {len(rows) - len(shown)} more ({counts})"))
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
        "warnings": diff.warnings,
        "pairs": [asdict(p) for p in diff.pairs],
        "per_image": diff.per_image,
        "batches": [diff.batch_a, diff.batch_b],
        "regressions": len(diff.regressions),
        "changes": [{**asdict(c), "relative": c.relative} for c in diff.changes],
    }
