"""Reading what TensorRT writes: engine layer information, per-layer profiles and trtexec times.

The same code reads files from trtexec (`--exportLayerInfo`, `--exportProfile`, `--exportTimes`),
from `IEngineInspector.get_engine_information(JSON)` and from the live backend, TensorRT 7.x to 11.x:
names-only (strings) or DETAILED (objects) layers; `Bindings` (<= 10.x) or `I/O Tensors` (11.x);
`Format/Datatype` or split `Format` / `Datatype` keys; U+001E / U+001F separators (8.6+);
`[profile N]` suffixes; profiles with or without the `{"count": N}` header and `medianMs`.
"""

from __future__ import annotations

import itertools
import math
import re
from dataclasses import dataclass, field
from typing import Any

from sessions.errors import InputError
from sessions.groups import builtin_rules, op_from_name
from sessions.layer_ops import trt_op
from sessions.model import Layer, Tensor
from sessions.vocab import dtype_of

SEPARATORS = re.compile("[\x1e\x1f]")
TACTIC_PRECISION = re.compile(r"(?:^|_)i8|int8|imma|e4m3|fp8", re.IGNORECASE)  # i8i8, i8f16, i8816, int8x4, imma, e4m3
FLOAT_LIKE = ("fp32", "fp16", "bf16", "fp8", "int8", "int4", "fp4")
PROFILE_SUFFIX = re.compile(r" \[profile (\d+)\]$")
ONNX_LAYER = re.compile(r"\[ONNX Layer: (.*?)\]")


def normalize_name(name: str) -> str:
    """One spelling for layer names across versions: separators as ' + ', no profile suffix."""
    return PROFILE_SUFFIX.sub("", SEPARATORS.sub(" + ", name)).strip()


def profile_index(name: str) -> int:
    match = PROFILE_SUFFIX.search(name)
    return int(match.group(1)) if match else 0


def _tensor_dtype(tensor: Any) -> str | None:
    if not isinstance(tensor, dict):
        return None
    for key in ("Format/Datatype", "Datatype", "DataType", "Format"):
        found = dtype_of(tensor.get(key)) if isinstance(tensor.get(key), str) else None
        if found:
            return found
    return None


def _tensor(tensor: Any) -> Tensor:
    if not isinstance(tensor, dict):
        return Tensor(name=str(tensor))
    fmt = tensor.get("Format/Datatype") or " / ".join(str(tensor[k]) for k in ("Format", "Datatype") if k in tensor)
    dims = tensor.get("Dimensions")
    shape = dims if isinstance(dims, list) and all(type(d) is int for d in dims) else None
    return Tensor(name=normalize_name(str(tensor.get("Name", ""))), dtype=_tensor_dtype(tensor), shape=shape,
                  format=str(fmt) if fmt else None)


@dataclass
class LayerInfo:
    layers: list[Layer]
    io_tensors: list[str]
    detailed: bool  # False for names-only files (ProfilingVerbosity LAYER_NAMES_ONLY)
    other_profiles: int = 0  # layers of optimization profiles > 0, left out
    notes: list[str] = field(default_factory=list)


def _layer_list(doc: Any, origin: str) -> list:
    if isinstance(doc, list):
        return doc
    if isinstance(doc, dict):
        for key in ("Layers", "layers", "LayerInfo"):
            if isinstance(doc.get(key), list):
                return doc[key]
    raise InputError(f"{origin}: no 'Layers' list; not TensorRT layer information")


def _io_tensors(doc: Any) -> list[str]:
    if not isinstance(doc, dict):
        return []
    if isinstance(doc.get("I/O Tensors"), list):  # 11.x
        return [normalize_name(str(t.get("Name", t)) if isinstance(t, dict) else str(t)) for t in doc["I/O Tensors"]]
    if isinstance(doc.get("Bindings"), list):
        return [normalize_name(str(b)) for b in doc["Bindings"]]
    return []


def _is_dla(kind_or_name: str) -> bool:
    return op_from_name(kind_or_name, builtin_rules()) == "dla" or bool(re.match(r"^Dla|DLA", kind_or_name))


