"""Older session documents brought up to the current schema, on the raw JSON before it is typed.

One function per step (`_v1_to_v2`, ...): a session of any older schema loads in this version.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sessions.documents.layer_ops import trt_op
from sessions.documents.vocab import dtype_of

Doc = dict[str, Any]

_LAYER_FIELDS = {  # v1 attrs key -> v2 Layer field
    "in_channels": "in_channels", "out_channels": "out_channels", "out_maps": "out_channels",
    "stride": "stride", "tactic": "tactic", "onnx_nodes": "onnx_nodes", "origin": "origin",
    "quantized": "quantized",
}
_TRACERS = {"cupti": "cupti", "torch-profiler": "torch", "cpu-ops": "torch", "none": "none"}


def _tensor(summary: Any) -> Any:
    if not isinstance(summary, dict):
        return {"name": str(summary)}
    fmt = summary.get("format")
    dims = summary.get("dims")
    return {
        "name": str(summary.get("name") or ""),
        "dtype": dtype_of(fmt) if isinstance(fmt, str) else None,
        "shape": dims if isinstance(dims, list) and all(type(d) is int for d in dims) else None,
        "format": fmt if isinstance(fmt, str) else None,
    }


def _layer_v1_to_v2(layer: Any) -> Any:
    if not isinstance(layer, dict) or not isinstance(layer.get("attrs"), dict):
        return layer
    attrs = dict(layer["attrs"])
    op = attrs.pop("op", None)
    parameter_type = attrs.pop("parameter_type", None)
    layer["op"] = op if op in ("conv", "linear") else trt_op(layer.get("kind"), parameter_type)
    for key, field in _LAYER_FIELDS.items():
        if key in attrs:
            value = attrs.pop(key)
            layer.setdefault(field, value)
    if "tactic_value" in attrs and not layer.get("tactic"):
        layer["tactic"] = str(attrs.pop("tactic_value"))
    for side in ("inputs", "outputs"):
        if isinstance(attrs.get(side), list):
            layer[side] = [_tensor(t) for t in attrs.pop(side)]
    layer["attrs"] = attrs
    return layer


def _plan_from_settings(doc: Doc) -> Any:
    study = doc.get("study") or {}
    settings = study.pop("settings", None)
    if not isinstance(settings, dict) or not settings.get("model"):
        return None
    method = doc.get("method") or {}
    variants = [v for v in doc.get("variants") or [] if isinstance(v, dict)]
    tracers = {(v.get("trace") or {}).get("tracer") for v in variants if isinstance(v.get("trace"), dict)}
    tracer = _TRACERS.get(str(next(iter(tracers))), "none") if len(tracers) == 1 else "none"
    exclude = settings.get("fp8_exclude") or []
    plans = []
    for variant in variants:
        name = str(variant.get("name", ""))
        if name.startswith("fp8-"):
            plans.append({"precision": "fp8", "recipe": name[4:], "exclude": exclude})
        else:
            plans.append({"precision": name, "recipe": None, "exclude": []})
    return {
        "model": settings["model"], "backend": study.get("backend"), "device": study.get("device"),
        "variants": plans, "batch": study.get("batch", settings.get("batch")),
        "timing": {"warmup_s": method.get("warmup_s"), "rounds": method.get("rounds"), "iters": method.get("iters")},
        "tracer": tracer, "trace_calls": settings.get("trace_calls", 1), "images": settings.get("images"),
        "calib_count": settings.get("calib_count", 16), "checkpoint": settings.get("checkpoint"),
        "opt_level": settings.get("opt_level", 3), "seed": 0, "out": None, "raw_trace": None,
    }


def _v1_to_v2(doc: Doc) -> Doc:
    study = doc.get("study")
    if isinstance(study, dict):
        study["plan"] = _plan_from_settings(doc)
    for variant in doc.get("variants") or []:
        if isinstance(variant, dict) and isinstance(variant.get("layers"), list):
            variant["layers"] = [_layer_v1_to_v2(layer) for layer in variant["layers"]]
    doc["schema_version"] = 2
    return doc


def _v2_to_v3(doc: Doc) -> Doc:
    """A merged session stored batch 0 for "several": now None, each job's batch in `merge.jobs`."""
    study = doc.get("study")
    if isinstance(study, dict) and doc.get("merge") is not None and study.get("batch") == 0:
        study["batch"] = None
    doc["schema_version"] = 3
    return doc


STEPS: dict[int, Callable[[Doc], Doc]] = {1: _v1_to_v2, 2: _v2_to_v3}


def migrate(doc: Doc, version: int) -> Doc:
    """`doc` of schema `version`, brought step by step to the current schema."""
    while version in STEPS:
        doc = STEPS[version](doc)
        version += 1
    return doc
