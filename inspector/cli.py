"""The headless command line, twin of the TUI. Imports nothing heavy until a command needs it.

stdout carries data only (tables, JSON, Markdown); progress and errors go to stderr as one line each.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from inspector.options import add_arguments, argument_type
from sessions.errors import ExitCode, InputError, InspectError
from sessions.options import ONNX, PROBE, RUN, option
from sessions.tables import terminal_text

COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {}


def command(name: str):
    def register(fn: Callable[[argparse.Namespace], int]):
        COMMANDS[name] = fn
        return fn

    return register


def _err(message: str) -> None:
    """One line on stderr; what a session or a file put in it is escaped for the terminal."""
    print(f"trt-inspect: {terminal_text(message)}", file=sys.stderr, flush=True)


def _add_study_options(p: argparse.ArgumentParser) -> None:
    add_arguments(p, RUN)
    p.add_argument("--force", action="store_true", help="replace the session at --out (when the study is done)")
    p.add_argument("--json", action="store_true", help="print a JSON summary on stdout")


def _add_session_commands(sub) -> None:
    p = sub.add_parser("open", help="open a saved session in the TUI")
    p.add_argument("session", nargs="?", help="session file or name (default: the session browser)")

    p = sub.add_parser("show", help="print a session's variant table, or with --layers every layer in full")
    p.add_argument("session")
    p.add_argument("--json", action="store_true")
    p.add_argument("--layers", action="store_true",
                   help="every layer: tactic, input / output formats and dtypes, reformats, precision as run and as asked")
    p.add_argument("--variant", action="append", dest="variants", help="with --layers: only these variants (repeatable)")

    p = sub.add_parser("groups", help="per-group kernels and time per variant, and flagged layers")
    p.add_argument("session")
    p.add_argument("--variant", action="append", dest="variants", help="only these variants (repeatable)")
    p.add_argument("--by", default="role", choices=["role", "stage", "kernel"])
    p.add_argument("--groups", dest="rules", help="TOML file of extra grouping rules (tried before the built-in ones)")
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("sessions", help="list saved sessions")
    p.add_argument("--json", action="store_true")


def _add_import_command(sub) -> None:
    p = sub.add_parser("import", help="make a session from trtexec / engine-inspector JSON files")
    p.add_argument("folder", nargs="?", help="a folder holding the files of one engine (found by name and content)")
    p.add_argument("--layers", help="layer information (--exportLayerInfo or IEngineInspector JSON)")
    p.add_argument("--profile", help="per-layer profile (--exportProfile); alone, it names the layers too")
    p.add_argument("--times", help="per-inference times (--exportTimes)")
    p.add_argument("--metadata", action="append", default=[], metavar="FILE",
                   help="trtexec metadata (*.profile.metadata.json, *.build.metadata.json, trex *.metadata.json) or a "
                   "trtexec log (repeatable; those beside the layer file are read anyway)")
    p.add_argument("--no-metadata-search", action="store_true", help="do not read metadata files found beside the layer file")
    p.add_argument("--name", type=_name, help="variant name (default: from the file name)")
    p.add_argument("--model", help="model name, where the files do not say it (default: trtexec's model option, else the file name)")
    p.add_argument("--batch", type=argument_type(option("batch")), help="batch size, where the files do not give the input shape")
    p.add_argument("--force", action="store_true", help="with --into: join files of another model, batch or GPU; "
                   "with --out: replace the session there")
    target = p.add_mutually_exclusive_group()
    target.add_argument("--into", help="add the variant to this existing session")
    target.add_argument("--out", help="session file to write (default: the user-data folder)")
    p.add_argument("--json", action="store_true")


def _name(text: str) -> str:
    """A name, never a path: it becomes part of a file name in the sessions folder."""
    from inspector.request import check_name

    try:
        return check_name(text)
    except InputError as exc:
        raise argparse.ArgumentTypeError(exc.message) from None


def _add_report_commands(sub) -> None:
    p = sub.add_parser("diff", help="compare two sessions; exit 1 on a regression past the threshold")
    p.add_argument("a", help="the older session (baseline)")
    p.add_argument("b", help="the newer session")
    p.add_argument("--threshold", default="5%", help="relative change that counts: 5%% or 0.05 (default 5%%)")
    p.add_argument("--format", default="text", choices=["text", "md", "json"])
    p.add_argument("--groups", dest="rules", help="TOML file of extra grouping rules")
    p.add_argument("--pair", action="append", default=[], metavar="A=B",
                   help="compare variant A of the first session with variant B of the second (repeatable)")

    p = sub.add_parser("export", help="a session as README-ready Markdown, or CSV / JSON; the study section of several")
    p.add_argument("session", nargs="+", help="one session; several for --format study")
    p.add_argument("--format", default="md", choices=["md", "csv", "json", "study", "matrix"],
                   help="study: the FP8 study section of one or more sessions; matrix: a merged session's tables per axis pair")
    p.add_argument("--sections", help="comma list of comparison,quality,groups,method,environment,recipe,rerun; "
                   "with --format csv or json, `layers`: every layer with tactic, formats, reformats and precision")
    p.add_argument("--groups", dest="rules", help="TOML file of extra grouping rules")
    p.add_argument("-o", "--output", help="write here instead of stdout (refuses to overwrite without --force)")
    p.add_argument("--force", action="store_true")

    p = sub.add_parser("rerun", help="repeat a study with its recorded plan, then diff against it")
    p.add_argument("session")
    p.add_argument("--out", help="session file for the new run")
    p.add_argument("--force", action="store_true", help="replace the session at --out (when the study is done)")
    p.add_argument("--threshold", default="5%")


def _add_onnx_command(sub) -> None:
    p = sub.add_parser("onnx", help="write the ONNX files a TensorRT study builds from, with Q/DQ counts")
    add_arguments(p, ONNX)
    p.add_argument("--out", default=".", help="folder for the .onnx files")
    p.add_argument("--json", action="store_true")


def _add_sweep_commands(sub) -> None:
    p = sub.add_parser("sweep", help="run a matrix of studies, one job per plan (here, on Ray or on Slurm), and merge them")
    p.add_argument("matrix", help="TOML file: [base] options, [axes] lists, [[exclude]] combinations")
    p.add_argument("--executor", default="local", choices=["local", "ray", "slurm"])
    p.add_argument("--gpus", type=int, help="local: GPUs used (default: every visible one); ray: GPUs of a local cluster")
    p.add_argument("--out", help="the sweep's folder (default: <user data>/sweeps/<name>)")
    p.add_argument("--dry-run", action="store_true", help="print the plans and the job count; run nothing")
    p.add_argument("--allow-imports", action="store_true",
                   help="let the matrix's [sweep] imports run in every job (plug-in backends and tracers: code)")
    p.add_argument("--ray-address", help="a running Ray cluster (default: start a local one)")
    p.add_argument("--partition", help="Slurm partition")
    p.add_argument("--time-limit", type=int, default=120, metavar="MINUTES", help="Slurm time limit per job")
    p.add_argument("--resolve", choices=["here", "job"],
                   help="where each plan is resolved (backend, device, tracer, defaults): here, or on the machine each "
                        "job runs on (default: job for slurm and for a remote Ray cluster, here otherwise)")
    p.add_argument("--submitit-cluster", choices=["slurm", "local", "debug"],
                   help="submitit's executor (default: Slurm where found; local runs the jobs here)")
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("merge", help="join sessions (files, folders, sweeps) into one comparison keyed by their axes")
    p.add_argument("sources", nargs="+", metavar="SESSION_OR_DIR")
    p.add_argument("--out", required=True, help="the merged session file (never one of the sources)")
    p.add_argument("--force", action="store_true", help="replace the session at --out")
    p.add_argument("--json", action="store_true")


def _add_probe_command(sub) -> None:
    p = sub.add_parser("probe", help="every convolution and linear in fp16 and in real FP8 kernels, timed alone (FP8 GPU)")
    add_arguments(p, PROBE)
    p.add_argument("--json", action="store_true")


class _Parser(argparse.ArgumentParser):
    """Argument errors are one line on stderr, like every other error; `--help` still prints the usage."""

    def error(self, message: str):  # type: ignore[override]
        self.exit(ExitCode.USAGE, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="trt-inspect",
        description="Profile fp16 against FP8 engines layer by layer and kernel by kernel. "
        "`trt-inspect MODEL` runs a whole study (the TUI on a terminal, headless otherwise).",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    _add_study_options(sub.add_parser("run", help="run a study headless and save its session"))
    for add in (_add_session_commands, _add_import_command, _add_report_commands, _add_onnx_command, _add_probe_command,
                _add_sweep_commands):
        add(sub)
    for each in sub.choices.values():
        each.add_argument("-v", "--verbose", action="store_true", help="also show the libraries' warnings (each once)")
    return parser


def study_request(args: argparse.Namespace, command: Sequence[str]):
    from inspector.request import StudyRequest

    fields = StudyRequest.__dataclass_fields__
    values = {k: v for k, v in vars(args).items() if k in fields and k != "command"}
    values["fp8_recipes"] = tuple(values.get("fp8_recipes") or ())
    values["fp8_exclude"] = tuple(values.get("fp8_exclude") or ())
    return StudyRequest(**values, command=tuple(command))


def _json_text(document) -> str:
    """Indented JSON; a path that is not UTF-8 (a POSIX file name is bytes) is shown with backslash escapes."""
    import orjson

    try:
        return orjson.dumps(document, option=orjson.OPT_INDENT_2).decode() + "\n"
    except orjson.JSONEncodeError:  # surrogates from os.fsdecode: not valid UTF-8, so not valid JSON
        return orjson.dumps(_printable(document), option=orjson.OPT_INDENT_2).decode() + "\n"


def _printable(value):
    import dataclasses

    if isinstance(value, str):
        return value.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    if isinstance(value, dict):
        return {_printable(k): _printable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_printable(v) for v in value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _printable(dataclasses.asdict(value))
    return value


def _print_json(document) -> None:
    sys.stdout.write(_json_text(document))


def _print_summary(session, path) -> None:
    from sessions import views
    from sessions.groups import load_rules
    from sessions.summary import simulation_lines
    from sessions.tables import table_text
    from sessions.verdict import verdict_lines

    gpu = session.environment.gpu.name if session.environment.gpu else (session.environment.cpu or "GPU unknown")
    batch = session.study.batch or "several"  # 0: a merged session of several batch sizes
    print(terminal_text(f"{session.study.model}  batch {batch}  {session.study.backend} on {session.study.device} ({gpu})"))
    print(table_text(views.session_variant_table(session)))
    from sessions.layer_verdict import layer_time_lines

    rules = load_rules()
    for line in (verdict_lines(session, rules) or layer_time_lines(session, rules)) + simulation_lines(session):
        print(terminal_text(line))
    for variant in session.variants:
        for note in variant.notes:
            print(terminal_text(f"note ({variant.name}): {note}"))
    if path is not None:
        print(terminal_text(f"session: {path}"))


def _print_session(session, path, as_json: bool) -> None:
    if as_json:
        from sessions.summary import summary_document

        _print_json(summary_document(session, str(path)))
    else:
        _print_summary(session, path)


def _run_headless(run, as_json: bool) -> tuple[int, object, Path | None]:
    """Run a study, printing progress on stderr; Ctrl-C keeps what is saved and exits 130.

    Returns the exit code, the session and its path (None, None after an interrupt).
    """
    saved: list = []
    started = time.monotonic()

    def report(progress) -> None:
        if progress.session_path is not None:
            saved[:] = [progress.session_path]
        _err(f"[{progress.phase} {time.monotonic() - started:.1f} s] {progress.message}")

    try:
        session, path = run(report)
    except KeyboardInterrupt:
        where = f"; finished variants are saved in {saved[-1]}" if saved else ""
        _err(f"interrupted{where}")
        return ExitCode.INTERRUPTED, None, None
    except InspectError as exc:
        if saved:
            exc.message += f" (measured so far: {saved[-1]})"
        raise
    _print_session(session, path, as_json)
    failed = any(v.status != "ok" for v in session.variants)
    return (ExitCode.FAILURE if failed else ExitCode.OK), session, path


@command("run")
def cmd_run(args: argparse.Namespace) -> int:
    request = study_request(args, args.argv)
    from inspector.study import run_requested_study

    return _run_headless(lambda report: run_requested_study(request, report, args.force), args.json)[0]


@command("show")
def cmd_show(args: argparse.Namespace) -> int:
    from sessions.storage import load, resolve

    path = resolve(args.session)
    session = load(path)
    if args.layers:
        _print_layers(session, path, args.variants, args.json)
    else:
        _print_session(session, path, args.json)
    return ExitCode.OK


def _print_layers(session, path, names: list[str] | None, as_json: bool) -> None:
    from sessions.layer_detail import layer_detail_table, layers_document
    from sessions.tables import table_text

    if as_json:
        _print_json(layers_document(session, str(path), names))
        return
    for variant in [session.variant(name) for name in names] if names else session.variants:
        table = layer_detail_table(variant)
        print(table.title)
        print(table_text(table))


@command("import")
def cmd_import(args: argparse.Namespace) -> int:
    from pathlib import Path

    from profilers.trt_import.folder import files_of_folder
    from profilers.trt_import.importer import ImportFiles, check_joinable, import_variant, new_session
    from sessions.storage import LOCK_WAIT_S, load, resolve, session_writer, sessions_dir

    if args.folder and (args.layers or args.profile or args.times):
        raise InputError("give a folder or --layers / --profile / --times, not both")
    if not args.folder and not args.layers and not args.profile:
        raise InputError("import needs a folder, --layers, --profile or both")
    found = files_of_folder(Path(args.folder)) if args.folder else None
    files = found.files if found else ImportFiles(
        layers=Path(args.layers) if args.layers else None,
        profile=Path(args.profile) if args.profile else None,
        times=Path(args.times) if args.times else None,
        find_metadata=not args.no_metadata_search,
    )
    files.metadata += [Path(m) for m in args.metadata]
    imported = import_variant(files, args.name, args.model, args.batch)
    variant = imported.variant
    if found:
        variant.notes.insert(0, f"from {args.folder}: took {', '.join(p.name for p in found.taken)}; "
                                f"left {', '.join(p.name for p in found.left) or 'nothing'}")
    variant.command = list(args.argv)
    if args.into:
        path = resolve(args.into)
        with session_writer(path, force=True, wait_s=LOCK_WAIT_S) as writer:  # read, add, write: one writer at a time
            session = load(path)
            if any(v.name == variant.name for v in session.variants):
                raise InputError(f"{path} already has a variant {variant.name!r}; pass --name")
            check_joinable(session, imported, args.force)
            session.variants.append(variant)
            writer.finish(session)
    else:
        session = new_session(imported, variant.command)
        path = Path(args.out) if args.out else sessions_dir() / f"import-{variant.name}-{session.study.created[:19].replace(':', '')}.json"
        session.variants.append(variant)
        with session_writer(path, args.force, LOCK_WAIT_S) as writer:
            writer.finish(session)
    if args.json:  # the text summary prints the notes
        for note in variant.notes:
            _err(note)
    _print_session(session, path, args.json)
    return ExitCode.OK


@command("groups")
def cmd_groups(args: argparse.Namespace) -> int:
    from pathlib import Path

    from sessions.group_report import group_document, group_text
    from sessions.groups import load_rules
    from sessions.storage import load, resolve

    session = load(resolve(args.session))
    for name in args.variants or []:
        session.variant(name)  # unknown names fail here, with the known ones listed
    rules = load_rules(Path(args.rules) if args.rules else None)
    if args.json:
        _print_json(group_document(session, args.by, rules, args.variants))
    else:
        print(terminal_text(group_text(session, args.by, rules, args.variants), keep_lines=True))
    return ExitCode.OK


def _threshold(text: str) -> float:
    """`5%` or `0.05`; a bare number of 1 or more (`10`: 10 % or 1000 %?) is refused as ambiguous."""
    import math

    percent = text.strip().endswith("%")
    try:
        value = float(text.strip()[:-1]) / 100 if percent else float(text)
    except ValueError:
        raise InputError(f"--threshold {text!r}: give a percentage such as 5% or a fraction such as 0.05") from None
    if not math.isfinite(value) or value < 0:
        raise InputError(f"--threshold {text!r}: must be a finite, non-negative change such as 5% or 0.05")
    if not percent and value >= 1:
        raise InputError(f"--threshold {text}: ambiguous (a fraction of {text}, or {text} %?); write {text}% or a fraction below 1")
    return value


def _pairs(texts: list[str]) -> list[tuple[str, str]]:
    pairs = []
    for text in texts:
        left, sep, right = text.partition("=")
        if not sep or not left or not right:
            raise InputError(f"--pair {text!r}: write VARIANT_A=VARIANT_B")
        pairs.append((left, right))
    return pairs


def _rules(path: str | None):
    from pathlib import Path

    from sessions.groups import load_rules

    return load_rules(Path(path) if path else None)


def _print_diff(diff, fmt: str) -> int:
    from sessions.diff_report import diff_document, diff_text

    if fmt == "json":
        _print_json(diff_document(diff))
    else:
        print(terminal_text(diff_text(diff, markdown=fmt == "md"), keep_lines=True))
    return ExitCode.FAILURE if diff.regressions else ExitCode.OK


@command("diff")
def cmd_diff(args: argparse.Namespace) -> int:
    from sessions.diff import diff_sessions
    from sessions.storage import load, resolve

    threshold = _threshold(args.threshold)
    path_a, path_b = resolve(args.a), resolve(args.b)
    diff = diff_sessions(load(path_a), load(path_b), _rules(args.rules), threshold, str(path_a), str(path_b), _pairs(args.pair))
    return _print_diff(diff, args.format)


@command("export")
def cmd_export(args: argparse.Namespace) -> int:
    from sessions import export
    from sessions.storage import load, resolve

    paths = [resolve(name) for name in args.session]
    if args.format in ("study", "matrix"):
        text = _export_sections(args.format, [(str(p), load(p)) for p in paths], args.rules)
        return _write_export(text, args.output, args.force)
    if len(paths) > 1:
        raise InputError(f"--format {args.format} takes one session; --format study takes several")
    path = paths[0]
    session = load(path)
    if args.format in ("csv", "json") and args.sections == "layers":
        from sessions.layer_detail import layers_csv, layers_document

        text = layers_csv(session) if args.format == "csv" else _json_text(layers_document(session, str(path)))
    elif args.format == "md":
        sections = [s.strip() for s in args.sections.split(",")] if args.sections else None
        unknown = [s for s in sections or [] if s not in export.SECTIONS]
        if unknown:
            raise InputError(f"unknown section {unknown[0]!r}; known: {', '.join(export.SECTIONS)}")
        text = export.export_markdown(session, _rules(args.rules), sections, str(path))
    elif args.format == "csv":
        text = export.export_csv(session)
    else:
        text = _json_text(export.export_json(session, str(path), _rules(args.rules)))
    return _write_export(text, args.output, args.force)


def _export_sections(fmt: str, sessions: list, rules: str | None) -> str:
    if fmt == "study":
        from sessions.study_export import study_markdown

        return study_markdown(sessions, _rules(rules))
    from sessions.matrix_tables import matrix_markdown
    from sessions.merge import merge_sessions

    merged = sessions[0][1] if len(sessions) == 1 and sessions[0][1].merge else merge_sessions(sessions, [])
    return matrix_markdown(merged)


def _write_export(text: str, output: str | None, force: bool) -> int:
    from sessions.tables import markdown_table_problems

    problems = markdown_table_problems(text)
    if problems:
        raise InspectError(f"export made a malformed table ({problems[0]}); nothing written")
    if output:
        from sessions.export import write_export

        write_export(Path(output), text, force)
        _err(f"wrote {output}")
    else:
        sys.stdout.write(terminal_text(text, keep_lines=True))
    return ExitCode.OK


@command("rerun")
def cmd_rerun(args: argparse.Namespace) -> int:
    import dataclasses

    from inspector.study import run_study
    from sessions.diff import diff_sessions
    from sessions.storage import load, resolve

    threshold = _threshold(args.threshold)
    path = resolve(args.session)
    old = load(path)
    if old.study.plan is None:
        raise InputError(f"{path} records no study plan (imported files cannot be rerun)")
    plan = dataclasses.replace(old.study.plan, out=args.out, raw_trace=None)
    code, new, new_path = _run_headless(lambda report: run_study(plan, old.study.command, report, args.force), False)
    if new is None:
        return code
    print()
    return _print_diff(diff_sessions(old, new, _rules(None), threshold, str(path), str(new_path)), "text")


@command("sweep")
def cmd_sweep(args: argparse.Namespace) -> int:
    from inspector.sweep.executors import ExecutorOptions, check_available
    from inspector.sweep.jobs import SweepFolder
    from inspector.sweep.matrix import check_imports, load_matrix
    from inspector.sweep.runner import default_folder, merge_finished, plan_jobs, run_jobs

    if args.gpus is not None and args.gpus < 1:
        raise InputError("--gpus must be at least 1")
    if not args.dry_run:
        check_available(args.executor)
    matrix = load_matrix(Path(args.matrix))  # its name checked as a folder name, its options against the spec
    check_imports(matrix, args.matrix, args.allow_imports)
    folder = SweepFolder(Path(args.out) if args.out else default_folder(matrix))
    remote = args.executor == "slurm" or (args.executor == "ray" and args.ray_address)
    where = args.resolve or ("job" if remote else "here")
    jobs = plan_jobs(matrix, args.matrix, folder, lambda line: _err(f"[sweep] {line}"), where)
    if args.dry_run:
        return _print_plans(folder, jobs, args.json)
    options = ExecutorOptions(args.gpus, args.ray_address, args.partition, args.time_limit, args.submitit_cluster)
    with folder.lock():
        outcomes, interrupted = run_jobs(folder, jobs, args.executor, options, lambda line: _err(f"[sweep] {line}"))
        merged = merge_finished(folder, jobs, args.argv)
    _print_outcomes(folder, jobs, outcomes, merged, args.json)
    if interrupted:
        return ExitCode.INTERRUPTED
    return ExitCode.OK if all(o.state in ("done", "skipped") and not o.error for o in outcomes.values()) else ExitCode.FAILURE


def _print_plans(folder, jobs, as_json: bool) -> int:
    from sessions.tables import render_text

    finished = [job for job in jobs if folder.finished(job.key)]
    if as_json:
        _print_json({"folder": str(folder.root), "jobs": [{**job.__dict__, "finished": job in finished} for job in jobs]})
        return ExitCode.OK
    axes = list(jobs[0].axes) if jobs else []
    rows = [[job.key, *job.axes.values(), *_plan_columns(job), "finished" if job in finished else "to run"]
            for job in jobs]
    print(render_text(["key", *axes, "backend", "device", "tracer", "variants", "state"], rows))
    print(f"{len(jobs)} jobs, {len(finished)} finished earlier; folder {folder.root}")
    return ExitCode.OK


def _plan_columns(job) -> list[str]:
    """backend, device, tracer, variants of a job's plan; for a job resolved where it runs, what it asked for."""
    if job.plan is not None:
        plan = job.plan
        return [plan.backend, plan.device, plan.tracer, ",".join(v.name for v in plan.variants)]
    request, there = job.request, "(on the job's machine)"
    return [request.backend if request.backend != "auto" else there, request.device or there,
            request.tracer if request.tracer != "auto" else there, request.variants or there]


