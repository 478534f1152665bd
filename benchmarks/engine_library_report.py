"""Per engine variant of the sessions given: its median latency; the convolutions counted by shape (depthwise,
grouped, pointwise 1x1, spatial), library that ran them (cuDNN, cuBLASLt, PyTorch) and precision; and over the 1x1
convolutions whose FP8 and fp16 tactics were both timed, the best FP8 tactic against the best fp16 one, summed, and
how often each library's tactic was the best in each precision.

    python benchmarks/engine_library_report.py SESSION.json ...
"""

from __future__ import annotations

import sys
from collections import Counter
from typing import Any

from builders.engine.tactics import QUANTIZE_LAYER
from sessions.analyses.groups import conv_shape
from sessions.documents.model import Layer
from sessions.documents.storage import load


def best_by_precision(layer: Layer) -> dict[str, dict[str, Any]]:
    """The fastest tactic recorded for `layer` in each precision (any library, any output format)."""
    best: dict[str, dict[str, Any]] = {}
    for tactic in layer.attrs.get("tactics", []):
        if tactic.get("library") == QUANTIZE_LAYER:
            continue
        if tactic["precision"] not in best or tactic["time_us"] < best[tactic["precision"]]["time_us"]:
            best[tactic["precision"]] = tactic
    return best


def pointwise_lines(layers: list[Layer]) -> list[str]:
    """The 1x1 convolutions' best FP8 against best fp16 tactic, where both were timed."""
    pairs = [best for layer in layers if conv_shape(layer) == "pointwise"
             for best in [best_by_precision(layer)] if {"fp8", "fp16"} <= set(best)]
    if not pairs:
        return ["      1x1 FP8 against fp16: no layer has both timed"]
    fp8_us, fp16_us = (sum(best[p]["time_us"] for best in pairs) for p in ("fp8", "fp16"))
    faster = sum(best["fp8"]["time_us"] < best["fp16"]["time_us"] for best in pairs)
    winners = {p: Counter(best[p]["library"] for best in pairs) for p in ("fp8", "fp16")}
    total = (f"      1x1 FP8 against fp16, {len(pairs)} layers: best FP8 {fp8_us:.1f} us, best fp16 {fp16_us:.1f} us "
             f"in all; FP8 faster on {faster}")
    return [total,
            *(f"      1x1 best {p} tactic by library: {dict(sorted(c.items()))}" for p, c in winners.items())]


def main(paths: list[str]) -> None:
    for path in paths:
        session = load(path)
        print(f"== {path.rsplit('/', 1)[-1]}: {session.study.model} batch {session.study.batch} "
              f"{session.study.engine_options}")
        for variant in session.variants:
            latency = variant.latency
            median = f"{latency.median_ms:.3f} ms" if latency and latency.median_ms else "-"
            print(f"  {variant.name:<22} median {median}")
            if variant.backend != "cudnn":
                continue
            counts = Counter((conv_shape(layer), str(layer.attrs.get("library", "-")), layer.precision)
                             for layer in variant.layers if conv_shape(layer) is not None)
            for (shape, library, precision), count in sorted(counts.items()):
                print(f"      {shape:<10} {library:<9} {precision:<5} {count:>4}")
            for line in pointwise_lines(variant.layers):
                print(line)


if __name__ == "__main__":
    main(sys.argv[1:])