def named_layer(name: str) -> Layer:
    """A layer known by its name only (names-only layer information, a profile): its op from the name."""
    op = op_from_name(name, builtin_rules())
    return Layer(name=name, kind="unknown", op=op, attrs={"device": "dla"} if op == "dla" else {})


def file_kind(doc: Any) -> str | None:
    """Which TensorRT tool file a document is, in the words of the option that writes it."""
    if isinstance(doc, dict):
        if any(isinstance(doc.get(k), list) for k in ("Layers", "layers", "LayerInfo")):
            return "layer information (--exportLayerInfo or the engine inspector)"
        if "performance_summary" in doc or "inference_options" in doc:
            return "trtexec profile metadata (*.profile.metadata.json): pass it with --metadata"
        if "model_options" in doc or "build_options" in doc:
            return "trtexec build metadata (*.build.metadata.json): pass it with --metadata"
        return None
    if isinstance(doc, list) and doc and all(isinstance(item, dict) for item in doc[:3]):
        first = doc[1] if len(doc) > 1 and "count" in doc[0] and "name" not in doc[0] else doc[0]
        if "name" in first and ("timeMs" in first or "averageMs" in first):
            return "a trtexec --exportProfile file: pass it as --profile"
        if "computeMs" in first or "startEnqMs" in first:
            return "a trtexec --exportTimes file: pass it as --times"
        if "ComputeCapability" in first:
            return "trex device metadata (*.metadata.json): pass it with --metadata"
    return None


def wrong_kind(doc: Any, origin: str, expected: str) -> InputError:
    kind = file_kind(doc)
    found = f"this is {kind}" if kind else "its content is not a TensorRT file this tool knows"
    return InputError(f"{origin}: expected {expected}; {found}")


def parse_layer_info(doc: Any, origin: str) -> LayerInfo:
    if file_kind(doc) is not None and not str(file_kind(doc)).startswith("layer information"):
        raise wrong_kind(doc, origin, "layer information (--exportLayerInfo or the engine inspector)")
    raw = _layer_list(doc, origin)
    layers: list[Layer] = []
    other_profiles = 0
    detailed = any(isinstance(item, dict) for item in raw)
    for position, item in enumerate(raw):
        if isinstance(item, str):
            if profile_index(item):
                other_profiles += 1
                continue
            layers.append(named_layer(normalize_name(item)))
            continue
        if not isinstance(item, dict) or not isinstance(item.get("Name"), str):
            raise InputError(f"{origin}: layer {position} has no name")
        if profile_index(item["Name"]):
            other_profiles += 1
            continue
        layers.append(_detailed_layer(item))
    if not layers:
        raise InputError(f"{origin}: the file lists no layers")
    notes = []
    if not detailed:
        notes.append("names-only layer information: rebuild with --profilingVerbosity=detailed for types, tactics and formats")
    if other_profiles:
        notes.append(f"{other_profiles} layers of optimization profiles above 0 left out")
    return LayerInfo(layers, _io_tensors(doc), detailed, other_profiles, notes)


def compute_precision(inputs: list[Tensor], weights: str | None, tactic: str | None, outputs: list[Tensor]) -> str | None:
    """What a layer computes in: tactic tokens, then weights, then the data inputs; the output dtype last.

    A fused output dequantize makes an INT8 convolution write FP16 or FP32: its output says nothing
    about its arithmetic. Index tensors (int32 / int64 / bool) are not a compute precision.
    """
    if tactic:
        token = TACTIC_PRECISION.search(tactic)
        if token:
            return "fp8" if re.search("e4m3|fp8", token.group(0), re.IGNORECASE) else "int8"
    if weights in ("int8", "fp8", "int4", "fp4"):
        return weights
    for tensors in (inputs, outputs):
        found = next((t.dtype for t in tensors if t.dtype in FLOAT_LIKE), None)
        if found:
            return found
    return next((t.dtype for t in [*inputs, *outputs] if t.dtype), None)


