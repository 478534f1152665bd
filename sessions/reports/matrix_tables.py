"""A merged session as README tables: every job and variant in one, then one table per axis pair.

A pair table's cell is the speed-up of the variants against their own job's baseline (fp16 where
measured; x = baseline median / variant median), as a range over the axes the table does not show.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from sessions.analyses.captions import variant_label
from sessions.analyses.comparison import batch_of, job_of
from sessions.analyses.merge import VARIANT_AXIS, axis_label
from sessions.analyses.summary import summarize_session
from sessions.documents.engines import engine_label
from sessions.documents.model import Environment, Session, Study
from sessions.reports.tables import md_cell, render_markdown


@dataclass(frozen=True)
class MatrixRow:
    axes: dict[str, str]  # the merged axes, "variant" included
    median_ms: float | None
    per_image_ms: float | None
    speedup: float | None  # against its own baseline (sessions.analyses.comparison)
    kernels_per_image: float | None
    simulated: bool
    baseline: bool  # the job's own baseline (x is 1 by definition)
    environment: str  # GPU, driver, backend version of its job


def matrix_rows(session: Session) -> list[MatrixRow]:
    rows = []
    for variant, summary in zip(session.variants, summarize_session(session), strict=False):
        job = job_of(session, variant)
        merged = session.merge.jobs[job] if session.merge is not None and job is not None else None
        study, env = (merged.study, merged.environment) if merged else (session.study, session.environment)
        batch = batch_of(session, variant) or 1
        rows.append(MatrixRow(
            axes=variant.axes or {VARIANT_AXIS: variant.name},
            median_ms=summary.median_ms,
            per_image_ms=summary.median_ms / batch if summary.median_ms is not None else None,
            speedup=summary.speedup,
            kernels_per_image=summary.per_call / batch if summary.per_call is not None else None,
            simulated=variant.simulated,
            baseline=summary.baseline == variant.name,
            environment=job_environment(env, study),
        ))
    return rows


def job_environment(env: Environment, study: Study) -> str:
    gpu = f"{env.gpu.name} (driver {env.gpu.driver})" if env.gpu else env.cpu
    return f"{gpu}; {engine_label(study, env)}"


def span(values: list[float]) -> str | None:
    if not values:
        return None
    low, high = min(values), max(values)
    return f"{low:.2f}" if f"{low:.2f}" == f"{high:.2f}" else f"{low:.2f}-{high:.2f}"


def full_table(session: Session, rows: list[MatrixRow]) -> str:
    axes = session.merge.axes if session.merge else [VARIANT_AXIS]
    headers = [*axes, "median ms", "ms / image", "x vs own baseline", "kernels / image", "environment"]
    body = [[*(variant_label(r.axes.get(a, "-"), a == VARIANT_AXIS and r.simulated) for a in axes),
             r.median_ms, r.per_image_ms, r.speedup, r.kernels_per_image, r.environment] for r in rows]
    return render_markdown(headers, body)


def pair_table(rows: list[MatrixRow], row_axis: str, column_axis: str) -> str:
    compared = [r for r in rows if not r.baseline and r.speedup is not None]
    row_values = list(dict.fromkeys(r.axes.get(row_axis, "-") for r in compared))
    column_values = list(dict.fromkeys(r.axes.get(column_axis, "-") for r in compared))
    body = []
    for rv in row_values:
        cells = [span([r.speedup for r in compared if r.axes.get(row_axis, "-") == rv
                       and r.axes.get(column_axis, "-") == cv and r.speedup is not None]) for cv in column_values]
        body.append([axis_label(row_axis, rv), *cells])
    headers = [row_axis, *(axis_label(column_axis, cv) for cv in column_values)]
    return render_markdown(headers, body)


def matrix_markdown(session: Session) -> str:
    rows = matrix_rows(session)
    axes = session.merge.axes if session.merge else [VARIANT_AXIS]
    parts = [f"## Sweep: {md_cell(session.study.model)}", full_table(session, rows),
             ("x = the job's baseline median (fp16 where measured) / the variant's median (above 1 is faster); "
              "ms and kernels per image are per batch divided by the batch size.")]
    if any(r.simulated for r in rows):
        parts.append("*simulated*: PyTorch with ModelOpt fake quantization; numerics of the FP8 recipe, "
                     "not FP8 kernel speed.")
    for row_axis, column_axis in itertools.combinations(axes, 2):
        parts += [f"### x by {md_cell(row_axis)} and {md_cell(column_axis)}", pair_table(rows, row_axis, column_axis)]
    return "\n\n".join(parts) + "\n"