def _print_outcomes(folder, jobs, outcomes, merged, as_json: bool) -> None:
    from sessions.tables import render_text

    if as_json:
        _print_json({"folder": str(folder.root), "merged": str(merged) if merged else None,
                     "jobs": [{"axes": job.axes, "session": str(folder.session(job.key)), **outcomes[job.key].__dict__}
                              for job in jobs if job.key in outcomes]})
        return
    axes = list(jobs[0].axes) if jobs else []
    rows = [[job.key, *job.axes.values(), outcomes[job.key].state, outcomes[job.key].job_id,
             outcomes[job.key].error or str(folder.session(job.key))] for job in jobs if job.key in outcomes]
    print(render_text(["key", *axes, "state", "job id", "error or session"], rows))
    print(f"merged: {merged}" if merged else "merged: nothing (no job finished)")


@command("merge")
def cmd_merge(args: argparse.Namespace) -> int:
    from sessions.merge import collect, merge_sessions
    from sessions.storage import LOCK_WAIT_S, session_writer

    target = Path(args.out)
    sources, skipped = collect(args.sources, target)
    for line in skipped:
        _err(f"skipped: {line}")
    merged = merge_sessions(sources, args.argv)
    with session_writer(target, args.force, LOCK_WAIT_S) as writer:
        writer.finish(merged)
    _print_session(merged, target, args.json)
    return ExitCode.OK


