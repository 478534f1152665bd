"""One layer in full, as TensorRT's engine inspector (TREx) shows it: tactic, tensors with their formats
and dtypes, the reformat layers it causes, and its precision as run against the variant's as asked.

The detail pane, the layer page of imported engines, `show --layers` and the CSV / JSON exports read these.
"""

from __future__ import annotations

from typing import Any

from sessions.analyses.captions import precision_of
from sessions.analyses.precision_choice import fallback_reason, fp8_outcome
from sessions.documents.covers import covered_layers
from sessions.documents.model import Layer, Session, Tensor, Variant
from sessions.reports.tables import format_value, table_csv, table_records
from sessions.reports.views import Column, Table, Tone


def is_reformat(layer: Layer) -> bool:
    """A layer that only changes a tensor's format or dtype (TensorRT's Reformat, a copy node)."""
    return layer.op == "reformat" or layer.kind == "Reformat"


def reformats_of(variant: Variant, layer: Layer) -> list[Layer]:
    """Reformat layers that feed `layer` or read its outputs: the data movement this layer's formats cause."""
    if is_reformat(layer):
        return []
    inputs = {t.name for t in layer.inputs if t.name}
    outputs = {t.name for t in layer.outputs if t.name}
    return [other for other in variant.layers if other is not layer and is_reformat(other)
            and ({t.name for t in other.outputs} & inputs or {t.name for t in other.inputs} & outputs)]


def tensor_text(tensor: Tensor) -> str:
    shape = "x".join(str(d) for d in tensor.shape) if tensor.shape else "?"
    parts = [tensor.name or "(unnamed)", tensor.dtype or "?", shape]
    if tensor.format:
        parts.append(tensor.format)
    return " ".join(parts[:3]) + (f" [{parts[3]}]" if len(parts) > 3 else "")


def precision_note(variant: Variant, layer: Layer) -> str:
    """What the layer ran in and whether its variant asked for it (`sessions.analyses.captions.precision_of`)."""
    return precision_of(variant, layer).words


def layer_facts(variant: Variant, layer: Layer) -> list[tuple[str, str]]:
    """(label, value) pairs for a detail pane, in reading order; fields a source did not give are left out."""
    facts = [("layer", layer.name), ("kind", layer.kind + (f" ({layer.op})" if layer.op else "")),
             ("ms / call", format_value(layer.time_ms, "ms")), ("precision", precision_note(variant, layer))]
    if layer.tactic:
        facts.append(("tactic", layer.tactic))
    facts += [(f"input {i}", tensor_text(t)) for i, t in enumerate(layer.inputs)]
    facts += [(f"output {i}", tensor_text(t)) for i, t in enumerate(layer.outputs)]
    reformats = reformats_of(variant, layer)
    if reformats:
        total = sum(r.time_ms or 0.0 for r in reformats)
        facts.append(("reformats", f"{len(reformats)} costing {format_value(total, 'ms')} ms / call: "
                      + "; ".join(f"{r.name} ({r.origin or 'reformat'}, {format_value(r.time_ms, 'ms')} ms)"
                                  for r in reformats)))
    if layer.origin:
        facts.append(("origin", layer.origin))
    if layer.onnx_nodes:
        facts.append(("onnx nodes", ", ".join(layer.onnx_nodes)))
    facts += [(str(key), str(value)) for key, value in layer.attrs.items()]
    return facts


DETAIL_COLUMNS = (Column("layer"), Column("kind"), Column("ms", "ms"), Column("precision"), Column("asked"),
                  Column("fp8 choice"), Column("tactic"), Column("inputs"), Column("outputs"),
                  Column("reformats", "count"), Column("reformat ms", "ms"), Column("why"))


IN_REGION = "(in the fused region above)"  # the kind word of a row for a layer a fused region runs


def layer_detail_table(variant: Variant) -> Table:
    """Every layer of `variant` with tactic, formats and reformats: `show --layers`, CSV and JSON; after a region fused
    across layers, a row for each layer the recipe asked for in FP8 that it runs (`covered_layers`: no time of its
    own). A layer the recipe asked for in FP8 says what became of it (`fp8 choice`: fp8, fp16 by timing, fp16
    refused, as `groups` counts them: `sessions.analyses.precision_choice.fp8_outcome`) and, where it runs fp16, why
    (`why`: the reason the engine recorded, in full; last, so its length widens no other column)."""
    rows: list[tuple[Any, ...]] = []
    tones: list[Tone] = []
    keys: list[str] = []
    for layer in variant.layers:
        reformats = reformats_of(variant, layer)
        precision = precision_of(variant, layer)
        rows.append((layer.name, layer.kind, layer.time_ms, precision.ran, precision.asked, fp8_outcome(layer),
                     layer.tactic, "; ".join(tensor_text(t) for t in layer.inputs),
                     "; ".join(tensor_text(t) for t in layer.outputs), len(reformats),
                     sum(r.time_ms or 0.0 for r in reformats) if reformats else None, fallback_reason(layer)))
        tones.append("" if precision.honoured else "warn")
        keys.append(layer.name)
        for inner in covered_layers(layer):  # after its region: no time of its own, the region's tactic
            held = precision_of(variant, inner)
            rows.append((inner.name, f"{inner.kind} {IN_REGION}", None, held.ran, held.asked, fp8_outcome(inner),
                         layer.tactic, "", "", 0, None, fallback_reason(inner)))
            tones.append("" if held.honoured else "warn")
            keys.append(inner.name)
    return Table(DETAIL_COLUMNS, rows, keys, tones, title=f"layers of {variant.name}", time_column=2)


def layer_facts_table(variant: Variant, layer: Layer) -> Table:
    """`layer_facts` as a two-column table: the page a layer opens to where no kernels were recorded."""
    facts = layer_facts(variant, layer)
    return Table((Column("field"), Column("value")), facts, [label for label, _ in facts], [""] * len(facts),
                 title=f"{layer.name} in {variant.name}")


def layers_document(session: Session, path: str | None, names: list[str] | None = None) -> dict[str, Any]:
    """Every layer of the chosen variants (default all) as JSON records: `show --layers --json`,
    `export --format json`."""
    chosen = [session.variant(name) for name in names] if names else session.variants
    return {"session": path, "variants": {v.name: table_records(layer_detail_table(v)) for v in chosen}}


def layers_csv(session: Session) -> str:
    """Every layer of every variant, one CSV with a leading variant column (raw values)."""
    rows, keys = [], []
    for variant in session.variants:
        table = layer_detail_table(variant)
        rows += [(variant.name, *row) for row in table.rows]
        keys += [(variant.name, key) for key in table.keys]
    return table_csv(Table((Column("variant"), *DETAIL_COLUMNS), rows, keys, [""] * len(rows)))
