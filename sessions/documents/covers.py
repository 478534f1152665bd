"""The layers a region fused across layers runs as one (`attrs[COVERS]` of its layer), as the session keeps them.

Each entry names a covered layer (name, kind, tactic). Where the covered layer's recipe asked for it in FP8 (it ran
fp16, by timing or refusal: a fused region takes no FP8 step), the entry also keeps that layer's record
(`COVERED_LAYER`: what the layer says of its precision and shape, the library that runs it now), so what became of
every layer asked for in FP8 is still counted by role once a region covers it (`covered_layers`;
`sessions.analyses.precision_choice`).
"""

from __future__ import annotations

from typing import Any

from sessions.documents.codec import ShapeError, build
from sessions.documents.model import Layer
from sessions.documents.vocab import COVERS, STRUCTURE_ROLE

COVERED_LAYER = "layer"  # a COVERS entry's record of a covered layer its recipe asked for in FP8
_FIELDS = ("name", "kind", "op", "precision", "groups", "kernel_shape", "in_channels", "out_channels", "stride")
_ATTRS = ("asked", "fallback", STRUCTURE_ROLE)  # what a covered layer's record keeps of its attrs, with "library"


def cover(layer: Layer, library: str) -> dict[str, Any]:
    """`layer` as the layer of the region that covers it lists it: its name, kind and tactic; where its recipe asked
    for it in FP8, its record too (`COVERED_LAYER`), the library `library` (the region's, which runs it now)."""
    entry: dict[str, Any] = {"name": layer.name, "kind": layer.kind, "tactic": layer.tactic}
    if layer.attrs.get("asked") == "fp8":
        record = {field: getattr(layer, field) for field in _FIELDS}
        record["attrs"] = {key: layer.attrs[key] for key in _ATTRS if key in layer.attrs} | {"library": library}
        entry[COVERED_LAYER] = record
    return entry


def covered_records(layer: Layer) -> list[dict[str, Any]]:
    """The records `layer`'s covered layers keep (`COVERED_LAYER`), in the order it covers them, those without a name
    and kind left out (a file that lies); [] for a layer that covers none or none asked for in FP8. The builder writes
    a structure's roles into their attrs."""
    entries = layer.attrs.get(COVERS)
    if not isinstance(entries, list):
        return []
    records = [entry.get(COVERED_LAYER) for entry in entries if isinstance(entry, dict)]
    return [record for record in records if isinstance(record, dict) and isinstance(record.get("name"), str)
            and isinstance(record.get("kind"), str)]


def covered_layers(layer: Layer) -> list[Layer]:
    """The layers asked for in FP8 that `layer` covers, each made again from its record (`covered_records`) as the
    session's reader makes a layer (`codec.build`: a record whose fields have the wrong types is left out), with no
    time of its own (the region's time is `layer`'s)."""
    made = []
    for record in covered_records(layer):
        try:
            made.append(build(Layer, {key: record[key] for key in (*_FIELDS, "attrs") if key in record}))
        except ShapeError:
            continue
    return made