@command("onnx")
def cmd_onnx(args: argparse.Namespace) -> int:
    from builders.onnx_files import write_onnx_files
    from builders.study_inputs import InputChoice, load_inputs
    from inspector.options import check_variant, validate_request_values
    from sessions.plan import parse_variants
    from sessions.tables import render_text

    variants = parse_variants(args.variants, args.fp8_recipes, args.fp8_exclude)
    choice = InputChoice(args.model, args.batch, args.calib_count, args.images, args.checkpoint, args.seed)
    validate_request_values({name: getattr(choice, name) for name in ("model", "batch", "images", "calib_count",
                                                                       "checkpoint", "seed")})
    for variant in variants:  # the recipes named, before the model loads
        check_variant(variant)
    inputs = load_inputs(choice)
    files = write_onnx_files(inputs.model, list(variants), inputs.static_input, inputs.calibration, Path(args.out))
    if args.json:
        _print_json([{"variant": f.variant, "path": str(f.path), **f.counts.__dict__} for f in files])
        return ExitCode.OK
    rows = [[f.variant, str(f.path), f.counts.convolutions, f.counts.quantized_convolutions, f.counts.quantize, f.counts.dequantize] for f in files]
    print(render_text(["variant", "file", "convs", "quantized convs", "Q", "DQ"], rows))
    return ExitCode.OK


