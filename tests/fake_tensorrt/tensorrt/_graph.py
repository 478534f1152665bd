"""The stand-in's "builder": an ONNX graph turned into layers shaped like TensorRT's DETAILED records.

Copies the shape of real engine-inspector output (../shared/fixtures/trtexec), never its content:
fused names joined with " + ", `LayerType` / `ParameterType`, tensors with `Format/Datatype`,
`TacticName`, `Metadata` with `[ONNX Layer: ...]` entries. Tactics, kernels and times are synthetic
and every tactic name starts with `stand_in_`.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper, shape_inference, version_converter

FP8_OPSET = 19  # QuantizeLinear / DequantizeLinear with float8 zero points
WEIGHT_OPS = {"Constant", "Identity"}
COMPUTE_OPS = {"Conv", "Gemm", "MatMul"}
FUSED_AFTER = {"BatchNormalization", "Relu", "Sigmoid", "Clip", "HardSwish", "Silu"}
QDQ = {"QuantizeLinear", "DequantizeLinear"}
FORMATS = {  # element type -> (Format/Datatype token, tactic token)
    TensorProto.FLOAT: ("FP32", "f32"), TensorProto.FLOAT16: ("FP16", "f16"),
    TensorProto.BFLOAT16: ("BFloat16", "bf16"),
    TensorProto.FLOAT8E4M3FN: ("FP8", "e4m3"), TensorProto.INT8: ("Int8", "i8"), TensorProto.INT32: ("Int32", "i32"),
    TensorProto.INT64: ("Int64", "i64"), TensorProto.BOOL: ("Bool", "b"), TensorProto.UINT8: ("UInt8", "u8"),
}
LAYER_TYPES = {  # ONNX op -> (LayerType, ParameterType)
    "Conv": ("CaskConvolution", "Convolution"), "Gemm": ("CaskGemmConvolution", "Convolution"),
    "MatMul": ("CaskGemmMatrixMultiply", "MatrixMultiply"), "MaxPool": ("CaskPooling", "Pooling"),
    "AveragePool": ("CaskPooling", "Pooling"), "GlobalAveragePool": ("CaskReduce", "Reduce"),
    "ReduceMean": ("CaskReduce", "Reduce"), "Flatten": ("NoOp", "Shuffle"), "Reshape": ("NoOp", "Shuffle"),
    "QuantizeLinear": ("Reformat", "Reformat"), "DequantizeLinear": ("Reformat", "Reformat"),
    "Concat": ("Reformat", "Concatenation"), "Softmax": ("CaskSoftMax", "Softmax"),
}


@dataclass
class Layer:
    record: dict  # the DETAILED record, as the engine inspector prints it
    kernel: str | None  # the synthetic kernel one enqueue launches for it (None: a no-op layer)
    time_ms: float  # the synthetic time the profiler reports

    @property
    def name(self) -> str:
        return self.record["Name"]


def standardize(model: onnx.ModelProto) -> onnx.ModelProto:
    """TensorRT's own `trt::TRT_FP8QuantizeLinear` / `...Dequantize...` as standard FP8 Q/DQ (opset 19),
    so that onnxruntime runs the graph and shape inference sees through it."""
    custom = [node for node in model.graph.node if node.domain == "trt"]
    if not custom:
        return model
    for node in custom:
        node.op_type, node.domain = node.op_type.replace("TRT_FP8", ""), ""
    target = max(FP8_OPSET, _opset(model))
    model = version_converter.convert_version(model, target)
    zero = helper.make_tensor("stand_in_fp8_zero_point", TensorProto.FLOAT8E4M3FN, [], [0.0])
    model.graph.initializer.append(zero)
    for node in model.graph.node:
        if node.op_type in QDQ and len(node.input) == 2:
            node.input.append(zero.name)
    del model.opset_import[:]
    model.opset_import.append(helper.make_opsetid("", target))
    return model


def _opset(model: onnx.ModelProto) -> int:
    return max((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), default=FP8_OPSET)


def for_execution(model: onnx.ModelProto) -> onnx.ModelProto:
    """A float32 copy: onnxruntime's CPU kernels lack fp16 / bf16 convolutions. FP8 Q/DQ stays exact."""
    model = onnx.ModelProto.FromString(model.SerializeToString())
    wide = {TensorProto.FLOAT16, TensorProto.BFLOAT16}
    graph = model.graph
    for index, tensor in enumerate(graph.initializer):
        if tensor.data_type in wide:
            graph.initializer[index].CopyFrom(_float32(tensor))
    for node in graph.node:
        for attribute in node.attribute:
            if attribute.name == "to" and attribute.i in wide:
                attribute.i = TensorProto.FLOAT
            if attribute.type == onnx.AttributeProto.TENSOR and attribute.t.data_type in wide:
                attribute.t.CopyFrom(_float32(attribute.t))
    for value in [*graph.input, *graph.output]:
        if value.type.tensor_type.elem_type in wide:
            value.type.tensor_type.elem_type = TensorProto.FLOAT
    del graph.value_info[:]
    return model


