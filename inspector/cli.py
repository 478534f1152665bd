"""The headless command line, twin of the TUI. Imports nothing heavy until a command needs it.

stdout carries data only (tables, JSON, Markdown); progress and errors go to stderr as one line each.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from inspector.request import BACKEND_CHOICES, TRACER_CHOICES
from sessions.errors import ExitCode, InputError, InspectError

COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {}


def command(name: str):
    def register(fn: Callable[[argparse.Namespace], int]):
        COMMANDS[name] = fn
        return fn

    return register


def _err(message: str) -> None:
    print(f"trt-inspect: {message}", file=sys.stderr, flush=True)


def _add_study_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", help="timm name (senet154), Hugging Face id or folder, hf:<model_type>, or an .onnx file")
    p.add_argument("--backend", default="auto", choices=list(BACKEND_CHOICES))
    p.add_argument("--device", choices=["cuda", "cpu"], help="default: cuda where a GPU is visible")
    p.add_argument("--variants", help="comma list of fp32, fp16, bf16, fp8, fp8-<recipe> (default: fp32,fp16,fp8 on CUDA, fp32,bf16,fp8 on CPU)")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--fp8-recipe", "--fp8-layout", action="append", dest="fp8_recipes", default=[], metavar="RECIPE",
                   help="all | no-se | no-se-no-first-stage (alias no-se-no-layer1) | encoder-linears; repeatable "
                        "(default: all and no-se; recipes in builders/fp8_recipes.toml)")
    p.add_argument("--fp8-exclude", action="append", default=[], metavar="PATTERN",
                   help="module paths kept out of FP8 (fnmatch, e.g. '*.se.*'); repeatable")
    p.add_argument("--images", help="folder of images (class folders or flat) for calibration and quality; default: scikit-image's photographs")
    p.add_argument("--calib-count", type=int, default=16)
    p.add_argument("--eval-count", type=int, help="images for quality, disjoint from the calibration images, both "
                   "taken at a fixed stride through --images (default: every image, calibration images included)")
    p.add_argument("--rounds", type=int)
    p.add_argument("--iters", type=int)
    p.add_argument("--warmup", type=float, dest="warmup_s", metavar="SECONDS")
    p.add_argument("--switch-warmup", type=int, metavar="N",
                   help="inferences discarded after each switch of variant inside a round (default: 10 on CUDA, 1 on CPU)")
    p.add_argument("--threads", type=int, metavar="N", help="PyTorch CPU threads (default: PyTorch's choice)")
    p.add_argument("--tracer", default="auto", choices=list(TRACER_CHOICES))
    p.add_argument("--trace-calls", type=int, default=1)
    p.add_argument("--checkpoint", help="weights: .safetensors or a torch file (loaded with weights_only=True)")
    p.add_argument("--opt-level", type=int, default=3, help="TensorRT builder_optimization_level (0-5)")
    p.add_argument("--seed", type=int, default=0, help="seed of random weights (default 0)")
    p.add_argument("--out", help="session file to write (default: the user-data folder)")
    p.add_argument("--raw-trace", metavar="DIR", help="also write each variant's raw tracer records to DIR")
    p.add_argument("--json", action="store_true", help="print a JSON summary on stdout")


def _add_session_commands(sub) -> None:
    p = sub.add_parser("open", help="open a saved session in the TUI")
    p.add_argument("session", nargs="?", help="session file or name (default: the session browser)")

    p = sub.add_parser("show", help="print a session's variant table")
    p.add_argument("session")
    p.add_argument("--json", action="store_true")

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
    p.add_argument("--layers", required=True, help="layer information (--exportLayerInfo or IEngineInspector JSON)")
    p.add_argument("--profile", help="per-layer profile (--exportProfile)")
    p.add_argument("--times", help="per-inference times (--exportTimes)")
    p.add_argument("--name", help="variant name (default: from the file name)")
    target = p.add_mutually_exclusive_group()
    target.add_argument("--into", help="add the variant to this existing session")
    target.add_argument("--out", help="session file to write (default: the user-data folder)")
    p.add_argument("--json", action="store_true")


def _add_report_commands(sub) -> None:
    p = sub.add_parser("diff", help="compare two sessions; exit 1 on a regression past the threshold")
    p.add_argument("a", help="the older session (baseline)")
    p.add_argument("b", help="the newer session")
    p.add_argument("--threshold", default="5%", help="relative change that counts (default 5%%)")
    p.add_argument("--format", default="text", choices=["text", "md", "json"])
    p.add_argument("--groups", dest="rules", help="TOML file of extra grouping rules")

    p = sub.add_parser("export", help="a session as README-ready Markdown, or CSV / JSON")
    p.add_argument("session")
    p.add_argument("--format", default="md", choices=["md", "csv", "json"])
    p.add_argument("--sections", help="comma list of comparison,quality,groups,method,environment,recipe,rerun")
    p.add_argument("--groups", dest="rules", help="TOML file of extra grouping rules")
    p.add_argument("-o", "--output", help="write here instead of stdout (refuses to overwrite without --force)")
    p.add_argument("--force", action="store_true")

    p = sub.add_parser("rerun", help="repeat a study with its recorded plan, then diff against it")
    p.add_argument("session")
    p.add_argument("--out", help="session file for the new run")
    p.add_argument("--threshold", default="5%")


def _add_onnx_command(sub) -> None:
    p = sub.add_parser("onnx", help="write the ONNX files a TensorRT study builds from, with Q/DQ counts")
    p.add_argument("model")
    p.add_argument("--variants", default="fp16,fp8")
    p.add_argument("--fp8-recipe", "--fp8-layout", action="append", dest="fp8_recipes", default=[], metavar="RECIPE")
    p.add_argument("--fp8-exclude", action="append", default=[], metavar="PATTERN")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--calib-count", type=int, default=16)
    p.add_argument("--images")
    p.add_argument("--checkpoint")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=".", help="folder for the .onnx files")
    p.add_argument("--json", action="store_true")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="trt-inspect",
        description="Profile fp16 against FP8 engines layer by layer and kernel by kernel. "
        "`trt-inspect MODEL` runs a whole study (the TUI on a terminal, headless otherwise).",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    _add_study_options(sub.add_parser("run", help="run a study headless and save its session"))
    for add in (_add_session_commands, _add_import_command, _add_report_commands, _add_onnx_command):
        add(sub)
    return parser


def study_request(args: argparse.Namespace, command: Sequence[str]):
    from inspector.request import StudyRequest

    fields = StudyRequest.__dataclass_fields__
    values = {k: v for k, v in vars(args).items() if k in fields and k != "command"}
    values["fp8_recipes"] = tuple(values.get("fp8_recipes") or ())
    values["fp8_exclude"] = tuple(values.get("fp8_exclude") or ())
    return StudyRequest(**values, command=tuple(command))


def _print_json(document) -> None:
    import orjson

    sys.stdout.write(orjson.dumps(document, option=orjson.OPT_INDENT_2).decode() + "\n")


def _print_summary(session, path) -> None:
    from sessions.summary import SUMMARY_HEADERS, summary_rows
    from sessions.tables import render_text

    gpu = session.environment.gpu.name if session.environment.gpu else (session.environment.cpu or "GPU unknown")
    print(f"{session.study.model}  batch {session.study.batch}  {session.study.backend} on {session.study.device} ({gpu})")
    print(render_text(SUMMARY_HEADERS, summary_rows(session)))
    baseline = session.baseline()
    if baseline is not None:
        print(f"x = {baseline.name} median / variant median (above 1 is faster)")
    if any(v.simulated for v in session.variants):
        print("simulated variants: numerics of the recipe, not the speed of its kernels")
    from sessions.summary import unstable_variants

    unstable = unstable_variants(session)
    if unstable:
        print(f"CoV above 2.5 % for {', '.join(unstable)}: lock clocks or time longer before trusting small differences")
    if path is not None:
        print(f"session: {path}")


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

    def report(progress) -> None:
        if progress.session_path is not None:
            saved[:] = [progress.session_path]
        _err(f"[{progress.phase}] {progress.message}")

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

    return _run_headless(lambda report: run_requested_study(request, report), args.json)[0]


@command("show")
def cmd_show(args: argparse.Namespace) -> int:
    from sessions.storage import load, resolve

    path = resolve(args.session)
    session = load(path)
    _print_session(session, path, args.json)
    return ExitCode.OK


@command("import")
def cmd_import(args: argparse.Namespace) -> int:
    from pathlib import Path

    from profilers.trtexec_import import import_variant, new_session
    from sessions.storage import load, resolve, save, sessions_dir

    variant, dims = import_variant(
        Path(args.layers), Path(args.profile) if args.profile else None, Path(args.times) if args.times else None, args.name
    )
    if args.into:
        path = resolve(args.into)
        session = load(path)
        if any(v.name == variant.name for v in session.variants):
            raise InputError(f"{path} already has a variant {variant.name!r}; pass --name")
    else:
        session = new_session(variant.name, dims, args.argv, variant.latency is not None)
        path = Path(args.out) if args.out else sessions_dir() / f"import-{variant.name}-{session.study.created[:19].replace(':', '')}.json"
    session.variants.append(variant)
    save(session, path)
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
        print(group_text(session, args.by, rules, args.variants))
    return ExitCode.OK


def _threshold(text: str) -> float:
    try:
        value = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        raise InputError(f"--threshold {text!r}: give a percentage such as 5% or a fraction such as 0.05") from None
    if value < 0:
        raise InputError("--threshold must not be negative")
    return value


def _rules(path: str | None):
    from pathlib import Path

    from sessions.groups import load_rules

    return load_rules(Path(path) if path else None)


def _print_diff(diff, fmt: str) -> int:
    from sessions.diff_report import diff_document, diff_text

    if fmt == "json":
        _print_json(diff_document(diff))
    else:
        print(diff_text(diff, markdown=fmt == "md"))
    return ExitCode.FAILURE if diff.regressions else ExitCode.OK


@command("diff")
def cmd_diff(args: argparse.Namespace) -> int:
    from sessions.diff import diff_sessions
    from sessions.storage import load, resolve

    threshold = _threshold(args.threshold)
    path_a, path_b = resolve(args.a), resolve(args.b)
    diff = diff_sessions(load(path_a), load(path_b), _rules(args.rules), threshold, str(path_a), str(path_b))
    return _print_diff(diff, args.format)


@command("export")
def cmd_export(args: argparse.Namespace) -> int:
    from pathlib import Path

    from sessions import export
    from sessions.storage import load, resolve

    path = resolve(args.session)
    session = load(path)
    if args.format == "md":
        sections = [s.strip() for s in args.sections.split(",")] if args.sections else None
        unknown = [s for s in sections or [] if s not in export.SECTIONS]
        if unknown:
            raise InputError(f"unknown section {unknown[0]!r}; known: {', '.join(export.SECTIONS)}")
        text = export.export_markdown(session, _rules(args.rules), sections, str(path))
    elif args.format == "csv":
        text = export.export_csv(session)
    else:
        import orjson

        text = orjson.dumps(export.export_json(session, str(path)), option=orjson.OPT_INDENT_2).decode() + "\n"
    if args.output:
        target = Path(args.output)
        if target.exists() and not args.force:
            raise InputError(f"{target} exists; pass --force to overwrite it")
        target.write_text(text)
        _err(f"wrote {target}")
    else:
        sys.stdout.write(text)
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
    code, new, new_path = _run_headless(lambda report: run_study(plan, old.study.command, report), False)
    if new is None:
        return code
    print()
    return _print_diff(diff_sessions(old, new, _rules(None), threshold, str(path), str(new_path)), "text")


@command("onnx")
def cmd_onnx(args: argparse.Namespace) -> int:
    from builders.onnx_files import write_onnx_files
    from builders.study_inputs import load_study_inputs
    from sessions.plan import StudyPlan, TimingPlan, parse_variants
    from sessions.tables import render_text

    variants = parse_variants(args.variants, args.fp8_recipes, args.fp8_exclude)
    plan = StudyPlan(model=args.model, backend="torch", device="cpu", variants=variants, batch=args.batch,
                     timing=TimingPlan(0, 1, 1), tracer="none", images=args.images, calib_count=args.calib_count,
                     checkpoint=args.checkpoint, seed=args.seed)
    inputs = load_study_inputs(plan)
    files = write_onnx_files(inputs.model, list(variants), inputs.static_input, inputs.calibration, Path(args.out))
    if args.json:
        _print_json([{"variant": f.variant, "path": str(f.path), **f.counts.__dict__} for f in files])
        return ExitCode.OK
    rows = [[f.variant, str(f.path), f.counts.convolutions, f.counts.quantized_convolutions, f.counts.quantize, f.counts.dequantize] for f in files]
    print(render_text(["variant", "file", "convs", "quantized convs", "Q", "DQ"], rows))
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
    """Keep stderr to our own progress lines: library deprecation chatter is not the user's business."""
    import os
    import warnings

    os.environ.setdefault("KINETO_LOG_LEVEL", "5")  # torch.profiler's C++ errors on machines without a GPU
    warnings.filterwarnings("ignore", category=FutureWarning)
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    warnings.filterwarnings("ignore", module=r"modelopt(\.|$)")


def _interrupt_on_sigterm() -> None:
    """SIGTERM (a scheduler's cancel, `kill`) ends a study like Ctrl-C: finished variants kept, exit 130."""
    import signal
    import threading

    def handler(signum, frame):
        raise KeyboardInterrupt

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, handler)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    _quiet_libraries()
    _interrupt_on_sigterm()
    parser = build_parser()
    bare_model = bool(argv) and not argv[0].startswith("-") and argv[0] not in COMMANDS
    if bare_model and _interactive():
        try:
            from inspector.tui import open_tui

            args = parser.parse_args(["run", *argv])
            return open_tui(request=study_request(args, ["trt-inspect", *argv]))
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
    try:
        return COMMANDS[args.command](args)
    except InspectError as exc:
        _err(f"error: {exc.message}")
        return exc.exit_code
    except KeyboardInterrupt:
        _err("interrupted")
        return ExitCode.INTERRUPTED
    except BrokenPipeError:
        return ExitCode.OK


def run() -> None:
    sys.exit(main())