def layer_op(kind: str, parameter_type: str | None, name: str) -> str | None:
    """TensorRT's own type words first; a layer they do not name (or a convolution named MatMul) by its name."""
    rules = builtin_rules()
    op = trt_op(kind, parameter_type) or op_from_name(kind, rules)
    by_name = op_from_name(name, rules)
    if op is None or (op == "conv" and by_name in ("linear", "matmul")):
        return by_name or op  # TensorRT runs a classifier's MatMul as a 1x1 convolution: it is still a linear layer
    return op


def _detailed_layer(item: dict) -> Layer:
    outputs = item.get("Outputs") if isinstance(item.get("Outputs"), list) else []
    inputs = item.get("Inputs") if isinstance(item.get("Inputs"), list) else []
    attrs: dict[str, Any] = {}
    for key, attr in (("StreamId", "stream"), ("Activation", "activation")):
        if item.get(key) not in (None, ""):
            attrs[attr] = item[key]
    weights = item.get("Weights")
    if isinstance(weights, dict) and weights.get("Type"):
        attrs["weights"] = dtype_of(str(weights["Type"])) or str(weights["Type"])
    metadata = item.get("Metadata")
    nodes = ONNX_LAYER.findall(SEPARATORS.sub(" ", metadata)) if isinstance(metadata, str) else []
    tactic = item.get("TacticName") or item.get("TacticValue")
    kind = str(item.get("LayerType") or item.get("ParameterType") or "unknown")
    parameter_type = item.get("ParameterType")
    tensors_in = [_tensor(t) for t in inputs]
    tensors_out = [_tensor(t) for t in outputs]
    name = normalize_name(item["Name"])
    if _is_dla(kind):
        attrs["device"] = "dla"
    return Layer(
        name=name,
        kind=kind,
        op=layer_op(kind, parameter_type if isinstance(parameter_type, str) else None, name),
        precision=compute_precision(tensors_in, attrs.get("weights"), str(item.get("TacticName") or ""), tensors_out),
        groups=_int(item.get("Groups")),
        kernel_shape=_ints(item.get("Kernel")),
        in_channels=tensors_in[0].shape[1] if tensors_in and tensors_in[0].shape and len(tensors_in[0].shape) >= 2 else None,
        out_channels=_int(item.get("OutMaps")),
        stride=_ints(item.get("Stride")),
        inputs=tensors_in,
        outputs=tensors_out,
        tactic=str(tactic) if tactic not in (None, "") else None,
        onnx_nodes=nodes,
        origin=str(item["Origin"]) if item.get("Origin") not in (None, "") else None,
        attrs=attrs,
    )


def _int(value: Any) -> int | None:
    return value if type(value) is int else None


def _ints(value: Any) -> list[int] | None:
    return value if isinstance(value, list) and all(type(v) is int for v in value) else None


@dataclass
class ProfileRecord:
    name: str
    total_ms: float
    average_ms: float
    median_ms: float | None
    percentage: float | None


@dataclass
class Profile:
    count: int | None  # inferences profiled, where the header says
    records: list[ProfileRecord]


MAX_RECORD_VALUE = 1e9  # ms (11 days) or percent: anything larger is a corrupt or forged file


def _number(record: dict, key: str, origin: str, position: int, required: bool = True) -> float | None:
    value = record.get(key)
    if value is None and not required:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError(f"{origin}: record {position} has no numeric {key!r}")
    if not math.isfinite(value) or abs(value) > MAX_RECORD_VALUE:
        raise InputError(f"{origin}: record {position} has {key} = {value:g}, not a time trtexec measures")
    return float(value)


def parse_profile(doc: Any, origin: str) -> Profile:
    kind = file_kind(doc)
    if not isinstance(doc, list) or (kind is not None and "--exportProfile" not in kind):
        raise wrong_kind(doc, origin, "a trtexec --exportProfile file (a JSON list of per-layer records)")
    count = None
    records: list[ProfileRecord] = []
    for position, item in enumerate(doc):
        if not isinstance(item, dict):
            raise InputError(f"{origin}: record {position} is not an object")
        if "count" in item and "name" not in item:
            count = int(item["count"]) if isinstance(item["count"], (int, float)) else None
            continue
        if not isinstance(item.get("name"), str):
            raise InputError(f"{origin}: record {position} has no layer name")
        if profile_index(item["name"]):
            continue
        total = _number(item, "timeMs", origin, position)
        average = _number(item, "averageMs", origin, position, required=False)
        records.append(
            ProfileRecord(
                name=normalize_name(item["name"]),
                total_ms=total,
                average_ms=average if average is not None else total / max(count or 1, 1),
                median_ms=_number(item, "medianMs", origin, position, required=False),
                percentage=_number(item, "percentage", origin, position, required=False),
            )
        )
    if not records:
        raise InputError(f"{origin}: the profile holds no layer records")
    return Profile(count, records)


