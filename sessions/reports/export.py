"""Export a session for a README: Markdown sections, or the variant table as CSV / JSON.

The Markdown states the method (what the timed region holds) and the exact command that reruns the
study, so a reader can check and repeat the numbers.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from sessions.analyses.comparison import batch_words
from sessions.analyses.groups import Rules
from sessions.analyses.summary import summary_document
from sessions.analyses.verdict import verdict_lines
from sessions.documents.engines import engine_label, engine_options
from sessions.documents.errors import InputError, InspectError
from sessions.documents.model import Quality, Session
from sessions.documents.paths import exports_dir
from sessions.documents.storage import check_replaceable, write_atomically
from sessions.reports import views
from sessions.reports.tables import md_cell, md_fence, md_text, render_markdown, table_csv, table_markdown

SECTIONS = ("comparison", "quality", "groups", "method", "environment", "recipe", "rerun")


def comparison_section(session: Session, rules: Rules) -> str:
    """The variant table of `show`, with where it ran above it, the verdict and the caveats below it."""
    gpu = session.environment.gpu.name if session.environment.gpu else (session.environment.cpu or "unknown")
    studies = [(job.study, job.environment) for job in session.merge.jobs] if session.merge else \
        [(session.study, session.environment)]
    backends = ", ".join(dict.fromkeys(engine_label(study, env) for study, env in studies))
    levels = sorted({level for study, _ in studies if (level := engine_options(study).get("opt_level"))})
    level = f", builder optimization level {' / '.join(levels)}" if levels else ""
    where = md_text(f"{gpu}; {backends}{level}; {batch_words(session)}.")
    notes = [md_text(f"{v.name}: {note}") for v in session.variants for note in v.notes]
    return "\n\n".join(["## Comparison", where, table_markdown(views.session_variant_table(session)),
                         *map(md_text, verdict_lines(session, rules)), *notes])


def quality_section(session: Session) -> str:
    headers = ["variant", "reference", "images", "top-1 agreement %", "mean KL", "max abs logit error", "NaN/Inf",
               "stress inputs with NaN/Inf"]
    rows = [
        [v.name, v.quality.reference, v.quality.images, v.quality.top1_agreement * 100, v.quality.mean_kl,
         v.quality.max_abs_logit_error, v.quality.nonfinite, stress_cell(v.quality)]
        for v in session.variants if v.quality
    ] + [  # a real-FP8 engine against the simulated variant of its recipe: did the simulation predict it
        [v.name, v.simulation.reference, v.simulation.images, v.simulation.top1_agreement * 100, v.simulation.mean_kl,
         v.simulation.max_abs_logit_error, v.simulation.nonfinite, "-"]
        for v in session.variants if v.simulation
    ]
    if not rows:
        return "## Quality\n\nNot measured in this session."
    weights = md_text(f"Weights: {session.study.weights}; images: {next(v.quality.image_source for v in session.variants if v.quality)}.")
    return "\n\n".join(["## Quality", render_markdown(headers, rows), weights])


def stress_cell(quality: Quality) -> str:
    """How many of the built-in stress inputs gave NaN or Inf, of how many ran."""
    return f"{quality.stress_nonfinite} of {quality.stress_inputs}" if quality.stress_inputs else "-"


def groups_section(session: Session, rules: Rules) -> str:
    return "\n\n".join(["## Kernels per call by group", table_markdown(views.group_table(session, rules, "role"))])


def known(value, words=None) -> str:
    """A method figure, or "unknown" where the source did not record it (imported files)."""
    if value is None:
        return "unknown"
    if isinstance(words, dict):
        return words[value]
    return words(value) if words else str(value)


def method_section(session: Session) -> str:
    m = session.method
    lines = [
        "## Method",
        f"- **Timed region:** {md_cell(m.timed_region)}.",
        (f"- **Numbers:** timer {md_cell(m.timer)}; CUDA graph {known(m.cuda_graph, {True: 'on', False: 'off'})}; "
         f"warm-up {known(m.warmup_s, lambda s: f'{s:g} s')}; {known(m.rounds)} rounds x {known(m.iters)} iterations"
         f"{' interleaved across variants' if m.interleaved else ''}; "
         f"transfers {'included' if m.transfers_included else 'excluded'}; "
         f"{'static' if m.static_inputs else 'changing'} inputs."),
        f"- **Per-layer time:** {md_cell(m.per_layer)}.",
        f"- **Kernels:** {md_cell(m.kernels)}.",
        f"- **Batch / input:** {md_cell(batch_words(session))}, each input {md_cell(session.study.input_shape)}.",
    ]
    return "\n".join(lines)


def environment_section(session: Session) -> str:
    env = session.environment
    cpu = f"{env.cpu} ({env.cpu_count} cores)" if env.cpu_count else "unknown"
    rows = [["host", env.host], ["OS", env.os or "unknown"], ["CPU", cpu], ["Python", env.python or "unknown"]]
    if env.gpu:
        g = env.gpu
        rows += [
            ["GPU", f"{g.name} (CC {known(g.compute_capability)}, {known(g.multiprocessors)} SMs, {known(g.memory_mib)} MiB)"],
            ["driver / CUDA", f"{known(g.driver)} / {known(g.cuda_driver)}"],
            ["clocks at start", (f"SM {known(g.sm_clock_mhz)} MHz (max {known(g.max_sm_clock_mhz)}), memory "
                                f"{known(g.mem_clock_mhz)} MHz, {known(g.pstate)}")],
            ["clock-event reasons", ", ".join(g.clock_event_reasons) or "none"],
        ]
    rows += [[name, version] for name, version in env.versions.items() if version]
    return "\n\n".join(["## Environment", render_markdown(["item", "value"], rows)])


def recipe_section(session: Session) -> str:
    recipes = [(v.name, v.recipe) for v in session.variants if v.recipe]
    if not recipes:
        quantized = [v.name for v in session.variants if v.precision in ("int8", "fp8", "int4", "fp4")]
        if quantized:
            names = md_text(", ".join(quantized))
            return f"## Recipe\n\n{names}: quantized engines from files; how they were quantized is not in TensorRT's files."
        return "## Recipe\n\nNo quantized variant in this session."
    headers = ["variant", "method", "format", "layout", "quantized", "excluded", "exclude patterns", "scales", "calibration"]
    rows = [
        [name, r.method, r.number_format, r.layout, len(r.quantized), len(r.excluded), ", ".join(r.exclude_patterns) or "-",
         r.scales, f"{r.calibration_count} images from {r.calibration_source}"]
        for name, r in recipes
    ]
    return "\n\n".join(["## Recipe", render_markdown(headers, rows)])


def rerun_section(session: Session, path: str | None) -> str:
    if session.study.plan is None:  # imported files: the import commands, from the folder they ran in
        commands = [shell_line(v.command) for v in session.variants if v.command] or [shell_line(session.study.command)]
        return "\n".join(["## Rerun", "Imported from files; the import commands:", md_fence(commands, "bash")])
    lines = [shell_line(session.study.command)]
    if path:
        lines.append(f"{shell_line(['trt-inspect', 'rerun', path])}  # the same plan, then the diff against this session")
    return "\n".join(["## Rerun", md_fence(lines, "bash")])


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
            out.append(f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}" if ord(c) < 0x10000 else f"\\U{ord(c):08x}")
    return "$'" + "".join(out) + "'"


def export_markdown(session: Session, rules: Rules, sections: list[str] | None = None, path: str | None = None) -> str:
    sections = sections or list(SECTIONS)
    title = f"# {md_cell(session.study.model)}: {md_cell(', '.join(v.name for v in session.variants))} ({md_cell(session.study.created)})"
    builders = {
        "comparison": lambda: comparison_section(session, rules),
        "quality": lambda: quality_section(session),
        "groups": lambda: groups_section(session, rules),
        "method": lambda: method_section(session),
        "environment": lambda: environment_section(session),
        "recipe": lambda: recipe_section(session),
        "rerun": lambda: rerun_section(session, path),
    }
    return "\n\n".join([title, *(builders[s]() for s in sections)]) + "\n"


def export_csv(session: Session) -> str:
    """The variant table with raw values (what `show` prints, unformatted)."""
    return table_csv(views.session_variant_table(session))


def export_json(session: Session, path: str | None, rules: Rules) -> dict:
    return {**summary_document(session, path), "verdicts": verdict_lines(session, rules)}


def write_export(target: Path, text: str, force: bool) -> None:
    """Write atomically (temporary file, then rename) under the rules of `sessions.documents.storage.check_replaceable`: never
    over a folder, a link, a device or a FIFO; over a file only with `force`, keeping its mode."""
    check_replaceable(target, "export", force)
    if not target.parent.is_dir():
        raise InputError(f"cannot write {target}: no folder {target.parent}")
    try:
        write_atomically(target, text.encode(), "export")
    except InspectError as exc:  # a full disk, a read-only folder: the target given is unusable (exit 2)
        raise InputError(exc.message) from None


def export_file_name(*parts: str) -> str:
    """A Markdown file name from a screen's words, e.g. `senet154-groups-fp8-all-against-fp16-by-role.md`:
    ASCII letters, digits, `.`, `_` and `-` only, at most 100 characters before `.md`."""
    words = "-".join(re.sub(r"[^A-Za-z0-9._]+", "-", part).strip("-._") for part in parts)
    return (re.sub(r"-{2,}", "-", words).strip("-")[:100].rstrip("-") or "trt-inspect") + ".md"


def write_new_markdown(text: str, *parts: str) -> Path:
    """`text` in a new file under `exports_dir()` named from `parts`; `-2`, `-3` ... where one exists, never over it."""
    folder = exports_dir()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        target = free_name(folder / export_file_name(*parts))
        with target.open("x") as out:  # "x": never over a file that appeared since
            out.write(text)
    except OSError as exc:
        raise InspectError(f"cannot write {folder}: {exc.strerror or exc}") from None
    return target


def free_name(target: Path) -> Path:
    """`target`, or `name-2.md`, `name-3.md`, ... : the first that does not exist (the TUI never overwrites)."""
    candidate, n = target, 1
    while candidate.exists():
        n += 1
        candidate = target.with_name(f"{target.stem}-{n}{target.suffix}")
    return candidate
