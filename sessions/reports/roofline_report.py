"""The roofline in tables (`sessions.analyses.roofline`): the Markdown section `roofline` of `export --format md`,
and every layer's figures as a table (`export --format csv|json --sections roofline`)."""

from __future__ import annotations

from typing import Any

from sessions.analyses.groups import Rules
from sessions.analyses.roofline import LATENCY_FACTOR, group_roofs, layer_roofs, peaks_of
from sessions.documents.model import Session
from sessions.reports.tables import Cell, md_text, render_markdown, table_csv, table_records
from sessions.reports.views import Column, Table

LAYER_COLUMNS = (Column("variant"), Column("layer"), Column("op"), Column("ms", "ms"),
                 Column("kernels / call", "count"), Column("GFLOP"), Column("MB"), Column("TFLOP/s"),
                 Column("% of peak", "pct"), Column("GB/s"), Column("% of bandwidth", "pct"), Column("bound"),
                 Column("peak"), Column("shapes from"))
TOP = 5  # layers shown per variant in the Markdown


def _rate(value: float | None) -> str | None:
    """A rate or size to three significant figures (they span 1e-3 to 1e3)."""
    return None if value is None else f"{value:.3g}"


def _share(share: float | None, of: str | None = None) -> str:
    """A share of a peak as a percentage to two significant figures, naming the peak where given ("0.5 % of fp16")."""
    if share is None:
        return "-"
    return f"{share * 100:.2g} %" + (f" of {of}" if of else "")


def roofline_table(session: Session) -> Table:
    """Every layer of every variant on a GPU with its work, achieved rates, shares of the peaks and bound."""
    rows: list[tuple[Any, ...]] = []
    keys: list[Any] = []
    for variant in session.variants:
        for r in layer_roofs(session, variant):
            w = r.work
            rows.append((variant.name, r.layer, r.op, r.time_ms, r.kernels, w.flops / 1e9 if w else None,
                         w.bytes / 1e6 if w else None, r.tflops, r.compute_share * 100 if r.compute_share else None,
                         r.gbps, r.memory_share * 100 if r.memory_share else None, r.bound,
                         w.precision if w else None, w.how if w else None))
            keys.append((variant.name, r.layer))
    return Table(LAYER_COLUMNS, rows, keys, [""] * len(rows), title="roofline per layer")


def roofline_csv(session: Session) -> str:
    return table_csv(roofline_table(session))


def roofline_records(session: Session) -> list[dict[str, Any]]:
    return table_records(roofline_table(session))


def roofline_section(session: Session, rules: Rules) -> str:
    """Peaks and their source; per variant the role groups' achieved rates and time by bound, and its slowest
    layers with work."""
    peaks = peaks_of(session)
    if peaks is None or session.study.device != "cuda":
        return "## Roofline\n\nNo GPU peaks: " + ("the session ran on a CPU." if session.study.device == "cpu" else
                                                 "the session records no compute capability or SM count.")
    tflops = ", ".join(f"{p} {v / 1e12:.1f}" for p, v in peaks.flops.items())
    parts = ["## Roofline",
             md_text(f"Peaks: {tflops} TFLOP/s dense; memory "
                     f"{'unknown' if peaks.bandwidth is None else f'{peaks.bandwidth / 1e9:g} GB/s'} ({peaks.source}). "
                     "Work from recorded shapes; bytes are the compulsory traffic (a lower bound); bound: the highest "
                     "of the compute, memory and launch floors, or latency where the time is over "
                     f"{LATENCY_FACTOR:g} times it (sessions/analyses/roofline.py).")]
    group_rows: list[list[Cell]] = []
    layer_rows: list[list[Cell]] = []
    for variant in session.variants:
        roofs = layer_roofs(session, variant)
        for g in group_roofs(roofs, variant.layers, rules, peaks):
            bounds = ", ".join(f"{b} {ms:.3f}" for b, ms in sorted(g.bounds.items(), key=lambda kv: -kv[1])) or "-"
            group_rows.append([variant.name, g.group, g.time_ms, g.measured_ms, _rate(g.tflops),
                               _share(g.compute_share, g.precision), _rate(g.gbps), _share(g.memory_share), bounds])
        slowest = sorted((r for r in roofs if r.work is not None and r.time_ms), key=lambda r: -(r.time_ms or 0.0))
        for r in slowest[:TOP]:
            assert r.work is not None
            layer_rows.append([variant.name, r.layer, r.time_ms, r.kernels, _rate(r.tflops),
                               _share(r.compute_share, r.work.precision), _rate(r.gbps), _share(r.memory_share),
                               r.bound or "-"])
    if not layer_rows:
        parts.append("No layer of this session records the shapes its work is computed from (the tensors of "
                     "TensorRT's files, a cuDNN graph's signature): nothing to place on the roofline.")
        return "\n\n".join(parts)
    parts += ["Per group (rates over the layers with shapes; bound: ms of the group's time):",
              render_markdown(["variant", "group", "ms", "ms with shapes", "TFLOP/s", "of peak", "GB/s",
                               "of bandwidth", "bound (ms)"], group_rows),
              f"The {TOP} slowest layers with shapes of each variant:",
              render_markdown(["variant", "layer", "ms", "kernels / call", "TFLOP/s", "of peak", "GB/s",
                               "of bandwidth", "bound"], layer_rows)]
    return "\n\n".join(parts)
