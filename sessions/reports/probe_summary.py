"""What an FP8 probe session says, per role and as one line: sums of the probe's layer times.

The sums are an estimate from layers run alone, not an engine time: an engine fuses, reorders and
picks other kernels, and the probe leaves out every layer that is not a convolution or a linear.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from sessions.analyses.groups import Rules, kernels_per_layer, role_of
from sessions.documents.model import Layer, Session, Variant

FP16_VARIANT = "probe-fp16"
FP8_VARIANT = "probe-fp8"
QUANTIZE_ROLE = "quantize / dequantize"
ESTIMATE_LABEL = "estimate from layers run alone, not an engine time"


@dataclass
class RoleRow:
    role: str
    layers: int
    fp16_ms: float
    fp8_ms: float  # the role's layers in the FP8 variant: FP8 kernels, fp16 where no FP8 kernel exists
    quantize_ms: float  # the quantize layers in front of this role's FP8 layers
    fp16_kernels: float | None  # per call
    fp8_kernels: float | None
    quantize_kernels: float | None
    no_fp8: int  # layers without an FP8 kernel

    @property
    def fp8_total_ms(self) -> float:
        return self.fp8_ms + self.quantize_ms

    @property
    def speedup(self) -> float | None:
        """fp16 / (FP8 + quantize): above 1, FP8 is faster."""
        return self.fp16_ms / self.fp8_total_ms if self.fp8_total_ms > 0 else None


def is_probe_session(session: Session) -> bool:
    names = {v.name for v in session.variants}
    return FP16_VARIANT in names and FP8_VARIANT in names


def _kernels(variant: Variant) -> dict[str, float] | None:
    per_layer = kernels_per_layer(variant)
    return None if per_layer is None else {layer.name: n for layer, n in zip(variant.layers, per_layer, strict=False)}


def role_rows(session: Session, rules: Rules) -> list[RoleRow]:
    """One row per role of the fp16 variant's layers, largest fp16 time first."""
    fp16, fp8 = session.variant(FP16_VARIANT), session.variant(FP8_VARIANT)
    k16, k8 = _kernels(fp16), _kernels(fp8)
    role_of_layer = {layer.name: role_of(layer, rules) for layer in fp16.layers}
    rows: dict[str, RoleRow] = {}
    for layer in fp16.layers:
        role = role_of_layer[layer.name]
        row = rows.setdefault(role, RoleRow(role, 0, 0.0, 0.0, 0.0, _zero(k16), _zero(k8), _zero(k8), 0))
        row.layers += 1
        row.fp16_ms += layer.time_ms or 0.0
        if k16 is not None:
            row.fp16_kernels = (row.fp16_kernels or 0.0) + k16.get(layer.name, 0.0)
    for layer in fp8.layers:
        quantized = layer.attrs.get("quantizes")
        owner_role = role_of_layer.get(quantized or layer.name)
        if owner_role is None:
            continue
        row = rows[owner_role]
        if quantized:
            row.quantize_ms += layer.time_ms or 0.0
            if k8 is not None:
                row.quantize_kernels = (row.quantize_kernels or 0.0) + k8.get(layer.name, 0.0)
            continue
        row.fp8_ms += layer.time_ms or 0.0
        if k8 is not None:
            row.fp8_kernels = (row.fp8_kernels or 0.0) + k8.get(layer.name, 0.0)
        if layer.attrs.get("no_fp8_kernel"):
            row.no_fp8 += 1
    return sorted(rows.values(), key=lambda r: -r.fp16_ms)


def _zero(kernels: dict[str, float] | None) -> float | None:
    return None if kernels is None else 0.0


def _total(layers: list[Layer]) -> float:
    return sum(layer.time_ms or 0.0 for layer in layers)


def estimate_line(session: Session, rules: Rules, top: int = 3) -> str:
    """fp16 sum, FP8 sum with quantize, and the roles that move the difference most."""
    fp16 = session.variant(FP16_VARIANT)
    rows = role_rows(session, rules)
    fp16_ms = _total(fp16.layers)
    quantize_ms = sum(r.quantize_ms for r in rows)
    fp8_ms = sum(r.fp8_ms for r in rows)
    total = fp8_ms + quantize_ms
    no_fp8 = sum(r.no_fp8 for r in rows)
    shapes = len({layer.attrs.get("shape") for layer in fp16.layers})
    deltas = [(r.role, r.fp8_ms - r.fp16_ms) for r in rows] + [("quantize", quantize_ms)]
    movers = sorted(deltas, key=lambda d: -abs(d[1]))[:top]
    ratio = f"x{fp16_ms / total:.2f}" if total > 0 else "x-"
    return (
        f"{session.study.model} batch {session.study.batch}, {ESTIMATE_LABEL}: "
        f"{len(fp16.layers)} layers ({shapes} shapes); fp16 {fp16_ms:.3f} ms; "
        f"FP8 {total:.3f} ms = {fp8_ms:.3f} ms layers + {quantize_ms:.3f} ms quantize"
        f"{f' ({no_fp8} layers kept fp16: no FP8 kernel)' if no_fp8 else ''}; {ratio} (fp16 / FP8, above 1 is faster); "
        "difference from " + ", ".join(f"{role} {delta:+.3f} ms" for role, delta in movers)
    )


ROLE_HEADERS = ["role", "layers", "fp16 ms", "FP8 ms", "quantize ms", "FP8+Q ms", "x", "fp16 k/call", "FP8 k/call",
                "Q k/call", "no FP8 kernel"]


def role_table_rows(session: Session, rules: Rules) -> list[list]:
    return [
        [r.role, r.layers, r.fp16_ms, r.fp8_ms, r.quantize_ms, r.fp8_total_ms, r.speedup, r.fp16_kernels, r.fp8_kernels,
         r.quantize_kernels, r.no_fp8]
        for r in role_rows(session, rules)
    ]


def no_kernel_shapes(session: Session) -> list[tuple[str, int, str]]:
    """(shape, layers, why) for every shape without an FP8 kernel."""
    found: dict[str, tuple[int, str]] = {}
    for layer in session.variant(FP8_VARIANT).layers:
        why = layer.attrs.get("no_fp8_kernel")
        if why:
            shape = str(layer.attrs.get("shape", layer.name))
            count, _ = found.get(shape, (0, why))
            found[shape] = (count + 1, why)
    return [(shape, count, why) for shape, (count, why) in found.items()]


def probe_text(session: Session, rules: Rules) -> str:
    """The per-role table, the shapes without an FP8 kernel, and the estimate line."""
    from sessions.reports.tables import render_text

    lines = [render_text(ROLE_HEADERS, role_table_rows(session, rules)),
             ("ms per call summed over layers; x = fp16 / (FP8 + quantize), above 1 is faster; "
              "k/call = kernels per call")]
    missing = no_kernel_shapes(session)
    if missing:
        lines.append("no FP8 kernel:")
        lines.extend(f"  {shape} (x{count}): {why}" for shape, count, why in missing)
    lines.append(estimate_line(session, rules))
    return "\n".join(lines)


def probe_document(session: Session, rules: Rules, path: str | None = None) -> dict:
    return {
        "session": path,
        "model": session.study.model,
        "batch": session.study.batch,
        "label": ESTIMATE_LABEL,
        "roles": [{**asdict(r), "fp8_total_ms": r.fp8_total_ms, "speedup": r.speedup}
                  for r in role_rows(session, rules)],
        "no_fp8_kernel": [{"shape": s, "layers": n, "why": why} for s, n, why in no_kernel_shapes(session)],
        "estimate": estimate_line(session, rules),
    }
