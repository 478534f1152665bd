"""`trt-inspect probe MODEL`: every convolution and linear in fp16 and in real FP8 kernels, timed alone."""

from __future__ import annotations

import argparse
from typing import Any

from inspector.commands.output import check_out, err, print_json
from inspector.options import add_arguments
from sessions.documents.errors import ExitCode
from sessions.documents.options import PROBE
from sessions.reports.tables import terminal_text

NAME = "probe"
BUILDS_MODELS = True  # the CLI checks the torch / torchvision pair before it runs


def add_parser(sub: Any) -> None:
    p = sub.add_parser(NAME, help="every convolution and linear in fp16 and in real FP8 kernels, timed alone (FP8 GPU)")
    add_arguments(p, PROBE)
    p.add_argument("--force", action="store_true", help="replace the session at --out")
    p.add_argument("--json", action="store_true")


def run(args: argparse.Namespace) -> int:
    check_out(args.out, "session", args.force)  # before the probe's modules (torch) load
    from inspector.probe.fp8_probe import ProbeOptions, run_probe
    from sessions.analyses.groups import load_rules
    from sessions.reports.probe_summary import probe_document, probe_text

    fields = ProbeOptions.__dataclass_fields__
    values: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in vars(args).items() if k in fields}
    options = ProbeOptions(**values)
    session, path = run_probe(options, args.argv, lambda message: err(f"[probe] {message}"), args.force)
    if args.json:
        print_json(probe_document(session, load_rules(), str(path)))
    else:
        print(terminal_text(probe_text(session, load_rules()), keep_lines=True))
        print(terminal_text(f"session: {path}"))
    return ExitCode.OK
