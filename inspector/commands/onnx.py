"""`trt-inspect onnx MODEL`: the ONNX files a TensorRT study builds from, with their Q/DQ counts."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from inspector.commands.output import err, print_json
from inspector.options import add_arguments
from sessions.documents.errors import ExitCode
from sessions.documents.options import ONNX

NAME = "onnx"
BUILDS_MODELS = True  # the CLI checks the torch / torchvision pair before it runs


def add_parser(sub: Any) -> None:
    p = sub.add_parser(NAME, help="write the ONNX files a TensorRT study builds from, with Q/DQ counts")
    add_arguments(p, ONNX)
    p.add_argument("--out", default=".", help="folder for the .onnx files")
    p.add_argument("--json", action="store_true")


def run(args: argparse.Namespace) -> int:
    from builders.recipes.fp8 import preflight
    from builders.study_inputs import InputChoice, load_inputs
    from builders.tensorrt.onnx_files import write_onnx_files
    from inspector.options import check_variant, validate_request_values
    from sessions.documents.plan import named_variants, parse_variants
    from sessions.reports.tables import render_text

    variants = parse_variants(args.variants, args.fp8_recipes, args.fp8_exclude)
    choice = InputChoice(args.model, args.batch, args.calib_count, args.images, args.checkpoint, args.seed)
    validate_request_values({name: getattr(choice, name) for name in ("model", "batch", "images", "calib_count",
                                                                       "checkpoint", "seed")})
    for variant in variants:  # the recipes named, before the model loads
        check_variant(variant)
    # as a study's: a recipe the user named that selects nothing new fails here, a default one is left out with a note
    variants, notes = preflight(args.model, args.checkpoint, variants,
                                named_variants(args.variants, args.fp8_recipes, args.fp8_exclude))
    for note in notes:
        err(f"note: {note}")
    inputs = load_inputs(choice)
    files = write_onnx_files(inputs.model, list(variants), inputs.static_input, inputs.calibration, Path(args.out))
    if args.json:
        print_json([{"variant": f.variant, "path": str(f.path), **f.counts.__dict__} for f in files])
        return ExitCode.OK
    rows: list[list[str | int]] = [[f.variant, str(f.path), f.counts.convolutions, f.counts.quantized_convolutions,
                                    f.counts.quantize, f.counts.dequantize] for f in files]
    print(render_text(["variant", "file", "convs", "quantized convs", "Q", "DQ"], rows))
    return ExitCode.OK
