"""ONNX files for TensorRT: an fp16 graph, and FP8 graphs with Quantize/Dequantize pairs.

Exported from the PyTorch variants with the TorchScript exporter (`dynamo=False`: ModelOpt's FP8
quantizers export as TensorRT's `trt::TRT_FP8QuantizeLinear` / `TRT_FP8DequantizeLinear`, which
TensorRT's ONNX parser reads; onnxruntime cannot run them).
"""

from __future__ import annotations

import hashlib
import io
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from sessions.errors import InspectError

OPSET = 17
QUANTIZE_OPS = {"TRT_FP8QuantizeLinear", "QuantizeLinear"}
DEQUANTIZE_OPS = {"TRT_FP8DequantizeLinear", "DequantizeLinear"}


def export(module, example, path: Path) -> Path:
    import contextlib
    import warnings

    import torch

    path.parent.mkdir(parents=True, exist_ok=True)
    buffer = io.BytesIO()
    with warnings.catch_warnings(), contextlib.redirect_stdout(None), torch.no_grad():
        warnings.simplefilter("ignore")
        try:
            torch.onnx.export(
                module, (example,), buffer, opset_version=OPSET, dynamo=False,
                input_names=["input"], output_names=["logits"],
            )
        except Exception as exc:  # the exporter raises many types; the user needs the first line
            raise InspectError(f"ONNX export failed: {str(exc).splitlines()[0]}") from None
    path.write_bytes(buffer.getvalue())
    return path


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