@command("probe")
def cmd_probe(args: argparse.Namespace) -> int:
    from inspector.probe.fp8_probe import ProbeOptions, run_probe
    from sessions.groups import load_rules
    from sessions.probe_summary import probe_document, probe_text

    fields = ProbeOptions.__dataclass_fields__
    options = ProbeOptions(**{k: tuple(v) if isinstance(v, list) else v for k, v in vars(args).items() if k in fields})
    session, path = run_probe(options, args.argv, lambda message: _err(f"[probe] {message}"))
    if args.json:
        _print_json(probe_document(session, load_rules(), str(path)))
    else:
        print(terminal_text(probe_text(session, load_rules()), keep_lines=True))
        print(f"session: {path}")
    return ExitCode.OK


@command("sessions")
def cmd_sessions(args: argparse.Namespace) -> int:
    from sessions.storage import list_sessions, sessions_dir
    from sessions.tables import render_text

    entries, problems = list_sessions()
    for problem in problems:
        _err(f"skipped: {problem}")
    if args.json:
        _print_json([{**e.__dict__, "path": str(e.path)} for e in entries])
        return ExitCode.OK
    if not entries:
        _err(f"no sessions in {sessions_dir()}")
        return ExitCode.OK
    rows = [[e.path.name, e.model, e.created, e.gpu, f"{e.backend}/{e.device}", ",".join(e.variants)] for e in entries]
    print(render_text(["session", "model", "created", "GPU / CPU", "backend", "variants"], rows))
    return ExitCode.OK


