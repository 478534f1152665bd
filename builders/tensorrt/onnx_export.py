"""ONNX files for TensorRT: an fp16 graph, and FP8 graphs with standard QuantizeLinear/DequantizeLinear.

Exported with the TorchScript exporter (`dynamo=False`, which ModelOpt's quantizers need). ModelOpt
emits FP8 quantizers as TensorRT's custom `trt::TRT_FP8QuantizeLinear` / `TRT_FP8DequantizeLinear`;
`standard_fp8_qdq` rewrites them into the standard ONNX ops with a `float8e4m3fn` zero point
(opset >= 19), which TensorRT's parser reads as well and onnxruntime can run, so the FP8 graph can be
checked numerically against the module's simulated FP8.

Weights: `fp8_weight_initializers` stores each quantized weight as a `float8e4m3fn` initializer read
by a DequantizeLinear, per tensor or per output channel (`axis=0`, one scale per channel of the
[out, in/groups, kh, kw] or [out, in] kernel), which is TensorRT's weight path (activations stay
per-tensor Q -> DQ). ModelOpt refuses to export per-channel E4M3, so the export itself runs with a
per-tensor placeholder amax and the per-channel scales are written afterwards, from the quantizers.

Scales: the graph stores each scale (amax / 448) in the input's dtype, fp16 for an fp16 model, while
ModelOpt's fake quantization divides by the fp32 amax. `match_graph_scales` first sets every FP8
quantizer's amax to 448 x the fp16 scale the graph will hold, floored at the smallest normal fp16
value, so the module simulates exactly the graph's quantizers. The floor matters: a quantizer that
saw only zeros has amax ~1e-6, a scale of 0 in fp16, and TensorRT rejects non-positive scales, while
onnxruntime turns 0 / 0 into NaN.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from builders.fp8.format import E4M3_MAX, FP8, MIN_SCALE, amax_scale
from sessions.documents.errors import InspectError, first_line
from sessions.documents.storage import write_atomically

# ModelOpt 0.47's export opset; TensorRT 10.0 parses opsets 9-20 (onnx-tensorrt docs/operators.md),
# and it is the newest opset the TorchScript exporter writes.
OPSET = 20
QUANTIZE_OPS = {"TRT_FP8QuantizeLinear", "QuantizeLinear"}
DEQUANTIZE_OPS = {"TRT_FP8DequantizeLinear", "DequantizeLinear"}
TRT_TO_STANDARD = {"TRT_FP8QuantizeLinear": "QuantizeLinear", "TRT_FP8DequantizeLinear": "DequantizeLinear"}
ZERO_POINT = "fp8_e4m3_zero_point"


def export(module, example, path: Path) -> Path:
    """Writes `module` as ONNX; its FP8 quantizers' amax are first rounded to the graph's scales."""
    import warnings

    import onnx
    import torch

    path.parent.mkdir(parents=True, exist_ok=True)
    match_graph_scales(module)
    weight_amax = fp8_weight_amax(module)
    buffer = io.BytesIO()
    with warnings.catch_warnings(), contextlib.redirect_stdout(None), torch.no_grad(), _per_tensor_placeholders(module):
        warnings.simplefilter("ignore")
        try:
            torch.onnx.export(
                module, (example,), buffer, opset_version=OPSET, dynamo=False,
                input_names=["input"], output_names=["logits"],
            )
        except Exception as exc:  # noqa: BLE001  (the exporter raises many types; the user needs the first line)
            raise InspectError(f"ONNX export failed: {first_line(exc)}") from None
    model = fp8_weight_initializers(standard_fp8_qdq(onnx.load_from_string(buffer.getvalue())), weight_amax)
    return write_atomically(path, model.SerializeToString(), "ONNX file")


def _fp8_quantizers(module):
    """(module path, quantizer name, quantizer) of every enabled FP8 quantizer with an amax."""
    try:
        from modelopt.torch.quantization.nn import TensorQuantizer
    except ImportError:  # no ModelOpt, no FP8 quantizers
        return
    for path, sub in module.named_modules():
        for name, quantizer in sub.named_children():
            if (isinstance(quantizer, TensorQuantizer) and quantizer.is_enabled and quantizer.num_bits == (4, 3)
                    and quantizer.amax is not None):
                yield path, name, quantizer


def fp8_weight_amax(module) -> dict:
    """Parameter name (the exported initializer's name) -> its weight quantizer's amax (fp32, per tensor or channel)."""
    return {f"{path}.weight": quantizer.amax.detach().float().clone()
            for path, name, quantizer in _fp8_quantizers(module) if name == "weight_quantizer"}


@contextlib.contextmanager
def _per_tensor_placeholders(module):
    """Per-channel weight amax replaced by their maximum while ModelOpt exports (it exports E4M3 per tensor only)."""
    saved = []
    for _, name, quantizer in list(_fp8_quantizers(module)):
        if name == "weight_quantizer" and quantizer.amax.numel() > 1:
            saved.append((quantizer, quantizer._amax))
            quantizer._amax = quantizer._amax.max().reshape(())
    try:
        yield
    finally:
        for quantizer, amax in saved:
            quantizer._amax = amax


def fp8_weight_codes(weight, amax):
    """`weight` in float8e4m3fn at scale amax / 448 (amax broadcast over output channels): ModelOpt's own arithmetic."""
    import torch

    return (torch.tensor(weight, dtype=torch.float32) * (E4M3_MAX / amax.float())).clamp(-E4M3_MAX, E4M3_MAX).to(FP8)


def fp8_weight_initializers(model, weight_amax: dict):
    """Each weight's QuantizeLinear -> DequantizeLinear becomes a float8e4m3fn initializer -> DequantizeLinear.

    The DQ gets the scale amax / 448 of `weight_amax[weight]` in the graph's scale dtype: a scalar, or
    one per output channel with `axis=0`. A quantized weight without a quantizer, or a quantizer whose
    weight the graph does not quantize, is an InspectError: a scale is never silently left per-tensor.
    """
    import onnx
    import torch
    from onnx import helper, numpy_helper

    graph = model.graph
    initializers = {t.name: t for t in graph.initializer}
    # the exporter keeps one copy of identical weights (e.g. all-zero folded kernels) and names the others
    # through Identity nodes
    constants = dict(initializers)
    constants.update({n.output[0]: initializers[n.input[0]] for n in graph.node
                      if n.op_type == "Identity" and n.input[0] in initializers})
    consumers: dict[str, list] = {}
    for node in graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)
    pending = dict(weight_amax)
    removed = []
    for q in [n for n in graph.node if n.op_type == "QuantizeLinear" and n.input[0] in constants]:
        weight = q.input[0]
        dq = consumers.get(q.output[0], [])
        if weight not in pending or len(dq) != 1 or dq[0].op_type != "DequantizeLinear":
            raise InspectError(f"ONNX export: the graph quantizes {weight}, "
                               "which has no FP8 weight quantizer of its own")
        amax = pending.pop(weight)
        codes = fp8_weight_codes(numpy_helper.to_array(constants[weight]), amax)
        scale_dtype = numpy_helper.to_array(initializers[dq[0].input[1]]).dtype
        scale = amax_scale(amax).numpy().astype(scale_dtype)
        scale = scale.reshape(-1) if amax.numel() > 1 else scale.reshape(())
        graph.initializer.extend([
            helper.make_tensor(f"{weight}_fp8", onnx.TensorProto.FLOAT8E4M3FN, list(codes.shape),
                               codes.view(torch.uint8).numpy().tobytes(), raw=True),
            numpy_helper.from_array(scale.copy(), f"{weight}_scale"),
        ])
        del dq[0].input[:]
        dq[0].input.extend([f"{weight}_fp8", f"{weight}_scale"])
        if amax.numel() > 1:
            dq[0].attribute.append(helper.make_attribute("axis", 0))
        removed.append(q)
    if pending:
        raise InspectError(f"ONNX export: {len(pending)} FP8 weights are not quantized in the graph, "
                           f"e.g. {next(iter(pending))}")
    for q in removed:
        graph.node.remove(q)
    _drop_unused(graph, {q.output[0] for q in removed})
    return model


