"""The group table and the flagged layers, as text and as JSON (what `groups` prints)."""

from __future__ import annotations

from dataclasses import asdict

from sessions.analyses.comparison import reference
from sessions.analyses.groups import Rules, compare_groups
from sessions.documents.model import SCHEMA_VERSION, Session
from sessions.reports import views
from sessions.reports.tables import table_markdown, table_text


def group_text(session: Session, by: str, rules: Rules, variants: list[str] | None = None,
               markdown: bool = False) -> str:
    render = table_markdown if markdown else table_text
    flagged = views.flag_table(session, variants)
    parts = [render(views.group_table(session, rules, by, variants))]
    precision = views.precision_table(session, rules, variants)
    if precision.rows:
        parts += [f"{precision.title}:", render(precision)]
    parts.append(f"flagged layers: {len(flagged.rows)}")
    if flagged.rows:
        parts.append(render(flagged))
    return "\n\n".join(parts)


def group_document(session: Session, by: str, rules: Rules, variants: list[str] | None = None) -> dict:
    baseline = reference(session)
    speedups = views.group_speedups(session, rules, by)
    return {
        "schema_version": SCHEMA_VERSION,
        "by": by,
        "baseline": baseline.name if baseline else None,
        "speedup": "baseline ms / variant ms: above 1 is faster",
        "groups": [
            {
                "group": c.group,
                "variants": {n: (asdict(r) if r else None) for n, r in c.rows.items()},
                "speedup": {n: speedups.get(c.group, {}).get(n) for n in c.rows},
                "kernel_ratio": c.kernel_ratio,
            }
            for c in compare_groups(session, by, rules, variants)
        ],
        "precision": [{"variant": name, **asdict(row)} for name, row in views.precision_rows(session, rules, variants)],
        "flags": [{**asdict(f), "in_baseline": already} for f, already in views.flags_of(session, variants)],
    }
