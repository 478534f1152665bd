"""The headless command line, twin of the TUI: the parser, the dispatch to one module per command
(`inspector.commands`) and the console script's process. Imports nothing heavy until a command needs it.

stdout carries data only (tables, JSON, Markdown); progress and errors go to stderr as one line each.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from inspector import process, torch_stack
from inspector.commands import (
    diff,
    export,
    groups,
    import_files,
    list_sessions,
    merge,
    onnx,
    open_session,
    probe,
    rerun,
    show,
    sweep,
)
from inspector.commands import run as run_command
from inspector.commands.output import check_out, err, interactive
from inspector.commands.run import study_request
from sessions.documents.errors import ExitCode, InspectError

# In the order `--help` lists them.
COMMAND_MODULES = (run_command, open_session, show, groups, list_sessions, import_files, diff, export, rerun, onnx,
                   probe, sweep, merge)
COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {module.NAME: module.run for module in COMMAND_MODULES}
MODEL_COMMANDS = frozenset(module.NAME for module in COMMAND_MODULES if getattr(module, "BUILDS_MODELS", False))
# the commands that run one study: the collector is held from their start until it is set up (`process.settle_heap`)
STUDY_COMMANDS = frozenset(module.NAME for module in COMMAND_MODULES if getattr(module, "RUNS_A_STUDY", False))

__all__ = ["COMMANDS", "build_parser", "main", "run", "study_request"]


class _Parser(argparse.ArgumentParser):
    """Argument errors are one line on stderr, like every other error; `--help` still prints the usage.

    A command whose arguments come from a registry that imports heavy modules (`import`: its file roles) passes
    `arguments`, a function that adds them; they are added when the command's line is parsed or its help
    printed, and arguments added through `then` follow them, so building the parser imports nothing heavy.
    """

    def __init__(self, *args: Any, arguments: Callable[[argparse.ArgumentParser], object] | None = None,
                 **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._pending = [arguments] if arguments else []

    def then(self, add: Callable[[argparse.ArgumentParser], object]) -> None:
        """`add` arguments now, or after the deferred ones where those are not added yet."""
        if self._pending:
            self._pending.append(add)
        else:
            add(self)

    def _complete(self) -> None:
        pending, self._pending = self._pending, []
        for add in pending:
            add(self)

    def parse_known_args(self, *args: Any, **kwargs: Any) -> Any:
        self._complete()
        return super().parse_known_args(*args, **kwargs)

    def format_usage(self) -> str:
        self._complete()
        return super().format_usage()

    def format_help(self) -> str:
        self._complete()
        return super().format_help()

    def error(self, message: str) -> NoReturn:
        self.exit(ExitCode.USAGE, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="trt-inspect",
        description="Profile fp16 against FP8 engines layer by layer and kernel by kernel. "
        "`trt-inspect MODEL` runs a whole study (the TUI on a terminal, headless otherwise).",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in COMMAND_MODULES:
        module.add_parser(sub)
    for each in sub.choices.values():
        each.then(lambda p: p.add_argument("-v", "--verbose", action="store_true",
                                           help="also show the libraries' warnings (each once)"))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    with process.interrupt_on_sigterm():
        return _main(argv)


def _main(argv: Sequence[str] | None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if sys.stdout is None:  # started with stdout closed (`>&-`): the data has nowhere to go
        err("error: standard output is closed; redirect it to a file or /dev/null")
        return ExitCode.FAILURE
    process.quiet_libraries()
    parser = build_parser()
    bare_model = bool(argv) and not argv[0].startswith("-") and argv[0] not in COMMANDS
    if bare_model and interactive():
        try:
            from inspector.tui import open_tui

            args = parser.parse_args(["run", *argv])
            process.show_library_warnings(args.verbose)
            check_out(args.out, "session", args.force)  # before the screen opens and the set-up starts, as `run`
            torch_stack.check()
            return open_tui(request=study_request(args, ["trt-inspect", *argv]), force=args.force)
        except InspectError as exc:
            err(f"error: {exc.message}")
            return exc.exit_code
    if bare_model:
        argv = ["run", *argv]
    if not argv:
        if interactive():
            from inspector.tui import open_tui

            return open_tui()
        parser.print_help(sys.stderr)
        return ExitCode.USAGE
    args = parser.parse_args(argv)
    args.argv = ["trt-inspect", *argv]
    process.show_library_warnings(args.verbose)
    try:
        with process.collection_held(args.command in STUDY_COMMANDS):
            if args.command in MODEL_COMMANDS:
                torch_stack.check()
            return COMMANDS[args.command](args)
    except InspectError as exc:
        err(f"error: {exc.message or type(exc).__name__}")
        return exc.exit_code
    except KeyboardInterrupt:
        err("interrupted")
        return ExitCode.INTERRUPTED
    except BrokenPipeError:
        return ExitCode.OK
    except OSError as exc:  # the output could not be written (a full disk, a terminal gone), or a file named in it
        where = f"{exc.filename}: " if exc.filename else ""
        err(f"error: {where}{exc.strerror or exc}")
        return ExitCode.FAILURE


def run() -> None:
    """The console script: `main` with SIGTERM as Ctrl-C for the whole process, up to its exit."""
    try:
        # `main` restores this one, so a SIGTERM just after it returns is caught too
        with process.interrupt_on_sigterm():
            code = main()
            process.hold_signals()
    except KeyboardInterrupt:  # a SIGTERM or Ctrl-C just as the command returned: the documented exit
        process.hold_signals()
        err("interrupted")
        code = ExitCode.INTERRUPTED
    process.exit_process(code)


if __name__ == "__main__":  # `python -m inspector.cli`, as `python -m inspector`
    run()
