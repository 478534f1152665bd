"""Engine layer information: what TensorRT says each layer of an engine is.

The same code reads trtexec's `--exportLayerInfo`, `IEngineInspector.get_engine_information(JSON)`
and the live backend's, TensorRT 7.x to 11.x: names-only (strings) or DETAILED (objects) layers;
`Bindings` (<= 10.x) or `I/O Tensors` (11.x); `Format/Datatype` or split `Format` / `Datatype` keys;
U+001E / U+001F separators (8.6+); `[profile N]` suffixes. A layer's op comes from the type TensorRT
states (`sessions.documents.layer_ops`), refined by the ONNX nodes it was built from; a names-only layer's from
its nodes' names (`sessions.analyses.groups.op_from_name`).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from typing import Any

from profilers.trt_import.kinds import LAYERS, FileKind, Role, kind_of, register_kind, register_role, wrong_kind
from sessions.analyses.groups import builtin_rules, name_parts, op_from_name
from sessions.documents.errors import InputError
from sessions.documents.layer_ops import trt_op
from sessions.documents.model import Layer, Tensor
from sessions.documents.trt_names import tactic_math
from sessions.documents.trt_names import tactic_precision as vocab_tactic_precision
from sessions.documents.vocab import dtype_of as vocab_dtype_of

dtype_of = functools.lru_cache(maxsize=4096)(vocab_dtype_of)  # format strings repeat across a file's tensors
# an engine runs a few hundred kernels across its layers: each tactic name's regex search done once
tactic_precision = functools.lru_cache(maxsize=4096)(vocab_tactic_precision)

SEPARATORS = re.compile("[\x1e\x1f]")
FLOAT_LIKE = ("fp32", "fp16", "bf16", "fp8", "int8", "int4", "fp4")
PROFILE_SUFFIX = re.compile(r" \[profile (\d+)\]$")
ONNX_LAYER = re.compile(r"\[ONNX Layer: ([^\]\n]*)\]")  # `(.*?)\]`'s name, without trying `\]` at every character


def normalize_name(name: str) -> str:
    """One spelling for layer names across versions: separators as ' + ', no profile suffix."""
    if "\x1e" not in name and "\x1f" not in name and not name.endswith("]"):
        return name.strip()  # most names: nothing to replace
    return PROFILE_SUFFIX.sub("", SEPARATORS.sub(" + ", name)).strip()


def profile_index(name: str) -> int:
    if "[profile " not in name:
        return 0  # most names: no suffix to look for
    match = PROFILE_SUFFIX.search(name)
    return int(match.group(1)) if match else 0


DTYPE_KEYS = ("Format/Datatype", "Datatype", "DataType", "Format")  # where a tensor's dtype is written, first first
TENSOR_KEYS = frozenset({"Name", "Dimensions", *DTYPE_KEYS})  # every key `_tensor` reads of a tensor record
INT = {int}


def _tensor_dtype(tensor: dict[str, Any]) -> str | None:
    for key in DTYPE_KEYS:
        value = tensor.get(key)
        if isinstance(value, str):
            found = dtype_of(value)
            if found:
                return found
    return None


def _tensor(tensor: Any) -> Tensor:
    if not isinstance(tensor, dict):
        return Tensor(name=str(tensor))
    fmt = tensor.get("Format/Datatype")
    # most tensors: a "Format/Datatype" string that names the dtype (the first key _tensor_dtype reads)
    dtype = dtype_of(fmt) if type(fmt) is str else None
    if dtype is None:
        dtype = _tensor_dtype(tensor)
    if not fmt:
        fmt = " / ".join(str(tensor[k]) for k in ("Format", "Datatype") if k in tensor)
    dims = tensor.get("Dimensions")
    shape = dims if _readable_dimensions(dims) else None
    name = tensor.get("Name", "")
    return Tensor(normalize_name(name if type(name) is str else str(name)), dtype, shape, str(fmt) if fmt else None)


def _readable_dimensions(dims: Any) -> bool:
    """Whether a tensor record's `Dimensions` is a list of whole numbers (-1 for a dynamic one): a shape."""
    return type(dims) is list and INT.issuperset(map(type, dims))


def _unread_dimensions(item: dict) -> set[str]:
    """The names of the tensors of a layer record whose `Dimensions` is given but is not a shape (they get none): a
    tensor is listed by the layer writing it and by each reading it, and counts once."""
    tensors = [t for key in ("Inputs", "Outputs") if isinstance(item.get(key), list) for t in item[key]]
    return {str(t.get("Name", id(t))) for t in tensors
            if isinstance(t, dict) and "Dimensions" in t and not _readable_dimensions(t["Dimensions"])}


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