@dataclass
class Pairing:
    by_position: bool
    matched: int
    unmatched_layers: list[str]
    unmatched_records: list[str]


PAIRING_MIN = 0.9  # of the layers and of the records: below this, the files describe different engines


def layers_from_profile(profile: Profile) -> list[Layer]:
    """Layers named by a profile alone (TensorRT 7 `.profile`, or a profile without layer information)."""
    layers = [named_layer(record.name) for record in profile.records]
    for layer, record in zip(layers, profile.records):
        _apply(layer, record)
    for before, layer in itertools.pairwise(layers):
        if before.op == "dla" and layer.op == "reformat":  # the first GPU reformat after a DLA block waits for the DLA
            layer.op = "dla"
            layer.attrs["device"] = "dla"
            layer.attrs["note"] = "reformatter after a DLA block: its time includes waiting for the DLA"
    return layers


def pair_profile(layers: list[Layer], profile: Profile, origin: str) -> Pairing:
    """Give each layer its profiled time: by position when names agree there, else by name.

    Refuses (InputError) when fewer than PAIRING_MIN of the layers or of the records pair: one
    engine's layers with another engine's profile (fp32 layers, fp16 profile) still share most names.
    """
    names = [layer.name for layer in layers]
    if names == [r.name for r in profile.records]:
        for layer, record in zip(layers, profile.records):
            _apply(layer, record)
        return Pairing(True, len(layers), [], [])
    remaining: dict[str, list[ProfileRecord]] = {}
    for record in profile.records:
        remaining.setdefault(record.name, []).append(record)
    unmatched_layers = []
    matched = 0
    for layer in layers:
        queue = remaining.get(layer.name)
        if queue:
            _apply(layer, queue.pop(0))
            matched += 1
        else:
            unmatched_layers.append(layer.name)
    unmatched_records = [r.name for queue in remaining.values() for r in queue]
    if matched < PAIRING_MIN * len(layers) or matched < PAIRING_MIN * len(profile.records):
        example = unmatched_layers[0] if unmatched_layers else unmatched_records[0] if unmatched_records else "?"
        raise InputError(
            f"{origin} does not pair with the layer information: {matched} of {len(layers)} layers and of "
            f"{len(profile.records)} profile records pair by name, below {PAIRING_MIN:.0%} (first unpaired: {example[:80]!r}); "
            "were both files written for the same engine?"
        )
    return Pairing(False, matched, unmatched_layers, unmatched_records)


def _apply(layer: Layer, record: ProfileRecord) -> None:
    layer.time_ms = record.average_ms
    if record.median_ms is not None:
        layer.attrs["median_ms"] = record.median_ms
    if record.percentage is not None:
        layer.attrs["percentage"] = record.percentage


def parse_times(doc: Any, origin: str) -> tuple[list[float], list[float]]:
    """(GPU compute ms, end-to-end latency ms) per inference from `--exportTimes`."""
    kind = file_kind(doc)
    if not isinstance(doc, list) or not doc or (kind is not None and "--exportTimes" not in kind):
        raise wrong_kind(doc, origin, "a trtexec --exportTimes file (a JSON list of per-inference records)")
    compute, latency = [], []
    for position, item in enumerate(doc):
        if not isinstance(item, dict):
            raise InputError(f"{origin}: record {position} is not an object")
        compute.append(_number(item, "computeMs", origin, position))
        latency.append(_number(item, "latencyMs", origin, position, required=False) or compute[-1])
    return compute, latency
