"""The FP8 study section of a README, from one or more sessions (`export SESSION... --format study`).

The shape is the one the hand-written studies used: summary and decision, recipe, method, results,
quality, kernels per call by group, layers of the FP8 engine that did not run in FP8, what was not
measured, and the commands that reproduce it. Every figure comes from the sessions; the decision is
computed from them, and simulated FP8 (PyTorch) never decides a speed question.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePath

from sessions.analyses import captions
from sessions.analyses.captions import SIMULATES
from sessions.analyses.comparison import BASELINE_PRECISION, compare
from sessions.analyses.groups import Rules
from sessions.analyses.lowering import diagnose
from sessions.analyses.merge import axis_values, split_merged, varying_axes
from sessions.analyses.noise import FASTER
from sessions.analyses.precision_choice import with_covered
from sessions.analyses.verdict import verdicts
from sessions.documents.engines import engine_label, engine_options, ran_tensorrt
from sessions.documents.errors import InspectError
from sessions.documents.model import Quality, Session, Variant
from sessions.reports.sections import (
    jobs_kernels_section,
    jobs_method_section,
    jobs_quality_section,
    jobs_recipe_section,
    portable_argv,
    shell_line,
)
from sessions.reports.tables import markdown_table_problems, md_cell, md_code, md_fence, md_text, render_markdown

COMPUTE_OPS = ("conv", "linear", "matmul")
SIMULATED = ("simulated FP8 (PyTorch with ModelOpt fake quantization): the numerics of the recipe, "
             "not the speed of FP8 kernels")


@dataclass(frozen=True)
class Job:
    path: str
    session: Session
    axes: dict[str, str]  # every axis value of the job (sessions.analyses.merge.AXES)

    def gpu(self) -> str:
        env = self.session.environment
        return env.gpu.name.removeprefix("NVIDIA ") if env.gpu else f"CPU ({env.cpu})"

    def engine(self) -> str:
        return engine_label(self.session.study, self.session.environment)

    def level(self) -> str:
        return engine_options(self.session.study).get("opt_level", "-")


@dataclass(frozen=True)
class Row:
    """One FP8 variant against its own baseline (sessions.analyses.comparison: its backend's fp16 in its job)."""

    job: Job
    fp16: Variant
    fp8: Variant
    x: float  # baseline time / FP8 time per image: above 1 is faster
    judgement: str | None  # faster, slower, within noise (sessions.analyses.noise); None: not judged

    @property
    def axes(self) -> dict[str, str]:
        return {**self.job.axes, "variant": self.fp8.name}


def jobs_of(sources: list[tuple[str, Session]]) -> list[Job]:
    sessions = [job for path, session in sources for job in split_merged(session, path)]
    return [Job(path, session, axis_values(session)) for path, session in sessions]


def varying(jobs: list[Job]) -> list[str]:
    return varying_axes([job.axes for job in jobs])


def comparison_rows(jobs: list[Job]) -> list[Row]:
    rows = []
    for job in jobs:
        for variant in job.session.variants:
            if variant.precision != "fp8":
                continue
            c = compare(job.session, variant)  # the study answers FP8 against fp16: other baselines are no answer
            if c.baseline is not None and c.baseline.precision == BASELINE_PRECISION and c.speedup is not None:
                rows.append(Row(job, c.baseline, variant, c.speedup, c.judgement))
    return rows


def span(values: list[float], unit: str = "x", digits: int = 2) -> str:
    low, high = (f"{v:.{digits}f}" for v in (min(values), max(values)))
    return f"{low}{unit}" if low == high else f"{low}{unit} to {high}{unit}"


PHRASES = {"batch": "at batch {}", "opt_level": "at level {}", "gpu": "on {}", "variant": "with {}",
           "model": "for {}", "backend": "on {}", "engine": "on {}"}


def where(paying: list[Row], rows: list[Row], axes: list[str]) -> str | None:
    """The one axis value that holds exactly the paying rows (`at batch 32`), if there is one."""
    for axis in [*axes, "variant"]:
        for value in dict.fromkeys(r.axes[axis] for r in paying):
            if {id(r) for r in rows if r.axes[axis] == value} == {id(r) for r in paying}:
                return PHRASES.get(axis, axis + " {}").format(md_cell(value))
    return None


def fp8_variants(jobs: list[Job]) -> list[Variant]:
    """Every FP8 variant that finished, timed or not, in job order: what the recipe and revisit parts speak of."""
    return [v for job in jobs for v in job.session.variants if v.precision == "fp8" and v.status == "ok"]


def decision(rows: list[Row], axes: list[str], jobs: list[Job] | None = None) -> str:
    real = [r for r in rows if not r.fp8.simulated]
    simulated = [r for r in rows if r.fp8.simulated]
    if not rows:
        untimed = fp8_variants(jobs or [])
        if not untimed:
            return "No decision: no FP8 variant was timed against an fp16 variant of the same job."
        names = ", ".join(captions.variant_label(v.name, v.simulated) for v in untimed)
        cpu = any(job.session.study.device == "cpu" for job in jobs or [])
        why = ("; on the CPU the baseline is fp32 or bf16 (fp16 convolutions are slow there) and FP8 is simulated, "
               "so a CPU run answers the recipe's quality, never FP8 speed") if cpu else ""
        return f"No speed decision: FP8 ran ({names}), but no fp16 variant was timed in the same job{why}."
    if not real:
        return (f"No speed decision: every FP8 variant here is {SIMULATED}. Simulated FP8 ran at "
                f"{span([r.x for r in simulated])} of fp16; measure with `--backend tensorrt` to decide.")
    paying = [r for r in real if r.judgement == FASTER]
    if not paying:
        return f"FP8 does not pay: {span([r.x for r in real])} of fp16."
    if len(paying) == len(real):
        return f"FP8 pays: {span([r.x for r in real])} of fp16."
    rest = [r for r in real if r not in paying]
    place = where(paying, real, axes) or f"in {len(paying)} of {len(real)} configurations"
    return f"FP8 pays {place} ({span([r.x for r in paying])} of fp16), not elsewhere ({span([r.x for r in rest])})."


def summary_section(jobs: list[Job], rows: list[Row], axes: list[str]) -> str:
    lines = ["### Summary and decision", "", (f"**{decision(rows, axes, jobs)}** (FP8 pays where its latency band lies "
             "below its baseline's, by the noise rule of every verdict; x = fp16 median / FP8 median of the same job "
             "and backend, above 1 is faster.)"), ""]
    models = ", ".join(dict.fromkeys(job.session.study.model for job in jobs))
    gpus = ", ".join(dict.fromkeys(f"{job.gpu()} ({job.engine()})" for job in jobs))
    lines.append(f"- {len(jobs)} job(s): {md_cell(models)} on {md_cell(gpus)}.")
    kernels = [(r.fp16.trace.per_call, r.fp8.trace.per_call) for r in rows if r.fp16.trace and r.fp8.trace]
    if kernels:
        lines.append(f"- Kernels per call: fp16 {span([k[0] for k in kernels], '', 0)}, "
                     f"FP8 {span([k[1] for k in kernels], '', 0)}.")
    quality = [r.fp8.quality for r in rows if r.fp8.quality is not None]
    if quality:
        lines.append(f"- FP8 top-1 agreement with fp32: {span([q.top1_agreement * 100 for q in quality], ' %')}; "
                     f"mean KL {min(q.mean_kl for q in quality):.2g} to {max(q.mean_kl for q in quality):.2g}; "
                     f"{sum(q.nonfinite for q in quality)} NaN / Inf outputs; "
                     f"stress inputs with NaN / Inf: {stress_span(quality)}"
                     f"{''.join(f'; {line}' for line in captions.reference_caveats(quality))}.")
    if any(r.fp8.simulated for r in rows):
        lines.append(f"- *simulated*: {SIMULATED}.")
    return "\n".join(lines)


def results_section(rows: list[Row], axes: list[str]) -> str:
    if not rows:
        return "### Results\n\nNo FP8 variant was timed against an fp16 variant of the same job."
    shown = [a for a in axes if a not in ("gpu", "backend", "engine", "opt_level", "batch")]  # columns of their own
    headers = ["GPU", "engine", "level", "batch", *shown, "FP8 variant", "fp16 ms", "FP8 ms", "x",
               "MiB fp16 / FP8", "build s fp16 / FP8"]
    body = []
    for r in rows:
        body.append([r.job.gpu(), r.job.engine(), r.job.level(), r.job.session.study.batch,
                     *(r.job.axes[a] for a in shown), captions.variant_label(r.fp8.name, r.fp8.simulated),
                     r.fp16.latency.median_ms, r.fp8.latency.median_ms, f"{r.x:.2f}",
                     _pair(_mib(r.fp16), _mib(r.fp8)), _pair(r.fp16.build_s, r.fp8.build_s)])
    parts = ["### Results", render_markdown(headers, body)]
    for axis in [*axes, "variant"]:
        if len({r.axes[axis] for r in rows}) > 1:
            parts += [f"x by {axis}:", axis_table(rows, axis)]
    unstable = [f"{r.job.gpu()} b{r.job.session.study.batch} {v.name}" for r in rows for v in (r.fp16, r.fp8)
                if (cov := captions.latency_cov(v.latency)) is not None and cov > captions.COV_WARN]
    if unstable:
        names = ", ".join(dict.fromkeys(unstable))
        parts.append(md_text(f"CoV above {100 * captions.COV_WARN:g} % for {names}: differences that small are noise."))
    return "\n\n".join(parts)


def axis_table(rows: list[Row], axis: str) -> str:
    variants = list(dict.fromkeys(r.fp8.name for r in rows)) if axis != "variant" else ["x"]
    body = []
    for value in dict.fromkeys(r.axes[axis] for r in rows):
        cells = []
        for name in variants:
            xs = [r.x for r in rows if r.axes[axis] == value and (axis == "variant" or r.fp8.name == name)]
            cells.append(span(xs) if xs else None)
        body.append([value, *cells])
    return render_markdown([axis, *variants], body)


def _mib(variant: Variant) -> str | None:
    return f"{variant.artifact_bytes / (1 << 20):.1f}" if variant.artifact_bytes is not None else None


def _pair(a: object, b: object) -> str:
    def text(v: object) -> str:
        return "-" if v is None else f"{v:.1f}" if isinstance(v, float) else str(v)

    return f"{text(a)} / {text(b)}"


def stress_span(quality: list[Quality]) -> str:
    ran = [q for q in quality if q.stress_inputs]
    if not ran:
        return "not run"
    return f"{min(q.stress_nonfinite for q in ran)} to {max(q.stress_nonfinite for q in ran)} of {ran[0].stress_inputs}"


def label(job: Job) -> str:
    level = f" L{job.level()}" if job.level() != "-" else ""
    return f"{job.session.study.model} {job.gpu()} {job.engine()}{level} b{job.session.study.batch}"


def fp16_layers_section(rows: list[Row]) -> str:
    headers = ["job", "FP8 variant", "compute layers", "in FP8", "not in FP8", "of those quantized by the recipe",
               "examples"]
    body = []
    for r in rows:
        compute = [layer for layer in with_covered(r.fp8.layers) if layer.op in COMPUTE_OPS]
        if not compute:
            continue
        other = [layer for layer in compute if "fp8" not in (layer.precision, layer.attrs.get(SIMULATES))]
        quantized = set(r.fp8.recipe.quantized) if r.fp8.recipe else set()
        expected = [layer for layer in other if layer.quantized or in_recipe(layer.name, layer.onnx_nodes, quantized)]
        shown = expected or other
        names = ", ".join(layer.name for layer in shown[:4]) + (" ..." if len(shown) > 4 else "")
        body.append([label(r.job), captions.variant_label(r.fp8.name, r.fp8.simulated), len(compute),
                     len(compute) - len(other), len(other), len(expected), names or "-"])
    if not body:
        return "### Layers of the FP8 engine that did not run in FP8\n\nNo layer precisions recorded."
    parts = ["### Layers of the FP8 engine that did not run in FP8", render_markdown(headers, body)]
    if any(r.fp8.simulated for r in rows):
        parts.append("For simulated variants the precision is the recipe's choice (fake quantization), not a kernel's.")
    return "\n\n".join(parts)


def in_recipe(name: str, onnx_nodes: list[str], quantized: set[str]) -> bool:
    """Whether a layer stands for a module the recipe quantized (`layer1.0.conv1`, or its ONNX node)."""
    texts = ["." + t.replace("/", ".") + "." for t in [name, *onnx_nodes]]
    return name in quantized or any(f".{path}." in text for path in quantized for text in texts)


def single_engines(jobs: list[Job]) -> list[str]:
    """The engine of each backend all of whose jobs ran one engine (its label, its version in it: `TensorRT 10.16.0`),
    in the jobs' order: what no job measured another version of."""
    labels: dict[str, set[str]] = {}
    for job in jobs:
        labels.setdefault(job.axes["backend"], set()).add(job.axes["engine"])
    return [next(iter(found)) for found in labels.values() if len(found) == 1]


def not_measured_section(jobs: list[Job], rows: list[Row]) -> str:
    items = []
    sessions = [job.session for job in jobs]
    if not any(ran_tensorrt(s.study) for s in sessions):
        items.append("TensorRT engines: no job ran the TensorRT backend" + (
            f"; every FP8 figure is {SIMULATED}" if any(r.fp8.simulated for r in rows) else ""))
    for axis, words in (("batch", "batch sizes other than {}"), ("gpu", "GPUs other than {}"),
                        ("opt_level", "builder optimisation levels other than {}")):
        values = {job.axes[axis] for job in jobs} - {"-"}  # of the jobs that have a value on the axis
        if len(values) == 1:
            items.append(words.format(values.pop()))
    if versions := single_engines(jobs):
        items.append(f"other versions of {', '.join(versions)}")
    layouts = {r.fp8.recipe.layout for r in rows if r.fp8.recipe is not None and r.fp8.recipe.layout}
    if layouts:
        items.append(f"FP8 layouts other than {', '.join(sorted(layouts))}")
    if any(s.study.weights.startswith("random") for s in sessions):
        items.append("accuracy with trained weights (random weights: quality compares numerics only)")
    images = {v.quality.images for s in sessions for v in s.variants if v.quality is not None}
    if images:
        items.append(f"quality on a larger held-out set (at most {max(images)} images here)")
    if any(v.artifact_bytes is None for s in sessions for v in s.variants if v.status == "ok"):
        items.append("plan size for some variants")
    if any(v.kernels is None for s in sessions for v in s.variants if v.status == "ok"):
        items.append("kernels per call for some variants (not traced)")
    items += [f"{label(job)} {v.name}: failed ({v.error})" for job in jobs for v in job.session.variants
              if v.status != "ok"]
    items += [f"{label(job)}: no fp16 variant to compare FP8 with" for job in jobs
              if any(v.precision == "fp8" and compare(job.session, v).speedup is None for v in job.session.variants)]
    if not items:
        return "### Not measured\n\nNothing the sessions can tell."
    return "### Not measured\n\n" + "\n".join(f"- {md_cell(item)}." for item in items)


def revisit_section(jobs: list[Job], rows: list[Row], rules: Rules) -> str:
    """When to revisit: the conditions under which these sessions' answer could change, each read from them."""
    fp8 = fp8_variants(jobs)
    if not fp8:
        return "### When to revisit\n\nNo FP8 variant finished: run the study first."
    items = []
    if all(v.simulated for v in fp8):
        items.append("with real FP8 kernels (`--backend tensorrt` on an FP8 GPU, or `trt-inspect probe`): every FP8 "
                     "variant here is simulated, so none of its times is FP8 kernel speed")
    split = sorted({f.layer for v in fp8 for f in diagnose(v) if f.reason == "per-group split"})
    if split:
        items.append(f"when TensorRT (or cuDNN) runs a grouped convolution as one kernel instead of one per group "
                     f"({len(split)} layers split here, e.g. {md_code(split[0])}); measure the baseline again first: "
                     "it "
                     "gets faster too")
    costs = [v for job in jobs for v in verdicts(job.session, rules) if v.speedup < 1 and v.group and v.group_delta_ms
             and v.measured is None and v.variant in {captions.variant_label(f.name, f.simulated) for f in fp8}]
    if costs:
        worst = max(costs, key=lambda v: v.group_delta_ms or 0.0)
        items.append(f"when {md_cell(worst.group)} gets cheaper: it adds {worst.group_delta_ms:.2f} ms per call to "
                     f"{md_cell(worst.variant)} against {md_cell(worst.baseline)} here")
    batches = {job.axes["batch"] for job in jobs}
    if len(batches) == 1:
        items.append(f"at larger batches or inputs, where convolutions and matmuls become compute bound (only batch "
                     f"{md_cell(batches.pop())} measured)")
    paying = any(r.judgement == FASTER for r in rows if not r.fp8.simulated)
    smaller = [(r, r.fp8.artifact_bytes / r.fp16.artifact_bytes) for r in rows if not r.fp8.simulated
               and r.fp8.artifact_bytes and r.fp16.artifact_bytes]
    if not paying and any(ratio < 0.9 for _, ratio in smaller):
        best = min(ratio for _, ratio in smaller)
        items.append(f"when plan size matters more than latency: the FP8 plan is up to {(1 - best) * 100:.0f} % "
                     "smaller")
    return "### When to revisit\n\n" + "\n".join(f"- {item}." for item in items)


def reproduce_section(sources: list[tuple[str, Session]], jobs: list[Job]) -> str:
    """The commands that repeat the sessions, with no machine's folders in them (`portable_argv`): sessions are
    named by their file names, as `export --format md` names them."""
    commands = [shell_line(portable_argv(s.study.command)) for _, s in sources
                if s.merge is not None and s.study.command]
    commands += [shell_line(portable_argv(job.session.study.command)) for job in jobs if job.session.study.command]
    commands += [shell_line(["trt-inspect", "rerun", PurePath(job.path).name]) for job in jobs
                 if job.session.study.plan is not None]
    return "\n".join(["### Reproduce", md_fence(list(dict.fromkeys(commands)), "bash")])


def study_markdown(sources: list[tuple[str, Session]], rules: Rules) -> str:
    jobs = jobs_of(sources)
    if not jobs:
        raise InspectError("no sessions to export")
    rows = comparison_rows(jobs)
    axes = varying(jobs)
    models = ", ".join(dict.fromkeys(job.session.study.model for job in jobs))
    labelled = [(label(job), job.session) for job in jobs]
    sections = [
        f"## FP8 quantization study: {md_cell(models)}", summary_section(jobs, rows, axes),
        jobs_recipe_section(fp8_variants(jobs)), jobs_method_section([job.session for job in jobs]),
        results_section(rows, axes), jobs_quality_section(labelled), jobs_kernels_section(labelled, rules),
        fp16_layers_section(rows), not_measured_section(jobs, rows), revisit_section(jobs, rows, rules),
        reproduce_section(sources, jobs),
    ]
    text = "\n\n".join(sections) + "\n"
    problems = markdown_table_problems(text)
    if problems:
        raise InspectError(f"the study section has a malformed table ({problems[0]})")
    return text
