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
from sessions.documents.storage import load
from sessions.documents.vocab import precision_as_run


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
            asked = [layer for layer in variant.layers if layer.attrs.get("asked") == "fp8"]
            if not asked or variant.backend != "cudnn":
                continue
            counts: Counter[tuple[str, str]] = Counter()
            for layer in asked:
                ran = precision_as_run("fp8", layer.precision, layer.attrs.get("fallback"))
                counts[(shape_of(layer), str(ran))] += 1
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