@command("open")
def cmd_open(args: argparse.Namespace) -> int:
    from inspector.tui import open_tui

    if not _interactive():
        from sessions.storage import load, resolve

        if args.session:
            load(resolve(args.session))  # a bad file is still named as such
        raise InputError("open needs a terminal; without one use `show`, `groups` or `export`")
    return open_tui(session=args.session)


def _interactive() -> bool:
    return sys.stdin.isatty() and sys.stdout.isatty()


def _quiet_libraries() -> None:
    """Before any library loads: no progress bars, no C++ log lines of torch.profiler, no library warnings."""
    import os

    os.environ.setdefault("KINETO_LOG_LEVEL", "5")  # torch.profiler's C++ errors on machines without a GPU
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # transformers' "Loading weights" bars
    _show_library_warnings(False)


def _show_library_warnings(verbose: bool) -> None:
    """stderr holds our own lines: library warnings (timm, torch, transformers, ModelOpt: FutureWarning,
    UserWarning, ...) and log records below ERROR (torch's, transformers' load reports) are dropped; with -v
    they are shown, each warning once per place."""
    import logging
    import warnings

    warnings.simplefilter("default" if verbose else "ignore")
    logging.disable(logging.NOTSET if verbose else logging.WARNING)


@contextlib.contextmanager
def _interrupt_on_sigterm() -> Iterator[None]:
    """While a command runs, SIGTERM (a scheduler's cancel, `kill`) ends it like Ctrl-C: finished variants kept,
    exit 130. The previous handler comes back afterwards: `main` called in-process (tests) leaves none behind."""
    import signal
    import threading

    def handler(signum, frame):
        raise KeyboardInterrupt

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def main(argv: Sequence[str] | None = None) -> int:
    with _interrupt_on_sigterm():
        return _main(argv)