@functools.lru_cache(maxsize=1024)
def _is_dla(kind_or_name: str) -> bool:
    return op_from_name(kind_or_name, builtin_rules()) == "dla" or bool(re.match(r"^Dla|DLA", kind_or_name))


def named_layer(name: str) -> Layer:
    """A layer known by its name only (names-only layer information, a profile): its op from the name."""
    op = op_from_name(name, builtin_rules())
    return Layer(name=name, kind="unknown", op=op, attrs={"device": "dla"} if op == "dla" else {})


LAYER_INFO_WORDS = "layer information (--exportLayerInfo or the engine inspector)"
register_role(Role(LAYERS, "layer information (--exportLayerInfo or IEngineInspector JSON)", order=1))
register_kind(FileKind(
    LAYER_INFO_WORDS, LAYERS, rank=10, suffixes=(".graph.json", ".layers.json"),
    head=r'^\s*\{\s*"(?:Layers|layers|LayerInfo)"\s*:\s*\[',
    recognise=lambda doc: isinstance(doc, dict) and any(
        isinstance(doc.get(k), list) for k in ("Layers", "layers", "LayerInfo"))))


def parse_layer_info(doc: Any, origin: str) -> LayerInfo:
    kind = kind_of(doc)
    if kind is not None and kind.role != LAYERS:
        raise wrong_kind(doc, origin, LAYER_INFO_WORDS)
    raw = _layer_list(doc, origin)
    layers: list[Layer] = []
    other_profiles = bare = 0
    unread_dimensions: set[str] = set()
    detailed = any(isinstance(item, dict) for item in raw)
    for position, item in enumerate(raw):
        if isinstance(item, str):
            if profile_index(item):
                other_profiles += 1
                continue
            layers.append(named_layer(normalize_name(item)))
            bare += 1
            continue
        if not isinstance(item, dict) or not isinstance(item.get("Name"), str):
            raise InputError(f"{origin}: layer {position} has no name")
        if profile_index(item["Name"]):
            other_profiles += 1
            continue
        layers.append(_detailed_layer(item))
        unread_dimensions |= _unread_dimensions(item)
    if not layers:
        raise InputError(f"{origin}: the file lists no layers")
    notes = []
    if not detailed:
        notes.append("names-only layer information: rebuild with --profilingVerbosity=detailed "
                     "for types, tactics and formats")
    elif bare:
        notes.append(f"layers listed by name alone among detailed records (types, tactics and formats unknown, ops "
                     f"guessed from the names): {bare} of {len(layers)}")
    if unread_dimensions:
        notes.append("tensors whose Dimensions are not a list of whole numbers (they have no shape): "
                     f"{len(unread_dimensions)}")
    if other_profiles:
        notes.append(f"{other_profiles} layers of optimization profiles above 0 left out")
    return LayerInfo(layers, _io_tensors(doc), detailed, other_profiles, notes)


def compute_precision(inputs: list[Tensor], weights: str | None, tactic: str | None,
                      outputs: list[Tensor]) -> str | None:
    """What a layer computes in: tactic tokens, then weights, then the data inputs; the output dtype last.

    A fused output dequantize makes an INT8 convolution write FP16 or FP32: its output says nothing
    about its arithmetic. Index tensors (int32 / int64 / bool) are not a compute precision.
    """
    from_tactic = tactic_precision(tactic)
    if from_tactic:
        return from_tactic
    if weights in ("int8", "fp8", "int4", "fp4"):
        return weights
    for tensors in (inputs, outputs):
        for tensor in tensors:
            if tensor.dtype in FLOAT_LIKE:
                return tensor.dtype
    return next((t.dtype for t in [*inputs, *outputs] if t.dtype), None)


NODE_TYPE = re.compile(r"([A-Za-z][A-Za-z0-9]*?)(?:_\d+)*$")  # of the last path component: `Gemm`, `Gemm_48` -> Gemm
LINEAR_NODES = {"Gemm", "MatMul", "FullyConnected"}
LINEAR_WORD = re.compile("|".join(LINEAR_NODES))  # a linear node's word anywhere in a name
CONV_NODES = {"Conv", "ConvTranspose", "Conv2D", "convolution"}


def node_types(nodes: list[str]) -> set[str]:
    """The ONNX (or TF) op types of node names that carry one: the last path component, numbering dropped."""
    return {match.group(1) for node in nodes if (match := NODE_TYPE.match(node.rpartition("/")[2]))}


