"""The op a PyTorch module runs itself, in the session's vocabulary (sessions.documents.vocab.Op), from the names of
the torch functions its own forward calls (not those its children call).

A container whose own work is a split and a concatenation (MixNet's mixed-kernel convolution) is a
concatenation; one whose own op is a residual add is elementwise: neither is a convolution, whatever
its class is called. Where a module calls several kinds, the first in `DOMINANCE` names it.
"""

from __future__ import annotations

from collections.abc import Iterable

from sessions.documents.vocab import Op

FUNCTION_OPS: dict[Op, tuple[str, ...]] = {
    "conv": ("conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "convolution"),
    "linear": ("linear", "addmm"),
    "attention": ("scaled_dot_product_attention", "multi_head_attention_forward"),
    "matmul": ("matmul", "__matmul__", "bmm", "mm", "einsum", "baddbmm"),
    "concat": ("cat", "concat", "concatenate", "stack", "split", "split_with_sizes", "chunk", "tensor_split",
               "unbind"),
    "normalization": ("batch_norm", "layer_norm", "group_norm", "instance_norm", "rms_norm", "normalize"),
    "softmax": ("softmax", "log_softmax"),
    "pooling": ("avg_pool1d", "avg_pool2d", "avg_pool3d", "max_pool1d", "max_pool2d", "max_pool3d",
                "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_max_pool2d", "mean", "amax", "sum"),
    "elementwise": ("add", "add_", "__add__", "__iadd__", "__radd__", "mul", "mul_", "__mul__", "__imul__",
                    "__rmul__", "sub", "__sub__", "__rsub__", "div", "__truediv__", "__itruediv__", "where",
                    "interpolate", "pad"),
    "activation": ("relu", "relu_", "relu6", "gelu", "silu", "silu_", "sigmoid", "sigmoid_", "hardswish",
                   "hardsigmoid", "tanh", "leaky_relu", "elu", "mish", "softplus", "hardtanh", "clamp", "clamp_"),
}
DOMINANCE = tuple(FUNCTION_OPS)
_OP_OF = {name: op for op, names in FUNCTION_OPS.items() for name in names}


def own_op(functions: Iterable[str]) -> Op | None:
    """The op of a module whose own forward called `functions`; "other" where none is known, None where it
    called none (a module that only calls its children)."""
    names = set(functions)
    if not names:
        return None
    found = {_OP_OF[n] for n in names if n in _OP_OF}
    return next((op for op in DOMINANCE if op in found), "other")
