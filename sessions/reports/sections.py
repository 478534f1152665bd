"""The report sections, each written once: what `export --format md`, `export --format study` and the TUI's method
page compose.

A section is Markdown under its own heading. The one-session report (`export --format md`, `## ` headings) takes
the session; the study (`export --format study`, `### ` headings) takes its jobs as `Labelled` pairs, each job's
label and session in the study's order, and speaks of every job in one section. Both forms of a section share
their cells and words here (`quality_cells`, `known`, `method_words`, `explaining_layers`, `shell_line`), so a
figure reads the same in every report.
"""

from __future__ import annotations

import re
import shlex
from collections import Counter
from collections.abc import Callable, Mapping
from pathlib import PurePath
from typing import TypeVar

from sessions.analyses.captions import quality_caveats, unquantized_words, variant_label
from sessions.analyses.comparison import batch_words, reference
from sessions.analyses.groups import Rules
from sessions.analyses.precision_choice import variant_notes
from sessions.analyses.verdict import verdict_lines
from sessions.documents.engines import engine_label, engine_options
from sessions.documents.model import Quality, Recipe, Session, Variant
from sessions.reports import views
from sessions.reports.tables import (
    Cell,
    format_value,
    md_cell,
    md_code,
    md_fence,
    md_text,
    render_markdown,
    table_markdown,
)

T = TypeVar("T")
Labelled = list[tuple[str, Session]]  # a study's jobs: each job's label (`senet154 H200 PyTorch 2.11.0 b1`) and session


def comparison_section(session: Session, rules: Rules) -> str:
    """The variant table of `show`, with where it ran above it, the verdict and the caveats below it."""
    gpu = session.environment.gpu.name if session.environment.gpu else (session.environment.cpu or "unknown")
    studies = [(job.study, job.environment) for job in session.merge.jobs] if session.merge else \
        [(session.study, session.environment)]
    backends = ", ".join(dict.fromkeys(engine_label(study, env) for study, env in studies))
    levels = sorted({level for study, _ in studies if (level := engine_options(study).get("opt_level"))})
    level = f", builder optimization level {' / '.join(levels)}" if levels else ""
    where = md_text(f"{gpu}; {backends}{level}; {batch_words(session)}.")
    notes = [md_text(f"{v.name}: {note}") for v in session.variants for note in variant_notes(v)]
    return "\n\n".join(["## Comparison", where, table_markdown(views.session_variant_table(session)),
                         *map(md_text, verdict_lines(session, rules)), *notes])


def quality_section(session: Session) -> str:
    """The quality figures of every variant that has them, and of every real-FP8 engine against the simulated
    variant of its recipe; the weights and images below."""
    headers = ["variant", "reference", "images", "top-1 agreement %", "mean KL", "max abs logit error", "NaN/Inf",
               "stress inputs with NaN/Inf"]
    rows = [[v.name, *quality_cells(v.quality, stress_cell(v.quality))] for v in session.variants if v.quality] + [
        [v.name, *quality_cells(v.simulation, "-")]  # a real-FP8 engine against the simulated variant of its recipe
        for v in session.variants if v.simulation
    ]
    if not rows:
        return "## Quality\n\nNot measured in this session."
    images = next(v.quality.image_source for v in session.variants if v.quality)
    weights = md_text(f"Weights: {session.study.weights}; images: {images}.")
    table = render_markdown(headers, rows, {1 + i for i in QUALITY_FIGURES})
    return "\n\n".join(["## Quality", table, weights, *map(md_text, quality_caveats(session))])


def quality_cells(quality: Quality, stress: str) -> list[Cell]:
    """A quality table's figures after its variant: reference, images, top-1 agreement %, mean KL, max abs logit
    error, NaN/Inf values, then `stress` (`stress_cell`, or "-" where no stress inputs apply); each figure written
    as the variant table writes it (`format_value` with that table's column kinds), so one number reads the same in
    both. `QUALITY_FIGURES`: the positions of the figures among these cells."""
    return [quality.reference, quality.images, format_value(quality.top1_agreement * 100, "pct"),
            format_value(quality.mean_kl, "sci"), format_value(quality.max_abs_logit_error, "sci"), quality.nonfinite,
            stress]


