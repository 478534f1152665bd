"""Export a session for a README: Markdown sections, or the variant table as CSV / JSON.

The Markdown states the method (what the timed region holds) and the exact command that reruns the
study, so a reader can check and repeat the numbers.
"""

from __future__ import annotations

import csv
import io
import shlex

from sessions.group_report import group_table
from sessions.groups import Rules
from sessions.model import Session
from sessions.summary import summarize_session, summary_document, unstable_variants
from sessions.tables import render_markdown

SECTIONS = ("comparison", "quality", "groups", "method", "environment", "recipe", "rerun")


def _backend_label(session: Session, backend: str) -> str:
    versions = session.environment.versions
    if backend == "tensorrt":
        return f"TensorRT {versions.get('tensorrt') or '?'}"
    if backend == "torch":
        return f"PyTorch {versions.get('torch') or '?'}"
    return "trtexec files"


def comparison_section(session: Session) -> str:
    gpu = session.environment.gpu.name if session.environment.gpu else (session.environment.cpu or "unknown")
    baseline = session.baseline()
    plan = session.study.plan
    level = plan.opt_level if plan is not None and plan.backend == "tensorrt" else None
    headers = ["variant", "GPU", "backend", "level", "batch", "median ms", "p99 ms", "CoV %",
               f"x vs {baseline.name}" if baseline else "x", "kernels / call", "size MiB", "build s"]
    rows = []
    for s in summarize_session(session):
        rows.append([
            f"{s.name} (simulated)" if s.simulated else s.name,
            gpu,
            _backend_label(session, s.backend),
            level,
            session.study.batch,
            s.median_ms,
            s.p99_ms,
            s.cov * 100 if s.cov is not None else None,
            s.speedup,
            s.per_call,
            s.artifact_mib,
            s.build_s,
        ])
    text = render_markdown(headers, rows)
    notes = []
    if any(s.simulated for s in summarize_session(session)):
        notes.append("*simulated*: PyTorch with ModelOpt fake quantization; numerics of the FP8 recipe, not FP8 kernel speed.")
    if baseline is not None:
        notes.append(f"x = {baseline.name} median latency / variant median latency; above 1 is faster.")
    unstable = unstable_variants(session)
    if unstable:
        notes.append(f"CoV above 2.5 % for {', '.join(unstable)} (trtexec warns there too): small differences are noise.")
    failed = [v for v in session.variants if v.status != "ok"]
    notes.extend(f"{v.name} failed: {v.error}" for v in failed)
    return "\n\n".join(["## Comparison", text, *notes])


def quality_section(session: Session) -> str:
    headers = ["variant", "reference", "images", "top-1 agreement %", "mean KL", "max abs logit error", "NaN/Inf"]
    rows = [
        [v.name, v.quality.reference, v.quality.images, v.quality.top1_agreement * 100, v.quality.mean_kl,
         v.quality.max_abs_logit_error, v.quality.nonfinite]
        for v in session.variants if v.quality
    ]
    if not rows:
        return "## Quality\n\nNot measured in this session."
    weights = f"Weights: {session.study.weights}; images: {next(v.quality.image_source for v in session.variants if v.quality)}."
    return "\n\n".join(["## Quality", render_markdown(headers, rows), weights])


def groups_section(session: Session, rules: Rules) -> str:
    headers, rows = group_table(session, "role", rules)
    keep = [0] + [i for i, h in enumerate(headers) if h.endswith(("k/call", " ms"))]
    table = render_markdown([headers[i] for i in keep], [[row[i] for i in keep] for row in rows])
    return "\n\n".join(["## Kernels per call by group", table])


def method_section(session: Session) -> str:
    m = session.method
    lines = [
        "## Method",
        f"- **Timed region:** {m.timed_region}.",
        f"- **Numbers:** timer {m.timer}; CUDA graph {'on' if m.cuda_graph else 'off'}; warm-up {m.warmup_s:g} s; "
        f"{m.rounds} rounds x {m.iters} iterations{' interleaved across variants' if m.interleaved else ''}; "
        f"transfers {'included' if m.transfers_included else 'excluded'}; {'static' if m.static_inputs else 'changing'} inputs.",
        f"- **Per-layer time:** {m.per_layer}.",
        f"- **Kernels:** {m.kernels}.",
        f"- **Batch / input:** {session.study.batch} x {session.study.input_shape}.",
    ]
    return "\n".join(lines)


def environment_section(session: Session) -> str:
    env = session.environment
    rows = [["host", env.host], ["OS", env.os], ["CPU", f"{env.cpu} ({env.cpu_count} cores)"], ["Python", env.python]]
    if env.gpu:
        g = env.gpu
        rows += [
            ["GPU", f"{g.name} (CC {g.compute_capability}, {g.multiprocessors} SMs, {g.memory_mib} MiB)"],
            ["driver / CUDA", f"{g.driver} / {g.cuda_driver}"],
            ["clocks at start", f"SM {g.sm_clock_mhz} MHz (max {g.max_sm_clock_mhz}), memory {g.mem_clock_mhz} MHz, {g.pstate}"],
            ["clock-event reasons", ", ".join(g.clock_event_reasons) or "none"],
        ]
    rows += [[name, version] for name, version in env.versions.items() if version]
    return "\n\n".join(["## Environment", render_markdown(["item", "value"], rows)])


def recipe_section(session: Session) -> str:
    recipes = [(v.name, v.recipe) for v in session.variants if v.recipe]
    if not recipes:
        return "## Recipe\n\nNo quantized variant in this session."
    headers = ["variant", "method", "format", "layout", "quantized", "excluded", "exclude patterns", "scales", "calibration"]
    rows = [
        [name, r.method, r.number_format, r.layout, len(r.quantized), len(r.excluded), ", ".join(r.exclude_patterns) or "-",
         r.scales, f"{r.calibration_count} images from {r.calibration_source}"]
        for name, r in recipes
    ]
    return "\n\n".join(["## Recipe", render_markdown(headers, rows)])


def rerun_section(session: Session, path: str | None) -> str:
    command = shlex.join(session.study.command)
    lines = ["## Rerun", "```bash", command]
    if path:
        lines.append(f"trt-inspect rerun {shlex.quote(path)}  # the same plan, then the diff against this session")
    lines.append("```")
    return "\n".join(lines)


def export_markdown(session: Session, rules: Rules, sections: list[str] | None = None, path: str | None = None) -> str:
    sections = sections or list(SECTIONS)
    title = f"# {session.study.model}: {', '.join(v.name for v in session.variants)} ({session.study.created})"
    builders = {
        "comparison": lambda: comparison_section(session),
        "quality": lambda: quality_section(session),
        "groups": lambda: groups_section(session, rules),
        "method": lambda: method_section(session),
        "environment": lambda: environment_section(session),
        "recipe": lambda: recipe_section(session),
        "rerun": lambda: rerun_section(session, path),
    }
    return "\n\n".join([title, *(builders[s]() for s in sections)]) + "\n"


def export_csv(session: Session) -> str:
    out = io.StringIO()
    rows = summarize_session(session)
    writer = csv.writer(out)
    fields = list(rows[0].__dataclass_fields__) if rows else []
    writer.writerow(fields)
    for row in rows:
        writer.writerow([getattr(row, f) for f in fields])
    return out.getvalue()


def export_json(session: Session, path: str | None) -> dict:
    return summary_document(session, path)
