"""The cuDNN / cuBLASLt engine against `probe`, per role: the engine's per-call kernel time of its FP8 layers (one
traced eager call, epilogue fused, per-channel weight scales) beside the probe's isolated time of the same layers
(CUDA-graph replays of back-to-back calls, L2-warm, per-tensor scales, bias only, fp16 out: a layer's time in the
probe's sessions of that time, its `isolated` attributes' in later ones), and the same for the quantize layers both
have. Differences over 15 % are flagged.

python benchmarks/probe_consistency.py ENGINE.json VARIANT PROBE.json
"""

from __future__ import annotations

import collections
import sys
from pathlib import Path

from inspector.probe.probe_session import ISOLATED
from sessions.analyses.groups import builtin_rules, role_of
from sessions.documents.model import Layer, Session, Variant
from sessions.documents.storage import decode, read_regular_file

FLAG = 0.15


def load(path: str) -> Session:
    return decode(read_regular_file(Path(path), "session"), path)


def kernel_ms(variant: Variant) -> dict[str, float]:
    """Per-call kernel time of each layer, from the traced call(s)."""
    table = variant.kernels
    totals: dict[str, float] = collections.defaultdict(float)
    if table is None or variant.trace is None:
        return totals
    for layer, duration in zip(table.layer, table.duration_ns, strict=False):
        if layer >= 0:
            totals[variant.layers[layer].name] += duration / 1e6 / variant.trace.calls
    return totals


def isolated_ms(layer: Layer) -> float:
    """The probe layer's isolated time: its `isolated` attributes' where it has them, else its time (the probe's
    sessions whose layer times were isolated)."""
    return float(layer.attrs.get(ISOLATED, {}).get("ms", layer.time_ms))


def main(engine_path: str, variant_name: str, probe_path: str) -> int:
    engine = load(engine_path).variant(variant_name)
    probe = {layer.name: layer for layer in load(probe_path).variant("probe-fp8").layers}
    times = kernel_ms(engine)
    rules = builtin_rules()
    rows: dict[str, list[float]] = collections.defaultdict(lambda: [0, 0.0, 0.0, 0, 0.0, 0.0])
    for layer in engine.layers:
        if layer.precision != "fp8" or layer.op != "conv":
            continue
        seen = probe.get(layer.name)
        if seen is None or seen.precision != "fp8" or seen.time_ms is None:
            continue
        row = rows[role_of(layer, rules)]
        row[0] += 1
        row[1] += times.get(layer.name, 0.0)
        row[2] += isolated_ms(seen)
        quantizer = probe.get(f"{layer.name}.input_quantizer")
        own = times.get(f"{layer.name}.input_quantizer")
        if quantizer is not None and quantizer.time_ms is not None and own is not None:
            row[3] += 1
            row[4] += own
            row[5] += isolated_ms(quantizer)
    print(f"{Path(engine_path).name} {variant_name} against {Path(probe_path).name} probe-fp8")
    print("| role | FP8 layers | engine ms | probe ms | engine / probe | quantize layers | engine ms | probe ms |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for role, (count, mine, theirs, q_count, q_mine, q_theirs) in sorted(rows.items()):
        ratio = mine / theirs if theirs else float("nan")
        flag = " (over 15 %)" if abs(ratio - 1) > FLAG else ""
        q = f"{q_count} | {q_mine:.3f} | {q_theirs:.3f}" if q_count else "0 | - | -"
        print(f"| {role} | {count} | {mine:.3f} | {theirs:.3f} | {ratio:.2f}{flag} | {q} |")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 4:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        sys.exit(2)
    sys.exit(main(*sys.argv[1:]))