QUALITY_FIGURES = (1, 2, 3, 4, 5)  # the cells of `quality_cells` that are numbers, right-aligned


def stress_cell(quality: Quality) -> str:
    """How many of the built-in stress inputs gave NaN or Inf, of how many ran."""
    return f"{quality.stress_nonfinite} of {quality.stress_inputs}" if quality.stress_inputs else "-"


def groups_section(session: Session, rules: Rules) -> str:
    """The kernels per call by role group, what the layers asked for in FP8 ran by role (where the layers record it),
    then the layers that explain the counts and why (as `--format study`)."""
    parts = ["## Kernels per call by group", table_markdown(views.group_table(session, rules, "role"))]
    precision = views.precision_table(session, rules)
    if precision.rows:
        parts += [f"{precision.title[0].upper()}{precision.title[1:]}:", table_markdown(precision)]
    return "\n\n".join([*parts, explaining_layers(session)])


def explaining_layers(session: Session, top: int = 5) -> str:
    """The flagged layers (per-group splits, kernel jumps against fp16, FP8 layers on kernels without FP8 tensor
    cores), most kernels first."""
    found = [flag for flag, _ in views.flags_of(session)]
    baseline = reference(session)
    base = baseline.name if baseline is not None else "the baseline"
    if not found:
        return (f"No layer is flagged (no per-group split, no kernel jump against {md_cell(base)}, no FP8 layer on "
                "kernels without FP8 tensor cores).")
    lines = []
    for variant in dict.fromkeys(f.variant for f in found):
        mine = sorted((f for f in found if f.variant == variant), key=lambda f: -f.kernels_per_call)
        reasons = md_cell(", ".join(f"{n} {reason}" for reason, n in Counter(f.reason for f in mine).items()))
        examples = "; ".join(
            f"{md_code(f.layer)} {counted(round(f.kernels_per_call), 'kernel')}"
            + (f" ({counted(f.groups, 'group')})" if f.groups else "")
            + (f", {md_cell(base)} {f.baseline_kernels_per_call:.0f}"
               if f.baseline_kernels_per_call is not None else "")
            for f in mine[:top])
        lines.append(f"- {md_cell(variant)}: {counted(len(mine), 'layer')} flagged ({reasons}); {examples}")
    return "Layers that explain the count:\n" + "\n".join(lines)


def known(value: T | None, words: Mapping[T, str] | Callable[[T], str] | None = None) -> str:
    """A method figure in `words` (a table of the values, or a function of the value; `str` where None), or
    "unknown" where the source did not record it (imported files)."""
    if value is None:
        return "unknown"
    if isinstance(words, Mapping):
        return words[value]
    return words(value) if words else str(value)


def method_section(session: Session) -> str:
    """The method as it ran on the session's device: the samples behind the variant table's medians, the CUDA
    graph only where a GPU ran, and the source's own words for the timed region, layers and kernels made true
    to the method (`method_words`)."""
    m = session.method
    gpu = session.study.device != "cpu"
    graph = f"CUDA graph {known(m.cuda_graph, {True: 'on', False: 'off'})}; " if gpu else ""
    rounds = counted(m.rounds, "round") if m.rounds is not None else "unknown rounds"
    iters = counted(m.iters, "iteration") if m.iters is not None else "unknown iterations"
    calls = traced_calls(session)
    lines = [
        "## Method",
        f"- **Timed region:** {md_cell(method_words(m.timed_region, m.cuda_graph))}.",
        (f"- **Numbers:** timer {md_cell(m.timer)}; {graph}"
         f"warm-up {warmup_words(m.warmup_s)}; {rounds} x {iters}"
         f"{' interleaved across variants' if m.interleaved else ''}; "
         f"transfers {'included' if m.transfers_included else 'excluded'}; "
         f"{'static' if m.static_inputs else 'changing'} inputs; the variant table's times are the median of every "
         "sample of a variant (ms per call)."),
        f"- **Per-layer time:** {md_cell(method_words(m.per_layer, m.cuda_graph, calls))}.",
        f"- **Kernels:** {md_cell(method_words(m.kernels, m.cuda_graph, calls))}.",
        f"- **Batch / input:** {md_cell(batch_words(session))}, each input {md_cell(session.study.input_shape)}.",
    ]
    return "\n".join(lines)