@functools.lru_cache(maxsize=1024)
def _type_op(kind: str, parameter_type: str | None) -> str | None:
    """The op TensorRT's type words give (a layer file holds a few kinds, each many times)."""
    return trt_op(kind, parameter_type) or op_from_name(kind, builtin_rules())


def layer_op(kind: str, parameter_type: str | None, name: str, nodes: list[str]) -> str | None:
    """TensorRT's own type words first; a layer they do not name by its nodes' names.

    TensorRT runs a Gemm or MatMul node as a convolution: a Convolution built from such nodes and
    from no Conv node is a linear layer.
    """
    op = _type_op(kind, parameter_type)
    if op is None:
        return op_from_name(name, builtin_rules())
    if op != "conv":
        return op
    parts = nodes or name_parts(name)
    if not any(map(LINEAR_WORD.search, parts)):  # most convolutions: no linear node
        return op
    types = node_types(parts)
    return "linear" if types & LINEAR_NODES and not types & CONV_NODES else op


# every key `_detailed_layer` reads of a layer record (with `_field`'s `Conv` spellings): a reader that converts
# only these (the text of `--dumpLayerInfo`) gives the layer a JSON record gives
READ_KEYS = frozenset({"Name", "Inputs", "Outputs", "StreamId", "Activation", "Weights", "ConvWeights", "Metadata",
                       "TacticName", "TacticValue", "LayerType", "ParameterType", "Groups", "ConvGroups", "Kernel",
                       "ConvKernel", "OutMaps", "ConvOutMaps", "Stride", "ConvStride", "Origin"})


def _detailed_layer(item: dict) -> Layer:
    outputs = item.get("Outputs")
    inputs = item.get("Inputs")
    attrs: dict[str, Any] = {}
    for key, attr in (("StreamId", "stream"), ("Activation", "activation")):
        value = item.get(key)
        if isinstance(value, (str, int)) and not isinstance(value, bool) and value != "":
            attrs[attr] = value  # scalars only: what a session stores must be what TensorRT writes
    weights = _field(item, "Weights")
    if isinstance(weights, dict) and weights.get("Type"):
        attrs["weights"] = dtype_of(str(weights["Type"])) or str(weights["Type"])
    metadata = item.get("Metadata")
    if isinstance(metadata, str):
        nodes = ONNX_LAYER.findall(metadata.replace("\x1e", " ").replace("\x1f", " "))
    else:
        nodes = []
    tactic = item.get("TacticName") or item.get("TacticValue")
    kind = str(item.get("LayerType") or item.get("ParameterType") or "unknown")
    parameter_type = item.get("ParameterType")
    tensors_in = list(map(_tensor, inputs)) if isinstance(inputs, list) else []
    tensors_out = list(map(_tensor, outputs)) if isinstance(outputs, list) else []
    name = normalize_name(item["Name"])
    if _is_dla(kind):
        attrs["device"] = "dla"
    precision = compute_precision(tensors_in, attrs.get("weights"), str(item.get("TacticName") or ""), tensors_out)
    if precision == "fp32" and tactic_math(str(item.get("TacticName") or "")):
        attrs["math"] = tactic_math(str(item.get("TacticName")))
    return Layer(
        name=name,
        kind=kind,
        op=layer_op(kind, parameter_type if isinstance(parameter_type, str) else None, name, nodes),
        precision=precision,
        groups=_int(_field(item, "Groups")),
        kernel_shape=_ints(_field(item, "Kernel")),
        in_channels=(tensors_in[0].shape[1] if tensors_in and tensors_in[0].shape and len(tensors_in[0].shape) >= 2
                     else None),
        out_channels=_int(_field(item, "OutMaps")),
        stride=_ints(_field(item, "Stride")),
        inputs=tensors_in,
        outputs=tensors_out,
        tactic=str(tactic) if tactic not in (None, "") else None,
        onnx_nodes=nodes,
        origin=str(item["Origin"]) if item.get("Origin") not in (None, "") else None,
        attrs=attrs,
    )


def _field(item: dict, key: str) -> Any:
    """A convolution parameter: `Kernel`, or `ConvKernel` in a fused ConvActPool layer."""
    return item[key] if key in item else item.get("Conv" + key)


def _int(value: Any) -> int | None:
    return value if type(value) is int and value >= 0 else None


def _ints(value: Any) -> list[int] | None:
    return (value if isinstance(value, list) and INT.issuperset(map(type, value)) and (not value or min(value) >= 0)
            else None)
