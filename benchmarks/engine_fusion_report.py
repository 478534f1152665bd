"""Per engine variant of the sessions given: its median latency; the regions offered a fused tactic
(builders.engine.fused_tactics: runs of PyTorch ops, squeeze-excitation blocks) by kind, how many run Inductor's fused
kernels and how many keep the engine's steps, the two tactics' timed microseconds summed over each, the traced time
of the fused layers, and the variant's notes on fused tactics. Checks that no fused layer's Inductor time was slower
than its steps' (the choice by timing held).

    python benchmarks/engine_fusion_report.py SESSION.json ...
"""

from __future__ import annotations

import sys
from collections import Counter
from typing import Any

from sessions.documents.model import Variant
from sessions.documents.storage import load


def times(record: dict[str, Any]) -> tuple[float, float]:
    """The fused tactic's and the engine's steps' microseconds in a layer's `attrs["fusion"]`."""
    by_library = {tactic["library"]: tactic["time_us"] for tactic in record["tactics"]}
    return by_library["Inductor"], by_library["engine steps"]


def variant_lines(variant: Variant) -> list[str]:
    """The fused tactics of one engine variant, as the module docstring lists them."""
    fused = [layer for layer in variant.layers if layer.attrs.get("fusion", {}).get("chosen") == "Inductor"]
    kept = [layer for layer in variant.layers if layer.attrs.get("fusion", {}).get("chosen") == "engine steps"]
    unoffered = [layer for layer in variant.layers if layer.attrs.get("fusion", {}).get("offered") is False]
    lines = []
    for label, layers, share in (("fused", fused, 1), ("engine steps", kept, 0), ("not offered", unoffered, 0)):
        records = [layer.attrs["fusion"] for layer in layers]
        weights = [1.0 if share else 1 / record["layers"] for record in records]  # a kept region: one per layer
        kinds: Counter[str] = Counter()
        for record, weight in zip(records, weights, strict=True):
            kinds[record["region"]] += weight
        line = (f"      {label:<13} regions {sum(weights):>5.0f}  layers {len(layers):>4}  "
                f"{ {kind: round(count) for kind, count in sorted(kinds.items())} }")
        timed = [(times(record), weight) for record, weight in zip(records, weights, strict=True)
                 if "tactics" in record]
        if timed:
            inductor, steps = (sum(pair[i] * weight for pair, weight in timed) for i in (0, 1))
            line += f"  Inductor {inductor:.1f} us, steps {steps:.1f} us"
        lines.append(line)
    traced = sum(layer.time_ms or 0.0 for layer in fused)
    lines.append(f"      fused layers' traced time {traced:.3f} ms per call")
    slower = [layer.name for layer in fused if times(layer.attrs["fusion"])[0] >= times(layer.attrs["fusion"])[1]]
    lines.append(f"      fused layers whose Inductor time was not below their steps': {len(slower)} {slower[:2]}")
    why = Counter(str(layer.attrs["fusion"].get("why"))[:120] for layer in unoffered)
    lines += [f"      not offered ({count} layers): {reason}" for reason, count in why.most_common(3)]
    lines += [f"      note: {note}" for note in variant.notes if "fused tactic" in note]
    return lines


def main(paths: list[str]) -> None:
    for path in paths:
        session = load(path)
        print(f"== {path.rsplit('/', 1)[-1]}: {session.study.model} batch {session.study.batch}")
        for variant in session.variants:
            if variant.backend != "cudnn":
                continue
            median = variant.latency.median_ms if variant.latency and variant.latency.median_ms else None
            print(f"  {variant.name:<22} median {f'{median:.3f} ms' if median else '-'}")
            for line in variant_lines(variant):
                print(line)


if __name__ == "__main__":
    main(sys.argv[1:])