def warmup_words(seconds: float | None) -> str:
    """The warm-up per variant: `0.5 s`, or "unknown" where the source did not record it."""
    return known(seconds, lambda s: f"{s:g} s")


def counted(n: int, noun: str) -> str:
    """`1 round`, `5 rounds`: a count with its noun in the number it takes (an English plural by `s`)."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


_COUNT_S = re.compile(r"\b(\d+) ((?:[a-z-]+ )?)([a-z]+)\(s\)")  # "7 eager call(s)"
_ONE_PLURAL = re.compile(r"\b1 ((?:discarded |eager |traced )?)(inference|round|iteration|call|run|sample)s\b")
_GRAPH_RUNS = re.compile(r"\(graph\) (runs|replays)")


def method_words(text: str, cuda_graph: bool | None, traced_calls: int | None = None) -> str:
    """A source's method words (`TimingMethod`'s text fields, written when the study ran) as they hold for this
    method: counts in the number they take ("7 eager call(s)" -> "7 eager calls", "1 discarded inferences" ->
    "1 discarded inference"; an uncounted "call(s)" by `traced_calls`, the calls each variant's trace holds), and
    "the timed (graph) runs" as "the timed CUDA-graph replays" where a CUDA graph ran, "the timed runs" where none
    did (the tracers write "(graph)" whichever ran)."""
    text = _COUNT_S.sub(lambda m: f"{m.group(1)} {m.group(2)}{m.group(3)}{'' if m.group(1) == '1' else 's'}", text)
    text = _ONE_PLURAL.sub(lambda m: f"1 {m.group(1)}{m.group(2)}", text)
    if traced_calls is not None:
        text = text.replace("call(s)", "call" if traced_calls == 1 else "calls")
    return _GRAPH_RUNS.sub("CUDA-graph replays" if cuda_graph else "runs", text)


def traced_calls(session: Session) -> int | None:
    """How many calls every traced variant's trace holds, where they agree; None where none was traced or they
    differ."""
    calls = {v.trace.calls for v in session.variants if v.trace is not None and v.trace.calls}
    return calls.pop() if len(calls) == 1 else None


def environment_section(session: Session) -> str:
    """Where the session ran: host, OS, CPU, Python, the GPU with its driver and clocks, and the versions recorded."""
    env = session.environment
    cpu = f"{env.cpu} ({env.cpu_count} cores)" if env.cpu_count else "unknown"
    rows = [["host", env.host], ["OS", env.os or "unknown"], ["CPU", cpu], ["Python", env.python or "unknown"]]
    if env.gpu:
        g = env.gpu
        rows += [
            ["GPU", (f"{g.name} (CC {known(g.compute_capability)}, {known(g.multiprocessors)} SMs, "
                     f"{known(g.memory_mib)} MiB)")],
            ["driver / CUDA", f"{known(g.driver)} / {known(g.cuda_driver)}"],
            ["clocks at start", (f"SM {known(g.sm_clock_mhz)} MHz (max {known(g.max_sm_clock_mhz)}), memory "
                                f"{known(g.mem_clock_mhz)} MHz, {known(g.pstate)}")],
            ["clock-event reasons", ", ".join(g.clock_event_reasons) or "none"],
        ]
    if env.gpu_state:
        rows.append(["CUDA-graph state", env.gpu_state])
    rows += [[name, version] for name, version in env.versions.items() if version]
    return "\n\n".join(["## Environment", render_markdown(["item", "value"], rows)])


def recipe_section(session: Session) -> str:
    """How each quantized variant was quantized, one table row each; a line where no variant records a recipe."""
    recipes = [(v.name, v.recipe) for v in session.variants if v.recipe]
    if not recipes:
        quantized = [v.name for v in session.variants if v.precision in ("int8", "fp8", "int4", "fp4")]
        if quantized:
            names = md_text(", ".join(quantized))
            return (f"## Recipe\n\n{names}: quantized engines from files; how they were quantized is not in "
                    "TensorRT's files.")
        return "## Recipe\n\nNo quantized variant in this session."
    unquantized = any(r.unquantized for _, r in recipes)  # a column only where a recipe has such layers
    headers = ["variant", "method", "format", "layout", "quantized", "excluded",
               *(["selected, no quantizer"] if unquantized else []), "exclude patterns", "scales", "calibration"]
    rows = [
        [name, r.method, r.number_format, r.layout, len(r.quantized), len(r.excluded),
         *([len(r.unquantized)] if unquantized else []), ", ".join(r.exclude_patterns) or "-", r.scales,
         calibration_words(r)]
        for name, r in recipes
    ]
    return "\n\n".join(["## Recipe", render_markdown(headers, rows)])


def calibration_words(recipe: Recipe) -> str:
    """What a recipe was calibrated on: `16 images from <source>`."""
    return f"{recipe.calibration_count} images from {recipe.calibration_source}"


def rerun_section(session: Session, path: str | None) -> str:
    """The commands that repeat the study, with no machine's folders in them (`portable_argv`): the study's
    command writing to the session's file name, then `rerun` of that file."""
    if session.study.plan is None:  # imported files: the import commands, from the folder they ran in
        commands = [shell_line(portable_argv(v.command)) for v in session.variants if v.command] or [
            shell_line(portable_argv(session.study.command))]
        where = "Imported from files; the import commands, run in the folder that holds the files:"
        return "\n".join(["## Rerun", where, md_fence(commands, "bash")])
    name = PurePath(path).name if path else None
    lines = [shell_line(portable_argv(session.study.command, name))]
    if name:
        rerun = shell_line(["trt-inspect", "rerun", name])
        lines.append(f"{rerun}  # the same plan, then the diff against this session")
    return "\n".join(["## Rerun", md_fence(lines, "bash")])


_MACHINE_PATH = re.compile(r"^(/|~|\$\{?\w+\}?/)")  # an absolute path, the home folder, a folder by variable ($OUT/)
_OUT_OPTIONS = ("--out", "-o", "--output")


def portable_argv(argv: list[str], out_name: str | None = None) -> list[str]:
    """`argv` as anyone can paste it: an argument that names a machine's folder (absolute, `~`, `$VAR/`; also after
    `--option=`) keeps its file name only, and the value of `--out` becomes `out_name` where one is given."""
    found: list[str] = []
    for i, arg in enumerate(argv):
        option, eq, value = arg.partition("=") if arg.startswith("--") and "=" in arg else ("", "", arg)
        if out_name is not None and ((eq and option in _OUT_OPTIONS) or (i and argv[i - 1] in _OUT_OPTIONS)):
            value = out_name
        elif _MACHINE_PATH.match(value):
            value = PurePath(value).name or value
        found.append(f"{option}={value}" if eq else value)
    return found


def shell_line(argv: list[str]) -> str:
    """A command as one line bash reads back: arguments with control characters (a newline) in $'...' quoting."""
    return " ".join(shlex.quote(a) if a.isprintable() else _ansi_c_quote(a) for a in argv)


def _ansi_c_quote(text: str) -> str:
    out = []
    for c in text:
        if c in "\\'":
            out.append("\\" + c)
        elif c.isprintable():
            out.append(c)
        else:
            code = ord(c)
            out.append(f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}")
    return "$'" + "".join(out) + "'"


def jobs_recipe_section(fp8: list[Variant]) -> str:
    """The recipe of every FP8 variant given (those that finished, timed against fp16 or not), each once."""
    lines = ["### Recipe"]
    seen: set[tuple[str, str, str, int, int]] = set()
    for variant in fp8:
        recipe = variant.recipe
        if recipe is None:
            continue
        key = (variant.name, recipe.method, recipe.scales, len(recipe.quantized), recipe.calibration_count)
        if key in seen:
            continue
        seen.add(key)
        excluded = f"; kept out by pattern: {', '.join(recipe.exclude_patterns)}" if recipe.exclude_patterns else ""
        lines.append(f"- {variant_label(f'**{md_cell(variant.name)}**', variant.simulated)}: "
                     + md_cell(f"{recipe.number_format} for {len(recipe.quantized)} of {recipe.layer_count} layers "
                               f"(layout {recipe.layout or '-'}{excluded}{unquantized_words(recipe)}). "
                               f"Scales: {recipe.scales}. Calibration: {calibration_words(recipe)}. "
                               f"Method: {recipe.method}."))
    return "\n".join(lines) if len(lines) > 1 else "### Recipe\n\nNo FP8 variant records a recipe."


def jobs_method_section(sessions: list[Session]) -> str:
    """The method of every job, one line per distinct method naming the batches timed that way; then the first
    job's kernel and per-layer method; the source's words made true to the method as in `method_section`."""
    batches: dict[str, list[str]] = {}  # the method's words -> the batches timed that way
    for session in sessions:
        m = session.method
        graph = known(m.cuda_graph, {True: "one CUDA-graph replay", False: "one eager inference"})
        rounds, iters = known(m.rounds), known(m.iters)
        order = f"{rounds} rounds interleaved across the variants" if m.interleaved else f"{rounds} rounds"
        words = md_cell(f"{graph} per sample ({m.timer}); median of all {rounds} x {iters} runs: {order}, {iters} "
                        f"runs each, after {warmup_words(m.warmup_s)} of warm-up per variant; all "
                        f"variants of a job built and timed together in one process. Timed region: "
                        f"{method_words(m.timed_region, m.cuda_graph)}.")
        batches.setdefault(words, [])
        if str(session.study.batch) not in batches[words]:
            batches[words].append(str(session.study.batch))
    lines = ["### Method", *(f"- Batch {', '.join(b)}: {words}" for words, b in batches.items())]
    first, calls = sessions[0].method, traced_calls(sessions[0])
    lines += [f"- Kernels: {md_cell(method_words(first.kernels, first.cuda_graph, calls))}.",
              f"- Per-layer time: {md_cell(method_words(first.per_layer, first.cuda_graph, calls))}."]
    return "\n".join(lines)


def jobs_quality_section(jobs: Labelled) -> str:
    """The quality figures of every variant of every job, labelled by job; the weights below."""
    headers = ["job", "variant", "reference", "images", "top-1 agreement %", "mean KL", "max abs error", "NaN / Inf",
               "stress inputs with NaN / Inf"]
    body = [[label, variant_label(v.name, v.simulated), *quality_cells(v.quality, stress_cell(v.quality))]
            for label, session in jobs for v in session.variants if v.quality is not None]
    if not body:
        return "### Quality\n\nNot measured."
    sources = ", ".join(dict.fromkeys(f"{session.study.weights}" for _, session in jobs))
    return "\n\n".join(["### Quality", render_markdown(headers, body, {2 + i for i in QUALITY_FIGURES}),
                         md_text(f"Weights: {sources}."),
                         *map(md_text, jobs_caveats(jobs))])


def jobs_caveats(jobs: Labelled) -> list[str]:
    """Each job's quality caveats (`captions.quality_caveats`: random weights, a degenerate reference) once; where
    the jobs differ in them, each line is labelled with the jobs it holds for."""
    holders: dict[str, list[str]] = {}
    for label, session in jobs:
        for line in quality_caveats(session):
            holders.setdefault(line, []).append(label)
    return [line if len(labels) == len(jobs) else f"{'; '.join(labels)}: {line}" for line, labels in holders.items()]


def jobs_kernels_section(jobs: Labelled, rules: Rules) -> str:
    """Each traced job's kernels per call by role group (the counts only), then the layers that explain them."""
    parts = ["### Kernels per call by group"]
    for label, session in jobs:
        if all(v.kernels is None for v in session.variants):
            parts.append(md_text(f"{label}: no kernel trace."))
            continue
        table = views.group_table(session, rules, "role")
        headers, rows = table.labels, table.rows
        keep = [0] + [i for i, h in enumerate(headers) if h.endswith(" k/call")]
        counts = [[row[0], *(_count(row[i]) for i in keep[1:])] for row in rows]
        parts += [f"**{md_cell(label)}**", render_markdown([headers[i] for i in keep], counts)]
        parts.append(explaining_layers(session))
    return "\n\n".join(parts)


def _count(value: Cell) -> Cell:
    """A count as a whole number where it is one (`3.0` -> `3`)."""
    return int(value) if isinstance(value, float) and value.is_integer() else value
