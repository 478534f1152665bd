"""Per engine variant of the sessions given: median latency, and for the layers a recipe quantizes the precision the
engine chose by timing, counted by layer shape (grouped, 1x1, other convolutions, linears); then every FP8 layer whose
best recorded fp16 tactic (any library, the output format it writes) was faster than its best FP8 one (there must be
none where the precision was timed).

    python benchmarks/engine_tactics_report.py SESSION.json ...
"""

from __future__ import annotations

import sys
from collections import Counter

from builders.engine.tactics import QUANTIZE_LAYER
from sessions.analyses.precision_choice import asked_fp8
from sessions.documents.storage import load


def shape_of(layer) -> str:
    if layer.op == "linear":
        return "linear"
    if (layer.groups or 1) > 1:
        return "grouped conv"
    return "1x1 conv" if layer.kernel_shape == [1, 1] else "other conv"


def main(paths: list[str]) -> None:
    for path in paths:
        session = load(path)
        options = session.study.engine_options
        print(f"== {path.rsplit('/', 1)[-1]}: {session.study.model} batch {session.study.batch} {options}")
        for variant in session.variants:
            latency = variant.latency
            median = f"{latency.median_ms:.3f} ms" if latency and latency.median_ms else "-"
            print(f"  {variant.name:<22} median {median}")
            outcomes = asked_fp8(variant)
            if not outcomes or variant.backend != "cudnn":
                continue
            asked = [layer for layer, _ in outcomes]
            counts = Counter((shape_of(layer), ran) for layer, ran in outcomes)
            for (shape, ran), count in sorted(counts.items()):
                print(f"      {shape:<13} {ran:<15} {count:>4}")
            slower = []
            for layer in asked:
                output = "fp8" if "fp8" in str(layer.attrs.get("output", "")) else "fp16"
                times: dict[str, float] = {}  # the best tactic of any library in each precision, this output
                for tactic in layer.attrs.get("tactics", []):
                    if tactic.get("output") == output and tactic.get("library") != QUANTIZE_LAYER:
                        times[tactic["precision"]] = min(times.get(tactic["precision"], tactic["time_us"]),
                                                         tactic["time_us"])
                if layer.precision == "fp8" and "fp16" in times and "fp8" in times and times["fp16"] < times["fp8"]:
                    slower.append(f"{layer.name} ({times['fp8']:.1f} us FP8 against {times['fp16']:.1f} us fp16)")
            print(f"      FP8 layers slower than their fp16 tactic: {len(slower)}" +
                  (": " + "; ".join(slower[:5]) if slower else ""))


if __name__ == "__main__":
    main(sys.argv[1:])