def _float32(tensor: TensorProto) -> TensorProto:
    return numpy_helper.from_array(numpy_helper.to_array(tensor).astype(np.float32), tensor.name)


def value_types(model: onnx.ModelProto) -> dict[str, tuple[int, list[int]]]:
    """Element type and dimensions (-1 where free) of every value, inputs and outputs included."""
    inferred = shape_inference.infer_shapes(model)
    graph = inferred.graph
    types = {}
    for value in [*graph.input, *graph.value_info, *graph.output]:
        tensor_type = value.type.tensor_type
        types[value.name] = (tensor_type.elem_type,
                             [d.dim_value if d.HasField("dim_value") else -1 for d in tensor_type.shape.dim])
    for tensor in graph.initializer:
        types[tensor.name] = (tensor.data_type, list(tensor.dims))
    return types


def fixed(model: onnx.ModelProto, shapes: dict[str, list[int]]) -> onnx.ModelProto:
    """`model` with its inputs' free dimensions pinned (an optimization profile's shapes)."""
    model = onnx.ModelProto.FromString(model.SerializeToString())
    for value in model.graph.input:
        if value.name in shapes:
            for dim, size in zip(value.type.tensor_type.shape.dim, shapes[value.name], strict=False):
                dim.Clear()
                dim.dim_value = size
    return model


def build_layers(model: onnx.ModelProto) -> list[Layer]:
    """Layers in execution order: Constant / Identity (weights) dropped, weight Q/DQ and activation
    DQ fused into the convolution or GEMM that reads them, with the BatchNorm / activation after it."""
    graph = model.graph
    types = value_types(model)
    weights = {t.name for t in graph.initializer}
    consumers: dict[str, list[onnx.NodeProto]] = {}
    for node in graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)
        if node.op_type in WEIGHT_OPS and all(i in weights or not i for i in node.input):
            weights.update(node.output)
    taken: set[int] = set()
    layers = []
    for node in graph.node:
        if id(node) in taken or node.op_type in WEIGHT_OPS:
            continue
        if node.op_type in QDQ and all(i in weights or not i for i in node.input):
            weights.update(node.output)  # a weight's Q or DQ: part of the layer that reads it
            continue
        if node.op_type == "DequantizeLinear" and _feeds_compute(node, consumers):
            continue  # fused into the convolution below
        group = _fused(node, graph, consumers, weights)
        taken.update(id(n) for n in group)
        layers.append(_layer(group, types, weights))
    return layers


def _feeds_compute(node: onnx.NodeProto, consumers) -> bool:
    readers = consumers.get(node.output[0], [])
    return len(readers) == 1 and readers[0].op_type in COMPUTE_OPS


def _fused(node: onnx.NodeProto, graph, consumers, weights: set[str]) -> list[onnx.NodeProto]:
    if node.op_type not in COMPUTE_OPS:
        return [node]
    producers = {output: n for n in graph.node for output in n.output}
    before = [producers[i] for i in node.input if i in producers and producers[i].op_type == "DequantizeLinear"
              and i not in weights]
    group = [*before, node]
    while True:
        readers = consumers.get(group[-1].output[0], [])
        if len(readers) != 1 or readers[0].op_type not in FUSED_AFTER:
            return group
        group.append(readers[0])