def _drop_unused(graph, tensors: set[str]) -> None:
    """Identity nodes and initializers no node reads any more, and the value_info of `tensors` (removed outputs)."""
    used = {name for node in graph.node for name in node.input} | {o.name for o in graph.output}
    dead = [n for n in graph.node if n.op_type == "Identity" and n.output[0] not in used]
    for node in dead:
        graph.node.remove(node)
    tensors = tensors | {n.output[0] for n in dead}
    used = {name for node in graph.node for name in node.input} | {o.name for o in graph.output}
    kept = [t for t in graph.initializer if t.name in used]
    del graph.initializer[:]
    graph.initializer.extend(kept)
    info = [v for v in graph.value_info if v.name not in tensors]
    del graph.value_info[:]
    graph.value_info.extend(info)


def match_graph_scales(module) -> int:
    """Each enabled FP8 quantizer's amax := 448 x max(fp16(amax / 448), MIN_SCALE); returns how many were floored."""
    import torch

    floored = 0
    for _, _, quantizer in _fp8_quantizers(module):
        amax = quantizer.amax
        if not bool(torch.isfinite(amax).all()):
            raise InspectError("ONNX export: an FP8 quantizer's amax is not finite")
        scale = amax_scale(amax.detach().float()).to(torch.float16).float()
        floored += int((scale < MIN_SCALE).any())
        # fp32: an fp16 amax buffer cannot hold 448 x an fp16 scale exactly
        amax.data = scale.clamp(min=MIN_SCALE) * E4M3_MAX
    return floored


