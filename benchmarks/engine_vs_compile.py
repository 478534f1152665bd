"""Per session given: the model and batch, each variant's median, per-sample CoV, p99 / median and the inferences
one sample spans, and the engine's fp16
(`cudnn-fp16`) against torch.compile's (`compile-fp16`) and PyTorch's eager fp16 (`fp16`): the ratio of medians
(above 1: the engine is faster) and whether the difference lies outside both variants' noise bands
(`sessions.analyses.noise`, the diff's rule).

    python benchmarks/engine_vs_compile.py SESSION.json ...
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sessions.analyses.noise import Band, judge, latency_band
from sessions.documents.storage import load

ENGINE, OTHERS = "cudnn-fp16", ("compile-fp16", "fp16")


def verdict(engine: Band | None, other: Band | None) -> str:
    """The engine against another variant by the diff's noise rule: faster, slower or within noise."""
    return judge(other, engine) if engine is not None and other is not None else "no band"


def main(paths: list[str]) -> int:
    for path in paths:
        session = load(path)
        measured = {v.name: v for v in session.variants if v.latency is not None and v.latency.median_ms}
        print(f"== {Path(path).name}: {session.study.model} batch {session.study.batch}")
        for name, variant in measured.items():
            latency = variant.latency
            cov = f"{100 * latency.cov:.2f} %" if latency.cov is not None else "-"
            p99 = f"{latency.p99_ms / latency.median_ms:.3f}" if latency.p99_ms is not None else "-"
            print(f"  {name:<28} median {latency.median_ms:8.3f} ms  per-sample CoV {cov}  p99 / median {p99}  "
                  f"inferences / sample {latency.inferences_per_sample}")
        if ENGINE not in measured:
            print(f"  no {ENGINE} measured")
            continue
        engine = measured[ENGINE]
        for other_name in OTHERS:
            if other_name in measured:
                other = measured[other_name]
                ratio = other.latency.median_ms / engine.latency.median_ms
                print(f"  {ENGINE} against {other_name}: {ratio:.3f}x (above 1: the engine faster); "
                      f"{verdict(latency_band(engine.latency), latency_band(other.latency))}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