def _main(argv: Sequence[str] | None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if sys.stdout is None:  # started with stdout closed (`>&-`): the data has nowhere to go
        _err("error: standard output is closed; redirect it to a file or /dev/null")
        return ExitCode.FAILURE
    _quiet_libraries()
    parser = build_parser()
    bare_model = bool(argv) and not argv[0].startswith("-") and argv[0] not in COMMANDS
    if bare_model and _interactive():
        try:
            from inspector.tui import open_tui

            args = parser.parse_args(["run", *argv])
            _show_library_warnings(args.verbose)
            return open_tui(request=study_request(args, ["trt-inspect", *argv]), force=args.force)
        except InspectError as exc:
            _err(f"error: {exc.message}")
            return exc.exit_code
    if bare_model:
        argv = ["run", *argv]
    if not argv:
        if _interactive():
            from inspector.tui import open_tui

            return open_tui()
        parser.print_help(sys.stderr)
        return ExitCode.USAGE
    args = parser.parse_args(argv)
    args.argv = ["trt-inspect", *argv]
    _show_library_warnings(args.verbose)
    try:
        return COMMANDS[args.command](args)
    except InspectError as exc:
        _err(f"error: {exc.message or type(exc).__name__}")
        return exc.exit_code
    except KeyboardInterrupt:
        _err("interrupted")
        return ExitCode.INTERRUPTED
    except BrokenPipeError:
        return ExitCode.OK
    except OSError as exc:  # the output could not be written (a full disk, a terminal gone), or a file named in it
        where = f"{exc.filename}: " if exc.filename else ""
        _err(f"error: {where}{exc.strerror or exc}")
        return ExitCode.FAILURE


def run() -> None:
    """The console script: `main` with SIGTERM as Ctrl-C for the whole process, up to its exit."""
    try:
        with _interrupt_on_sigterm():  # `main` restores this one, so a SIGTERM just after it returns is caught too
            code = main()
            _hold_signals()
    except KeyboardInterrupt:  # a SIGTERM or Ctrl-C just as the command returned: the documented exit
        _hold_signals()
        _err("interrupted")
        code = ExitCode.INTERRUPTED
    if _holds_cuda():
        # Everything is saved; CUDA's and CUPTI's teardown at exit took 2-2.4 s on the H200 after a study
        # (tests/data/h200/mainjob-earlier-runs.txt, A), so the process ends without it, once its output is out.
        os._exit(_flushed(code))
    sys.exit(code)


def _hold_signals() -> None:
    """Once the command is done (its session saved, its output written), SIGINT and SIGTERM wait: the process ends
    with the command's own code, never killed half-way through the interpreter's teardown (exit 143, no line)."""
    import signal

    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})


def _flushed(code: int) -> int:
    """`code` once stdout and stderr are flushed; 120, as Python's own exit returns, where that failed."""
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except OSError:
            code = code or 120
    return code


def _holds_cuda() -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and torch.cuda.is_initialized()

