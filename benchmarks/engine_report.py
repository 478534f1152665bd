"""What the cuDNN / cuBLASLt engine's sessions show, for the H200 evidence log: per variant the median, per-sample
CoV, kernels and standalone quantize kernels per call, plans tried per cuDNN layer, the FP8 layers whose kernels
show no FP8 kernel name and their kernels' target architectures, the layers that fell back with their reasons, and
real-against-simulated numerics.

python benchmarks/engine_report.py SESSION.json...
"""

from __future__ import annotations

import collections
import sys
from pathlib import Path

from sessions.analyses.lowering import kernel_arch
from sessions.analyses.precision_choice import with_covered
from sessions.documents.model import Session, Variant
from sessions.documents.storage import decode, read_regular_file
from sessions.documents.trt_names import tactic_precision


def kernels_by_layer(variant: Variant) -> dict[str, list[str]]:
    table = variant.kernels
    found: dict[str, list[str]] = collections.defaultdict(list)
    if table is None:
        return found
    for name, layer in zip(table.name, table.layer, strict=False):
        if layer >= 0:
            found[variant.layers[layer].name].append(table.names[name])
    return found


def report(session: Session, path: Path) -> None:
    print(f"## {path.name}: {session.study.model}, batch {session.study.batch}, "
          f"{session.environment.gpu.name if session.environment.gpu else '?'}")
    for v in session.variants:
        lat = v.latency
        calls = v.trace.calls if v.trace else 0
        per_call = v.trace.per_call if v.trace else 0
        kernels = kernels_by_layer(v)
        quantize = sum(len(kernels.get(layer.name, [])) for layer in v.layers if layer.op == "quantize") / max(calls, 1)
        line = (f"{v.name:28s} {v.backend:7s} median {lat.median_ms:8.3f} ms  CoV {lat.cov * 100:.2f} %  "
                if lat else f"{v.name:28s} {v.backend:7s} {v.status}: {v.error}  ")
        print(line + f"kernels/call {per_call:.0f}  quantize kernels/call {quantize:.0f}")
        cudnn = [layer for layer in v.layers if "plans_tried" in layer.attrs]
        if cudnn:
            tried = collections.Counter(int(layer.attrs["plans_tried"]) for layer in cudnn)
            cached = sum(1 for layer in cudnn if layer.attrs.get("plan_cached"))
            print(f"    cuDNN layers {len(cudnn)}: plans tried per layer {dict(sorted(tried.items()))}, "
                  f"from cache {cached}; "
                  f"offered {min(int(x.attrs['plans_offered']) for x in cudnn)}-"
                  f"{max(int(x.attrs['plans_offered']) for x in cudnn)}")
        fp8 = [layer for layer in v.layers if layer.precision == "fp8" and layer.op in ("conv", "linear")]
        if fp8 and v.kernels is not None:
            without = [layer.name for layer in fp8
                       if not any(tactic_precision(k) == "fp8" for k in kernels.get(layer.name, []))]
            names = collections.Counter(k[:90] for layer in fp8 for k in kernels.get(layer.name, []))
            print(f"    FP8 layers {len(fp8)}; without an FP8 kernel name: {len(without)} {without[:5]}")
            archs = collections.Counter(max((kernel_arch(k) or (0, 0) for k in kernels.get(layer.name, [])),
                                            default=None)
                                        for layer in fp8)
            print("    FP8 layers by their kernels' target architecture (FP8 tensor cores from sm89): " + ", ".join(
                f"{f'sm{arch[0]}{arch[1]}' if arch and arch != (0, 0) else 'no smNN token'} {count}"
                for arch, count in sorted(archs.items(), key=lambda item: str(item[0]))))
            for name, count in names.most_common(6):
                print(f"      {count:4d} x {name}")
        reasons = collections.Counter(str(layer.attrs.get("fallback"))[:160] for layer in with_covered(v.layers)
                                      if layer.attrs.get("fallback"))
        for reason, count in reasons.most_common(8):
            print(f"    fell back ({count} layers): {reason}")
        if v.quality:
            q = v.quality
            print(f"    vs fp32: top-1 {q.top1_agreement * 100:.1f} %, max |logit err| {q.max_abs_logit_error:.4g}, "
                  f"KL {q.mean_kl:.3g}, NaN/Inf {q.nonfinite}, stress NaN/Inf {q.stress_nonfinite}/{q.stress_inputs}")
        if v.simulation:
            s = v.simulation
            print(f"    vs {s.reference}: top-1 agreement {s.top1_agreement * 100:.1f} % of {s.images}, "
                  f"largest logit difference {s.max_abs_logit_error:.4g}")
        for note in v.notes[:4]:
            print(f"    note: {note[:200]}")


def main(paths: list[str]) -> int:
    for name in paths:
        path = Path(name)
        if not path.exists():
            print(f"## {name}: missing")
            continue
        report(decode(read_regular_file(path, "session"), str(path)), path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
