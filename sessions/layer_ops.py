"""TensorRT's layer type words translated into the session's `Op` vocabulary.

The words are TensorRT's own: `ParameterType` and `LayerType` of detailed layer information, the
`Layer(<Type>)` of a verbose trtexec log, and the `[Type]` of an unnamed layer's name
(`(Unnamed Layer* 108) [Shuffle]`). A Reformat converts a format; a Shuffle, Slice, Padding or Gather
moves data without converting it; a Constant computes nothing.
"""

from __future__ import annotations

import re

# DETAILED records: `ParameterType` says what the layer is; `LayerType` says how it is run
_PARAMETER_OPS = {
    "Convolution": "conv", "Deconvolution": "conv", "FullyConnected": "linear", "MatrixMultiply": "matmul",
    "Pooling": "pooling", "ElementWise": "elementwise", "PointWise": "elementwise", "Scale": "elementwise",
    "Activation": "activation", "Softmax": "softmax", "Concatenation": "concat", "Reformat": "reformat",
    "Shuffle": "shuffle", "Normalization": "normalization", "Quantize": "quantize", "Dequantize": "dequantize",
    "Constant": "noop", "Reduce": "elementwise", "Slice": "shuffle", "Padding": "shuffle", "Gather": "shuffle",
    "SoftMax": "softmax", "Unary": "elementwise", "Resize": "elementwise",
}
_LAYER_TYPE_OPS = (
    (re.compile(r"Deconvolution|Convolution|^ConvActPool$"), "conv"),  # ConvActPool: a convolution with its pool fused
    (re.compile(r"^(gemm|CaskGemmMatrixMultiply|CublasMatrixMultiply|MatrixMultiply)$"), "matmul"),
    (re.compile(r"FullyConnected"), "linear"),
    (re.compile(r"^(NoOp|Constant|signal|wait|shape_call|TrainStation)$"), "noop"),
    (re.compile(r"^(Shuffle|Slice|Padding|Gather)$"), "shuffle"),
    (re.compile(r"^(Myelin|kgen)$"), "myelin"),
    (re.compile(r"^Reformat$"), "reformat"),
    (re.compile(r"Pooling"), "pooling"),
    (re.compile(r"PointWise|^Scale$|ElementWise"), "elementwise"),
    (re.compile(r"Softmax"), "softmax"),
    (re.compile(r"Concat"), "concat"),
    (re.compile(r"^Dla|DLA"), "dla"),
)


def trt_op(layer_type: str | None, parameter_type: str | None) -> str | None:
    """The op of a layer whose type TensorRT states; None where neither word is one TensorRT uses for an op."""
    if parameter_type and parameter_type in _PARAMETER_OPS:
        return _PARAMETER_OPS[parameter_type]
    for pattern, op in _LAYER_TYPE_OPS:
        if layer_type and pattern.search(layer_type):
            return op
    return None