def standard_fp8_qdq(model, min_scale: float = MIN_SCALE):
    """TensorRT's FP8 Q/DQ custom ops as standard ONNX ops; every Q/DQ scale an initializer >= min_scale.

    Q gets a float8e4m3fn zero point of 0 and `saturate=1` (values past +-448 clamp, as ModelOpt's
    fake quantization does); DQ's output type follows its scale, as the custom op's did.
    """
    import numpy as np
    import onnx
    from onnx import helper, numpy_helper

    graph = model.graph
    qdq = [n for n in graph.node if n.op_type in QUANTIZE_OPS | DEQUANTIZE_OPS]
    if not qdq:
        return model
    constants = {n.output[0]: n for n in graph.node if n.op_type == "Constant"}
    initializers = {t.name: t for t in graph.initializer}

    def floored(array: np.ndarray) -> np.ndarray:
        if not np.all(np.isfinite(array)):
            raise InspectError("ONNX export: a Q/DQ scale is not finite (a quantizer's amax is NaN or infinite)")
        return np.maximum(array, np.asarray(min_scale, dtype=array.dtype)).astype(array.dtype)

    moved = set()
    for scale in dict.fromkeys(node.input[1] for node in qdq):
        if scale in constants:
            value = numpy_helper.to_array(next(a.t for a in constants[scale].attribute if a.name == "value"))
            graph.initializer.append(numpy_helper.from_array(floored(value), scale))
            moved.add(scale)
        elif scale in initializers:
            initializers[scale].CopyFrom(
                numpy_helper.from_array(floored(numpy_helper.to_array(initializers[scale])), scale)
            )
        else:
            raise InspectError(f"ONNX export: the Q/DQ scale {scale} is computed in the graph, not a constant")
    quantized = set()
    for node in qdq:
        if node.op_type not in TRT_TO_STANDARD:
            continue
        node.op_type, node.domain = TRT_TO_STANDARD[node.op_type], ""
        if node.op_type == "QuantizeLinear":
            node.input.append(ZERO_POINT)
            node.attribute.append(helper.make_attribute("saturate", 1))
            quantized.add(node.output[0])
    kept = [n for n in graph.node if not (n.op_type == "Constant" and n.output[0] in moved)]  # copies
    del graph.node[:]
    graph.node.extend(kept)
    for info in graph.value_info:  # the custom op declared its output uint8
        if info.name in quantized:
            info.type.tensor_type.elem_type = onnx.TensorProto.FLOAT8E4M3FN
    if quantized and ZERO_POINT not in initializers:
        graph.initializer.append(helper.make_tensor(ZERO_POINT, onnx.TensorProto.FLOAT8E4M3FN, [], [0.0]))
    standard = [o for o in model.opset_import if o.domain != "trt"]
    del model.opset_import[:]
    model.opset_import.extend(standard)
    return model


def file_hash(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]


@dataclass
class QdqCounts:
    quantize: int
    dequantize: int
    convolutions: int
    quantized_convolutions: int  # convolutions whose data input comes from a DequantizeLinear


def qdq_counts(model) -> QdqCounts:
    nodes = model.graph.node
    producer = {output: node for node in nodes for output in node.output}
    ops = Counter(node.op_type for node in nodes)
    convs = [node for node in nodes if node.op_type == "Conv"]
    quantized = sum(1 for node in convs if node.input and producer.get(node.input[0]) is not None
                    and producer[node.input[0]].op_type in DEQUANTIZE_OPS)
    return QdqCounts(
        quantize=sum(ops[o] for o in QUANTIZE_OPS),
        dequantize=sum(ops[o] for o in DEQUANTIZE_OPS),
        convolutions=len(convs),
        quantized_convolutions=quantized,
    )
