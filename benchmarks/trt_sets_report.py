"""Every engine of ../shared/fixtures/trt and ../shared/fixtures/trtexec as the tool imports it, beside the raw
files' truth.

    python benchmarks/trt_sets_report.py > benchmarks/trt_sets_report.md

One row per engine: layers; the summed per-layer time against trtexec's end-to-end median (GPU compute
time from `--exportTimes`) where both exist; layers whose precision the files state (exact) and those
they do not (unknown); the role checks of `tests/profilers/test_trt_sets_truth.py` that agree (reformat, Q/DQ,
shuffle, depthwise, Myelin); the verdict. Then the pairs of the fixtures' README, diffed: how the
layers paired, what fused, what could not be matched, and the regressions found.
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from profilers.trt_import.importer import ImportFiles, import_variant, new_session
from sessions.analyses.diff import diff_sessions
from sessions.analyses.groups import load_rules, role_of
from sessions.analyses.layer_match import align_layers
from sessions.documents.errors import InputError
from tests.trt_sets import SHARED, Engine, engines, set_folders, summed_profile_ms, truth

RULES = load_rules()
PAIRS = [  # the fixtures README's pairs: (A, B), each a folder under ../shared/fixtures
    ("trt/trt10-mobilenetv2-tf32-onnxapi-rtx3060", "trtexec/trt10-mobilenetv2-fp16-trtexec"),
    ("trt/trt10-mobilenetv2-tf32-onnxapi-rtx3060", "trt/trt10-mobilenetv2-fp16-torchtrt-api"),
    ("trt/trt10-resnet18-tf32-onnxapi-rtx3060", "trt/trt10-resnet18-fp16-trtexec-rtx3060"),
    ("trt/trt8.4-resnet-a100-fp32", "trtexec/trt8-resnet-a100-fp16"),
    ("trt/trt8.4-resnet-a100-fp32", "trtexec/trt8-resnet-a100-int8-qat"),
    ("trt/trt8.4-resnet-a100-fp32", "trt/trt8.4-resnet-a100-int8-qat-residual"),
    ("trt/trt8.4-resnet-a100-fp32", "trt/trt8.4-resnet-a100-int8-qat-residual-qgap"),
    ("trt/trt8.4-tf-resnet50-rtx3090-fp32", "trt/trt8.4-tf-resnet50-rtx3090-fp16"),
    ("trt/trt8.4-tf-resnet50-rtx3090-fp16", "trt/trt8.4-tf-resnet50-rtx3090-int8-qat"),
    ("trt/trt8.2-mobilenetv2-int8-qat-titanrtx", "trt/trt8.2-mobilenetv2-residuals-int8-qat-titanrtx"),
    ("trtexec/trt8.4-mobilenetv2-int8-qat", "trt/trt8.4-mobilenetv2-residuals-int8-qat"),
    ("trt/trt8.2-mobilenetv2-int8-qat-titanrtx", "trtexec/trt8.4-mobilenetv2-int8-qat"),
    ("trt/trt8.2-mobilenetv2-residuals-int8-qat-titanrtx", "trt/trt8.4-mobilenetv2-residuals-int8-qat"),
    ("trt/trt10.14-mnist-cnn-fp32-rtx6000ada", "trt/trt10.16-mnist-cnn-fp32-h100"),
    ("trt/trt7.1-googlenet-xavier-dla-gpu-profiles/googlenet_gpu_transition_at_-1.profile",
     "trt/trt7.1-googlenet-xavier-dla-gpu-profiles/googlenet_dla_mark_at_-1.profile"),
]


def files_of(engine: Engine) -> ImportFiles:
    return ImportFiles.of(layers=engine.layers, profile=engine.profile, times=engine.times, metadata=list(engine.logs))


def engine_at(label: str) -> Engine:
    """`trt/FOLDER` (its one engine) or `trt/FOLDER/FILE.profile` (the engine of that profile)."""
    path = SHARED / label
    if path.is_file():
        return next(e for e in engines(path.parent) if e.profile == path)
    return engines(path)[0]


def row(engine: Engine) -> str:
    expected = truth(engine)
    try:
        variant = import_variant(files_of(engine)).variant
    except InputError as exc:
        return f"| {engine.label} | {expected.layers} | - | - | - | not imported: {exc} |"
    roles = Counter(role_of(layer, RULES) for layer in variant.layers)
    checks = [roles["reformat"] + roles["DLA"] == expected.reformat + expected.dla,
              roles["quantize / dequantize"] == expected.qdq,
              roles["shuffle / slice / padding"] == expected.shuffle,
              roles["depthwise convolution"] == expected.depthwise,
              roles["Myelin region"] == expected.myelin]
    summed = summed_profile_ms(engine)
    end_to_end = variant.latency.median_ms if variant.latency else None
    times = "no profile" if summed is None else f"{summed:.3f} ms" + (
        f" vs {end_to_end:.3f} ms ({summed / end_to_end:.2f}x)" if end_to_end else " (no --exportTimes)")
    exact = sum(layer.precision is not None for layer in variant.layers)
    ok = len(variant.layers) == expected.layers and all(checks)
    return (f"| {engine.label} | {len(variant.layers)} | {times} | "
            f"{exact} / {len(variant.layers) - exact} ({variant.precision}) | "
            f"{sum(checks)} of {len(checks)} | {'right' if ok else 'WRONG'} |")


def pair_row(left: str, right: str) -> str:
    a_engine, b_engine = engine_at(left), engine_at(right)
    sessions = []
    for engine, name in ((a_engine, "a"), (b_engine, "b")):
        imported = import_variant(files_of(engine), name, "model")
        sessions.append(new_session(imported, []))
        sessions[-1].variants.append(imported.variant)
    a, b = sessions
    alignment = align_layers(a.variants[0].layers, b.variants[0].layers)
    diff = diff_sessions(a, b, RULES, 0.05)
    methods = ", ".join(f"{n} {m}" for m, n in Counter(alignment.how.values()).items())
    precision = sum(1 for c in diff.changes if c.what == "precision")
    return (f"| {left} | {right} | {len(alignment.pairs)} ({methods}) | "
            f"{len(alignment.fused_a)} / {len(alignment.fused_b)} | "
            f"{len(alignment.only_a)} / {len(alignment.only_b)} | {precision} | {len(diff.regressions)} |")


def main() -> None:
    print("| set (engine) | layers | summed layer time vs end-to-end median | precision exact / unknown (variant) "
          "| roles matched | verdict |")
    print("|---|---:|---|---|---|---|")
    for folder in set_folders():
        for engine in engines(folder):
            print(row(engine))
    print()
    print("| A | B | layers paired (how) | fused A / B | unmatched A / B | precision changes | regressions (5 %) |")
    print("|---|---|---|---|---|---:|---:|")
    for left, right in PAIRS:
        print(pair_row(left, right))


if __name__ == "__main__":
    main()