def _layer(group: list[onnx.NodeProto], types, weights: set[str]) -> Layer:
    main = next((n for n in group if n.op_type in COMPUTE_OPS), group[0])
    layer_type, parameter_type = LAYER_TYPES.get(main.op_type, ("PointWiseV2", "PointWise"))
    inside = {output for node in group for output in node.output}
    inputs = [i for node in group for i in node.input if i and i not in inside and i not in weights]
    outputs = [group[-1].output[0]]
    record = {
        "Name": " + ".join(node.name or node.output[0] for node in group),
        "LayerType": layer_type,
        "Inputs": [_tensor(name, types) for name in inputs],
        "Outputs": [_tensor(name, types) for name in outputs],
        "ParameterType": parameter_type,
        **_parameters(main, types, weights),
    }
    tokens = "".join(FORMATS.get(types.get(n, (0, []))[0], ("", "x"))[1] for n in (inputs[:1] + outputs))
    kernel = None if layer_type == "NoOp" else f"stand_in_{parameter_type.lower()}_{tokens}"
    if kernel:
        record["TacticName"] = kernel
        record["TacticValue"] = "0x" + hashlib.sha256(record["Name"].encode()).hexdigest()[:16]
    if main.op_type in QDQ:
        record["Origin"] = "QDQ"
    record["StreamId"] = 0
    record["Metadata"] = "\x1e".join(f"[ONNX Layer: {node.name}]" for node in group)
    elements = int(np.prod([max(d, 1) for d in types.get(outputs[0], (0, [1]))[1]]))
    return Layer(record, kernel, 0.0 if kernel is None else round(0.002 + elements * 1e-7, 6))


def _tensor(name: str, types) -> dict:
    elem_type, dims = types.get(name, (TensorProto.FLOAT, []))
    token = FORMATS.get(elem_type, ("Float", ""))[0]
    return {"Name": name, "Location": "Device", "Dimensions": dims,
            "Format/Datatype": f"Row major linear {token} format"}


def _parameters(node: onnx.NodeProto, types, weights: set[str]) -> dict:
    attributes = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    if node.op_type == "Conv":
        weight_type, weight_dims = types.get(node.input[1], (TensorProto.FLOAT, [0, 0, 1, 1]))
        return {
            "Kernel": list(attributes.get("kernel_shape", weight_dims[2:])),
            "Stride": list(attributes.get("strides", [1, 1])),
            "OutMaps": weight_dims[0] if weight_dims else None, "Groups": int(attributes.get("group", 1)),
            "Weights": {"Type": FORMATS.get(weight_type, ("Float", ""))[0], "Count": int(np.prod(weight_dims or [0]))},
        }
    if node.op_type in ("Gemm", "MatMul"):
        weight_dims = types.get(node.input[1], (TensorProto.FLOAT, [0, 0]))[1]
        transposed = attributes.get("transB", 0)
        return {"Kernel": [1, 1], "OutMaps": weight_dims[0 if transposed else -1] if weight_dims else None, "Groups": 1}
    if node.op_type in ("MaxPool", "AveragePool"):
        return {"PoolingType": "MAX" if node.op_type == "MaxPool" else "AVERAGE",
                "WindowSize": list(attributes.get("kernel_shape", [])),
                "Stride": list(attributes.get("strides", [1, 1]))}
    return {}


def check_scales(model: onnx.ModelProto) -> str | None:
    """Why TensorRT's ONNX parser would refuse the graph's Q/DQ scales (each must be positive), or None."""
    values = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    for node in model.graph.node:
        if node.op_type == "Constant" and node.attribute and node.attribute[0].type == onnx.AttributeProto.TENSOR:
            values[node.output[0]] = numpy_helper.to_array(node.attribute[0].t)
        elif node.op_type == "Identity" and node.input[0] in values:
            values[node.output[0]] = values[node.input[0]]
    for node in model.graph.node:
        if node.op_type.replace("TRT_FP8", "") in QDQ and len(node.input) > 1 and node.input[1] in values:
            scale = np.asarray(values[node.input[1]], dtype=np.float64)
            if not np.all(np.isfinite(scale) & (scale > 0)):
                return f"{node.name}: a Q/DQ scale is not positive ({scale.min():g}); scales must be positive"
    return None
