"""The op a PyTorch module runs itself, in the session's vocabulary (sessions.documents.vocab.Op), from the torch
functions its own forward calls (not those its children call) and what each of them costs.

A module's own time is one layer's time, so it gets one op: the op of the work that takes that time.
- Where its own forward calls a convolution, linear, attention, matmul or recurrent layer (LSTM, GRU, RNN: torch's
  fused kernels), that op names it (`COMPUTE`, in this order): such a call outweighs the memory-bound ops around it.
- Else, where it computes the statistic a normalization scales by (`STATISTICS`: a norm, a variance, a reciprocal
  square root), it is a normalization, written by hand (GlobalResponseNorm, RMSNorm).
- Otherwise the op whose calls move the most elements (`call_cost`) names it: an Inception block that pools its
  input (a 3 x 3 window read for every output) and concatenates its branches is pooling, not a concatenation; a
  MixNet convolution that only splits and concatenates is a concatenation; a residual add is elementwise. Ties go
  to the first op of `FUNCTION_OPS`.
Functions of no known op are "other" where nothing else was called; None where it called none (a module that only
calls its children) or only functions that do nothing at inference (`INFERENCE_IDENTITIES`: dropout).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

from sessions.documents.vocab import Op

# the statistic a normalization scales by (a norm, a variance, a standard deviation, a reciprocal square root): a module
# whose own forward computes one, and no COMPUTE op, is a normalization however much its elementwise work around it
# moves (ConvNeXt-V2's GlobalResponseNorm: x.norm over positions, then divisions and products; a hand-written
# LayerNorm or RMSNorm)
STATISTICS = ("norm", "linalg_vector_norm", "vector_norm", "var", "std", "var_mean", "std_mean", "rsqrt")
FUNCTION_OPS: dict[Op, tuple[str, ...]] = {
    "conv": ("conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "convolution"),
    "linear": ("linear", "addmm"),
    "attention": ("scaled_dot_product_attention", "multi_head_attention_forward"),
    "matmul": ("matmul", "__matmul__", "bmm", "mm", "einsum", "baddbmm"),
    "recurrent": ("lstm", "gru", "rnn_tanh", "rnn_relu", "lstm_cell", "gru_cell", "rnn_tanh_cell", "rnn_relu_cell"),
    "concat": ("cat", "concat", "concatenate", "stack", "split", "split_with_sizes", "chunk", "tensor_split",
               "unbind"),
    "normalization": ("batch_norm", "layer_norm", "group_norm", "instance_norm", "rms_norm", "normalize", *STATISTICS),
    "softmax": ("softmax", "log_softmax"),
    "pooling": ("avg_pool1d", "avg_pool2d", "avg_pool3d", "max_pool1d", "max_pool2d", "max_pool3d",
                "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_max_pool2d", "mean", "amax", "sum"),
    "elementwise": ("add", "add_", "__add__", "__iadd__", "__radd__", "mul", "mul_", "__mul__", "__imul__",
                    "__rmul__", "sub", "__sub__", "__rsub__", "div", "__truediv__", "__itruediv__", "where",
                    "interpolate", "pad", "addcmul", "addcdiv", "lerp", "exp", "log", "sin", "cos", "sqrt", "pow",
                    "__pow__", "abs", "neg", "__neg__", "reciprocal", "erf", "maximum", "minimum", "cumsum"),
    "activation": ("relu", "relu_", "relu6", "gelu", "silu", "silu_", "sigmoid", "sigmoid_", "hardswish",
                   "hardsigmoid", "tanh", "leaky_relu", "elu", "mish", "softplus", "hardtanh", "clamp", "clamp_"),
    "shuffle": ("contiguous", "roll", "repeat", "flip", "pixel_shuffle", "pixel_unshuffle", "channel_shuffle", "view",
                "reshape", "flatten", "unflatten", "permute", "transpose", "squeeze", "unsqueeze", "expand", "narrow",
                "__getitem__"),
}
# data seen another way, not moved (a reshape that must copy is rare): no cost, a shuffle only where nothing else ran
VIEWS = {"view", "reshape", "flatten", "unflatten", "permute", "transpose", "squeeze", "unsqueeze", "expand", "narrow",
         "__getitem__"}
# calls that return their input at inference (a model's own `F.dropout(x, training=self.training)`): no work
INFERENCE_IDENTITIES = {"dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout", "feature_alpha_dropout"}
COMPUTE: tuple[Op, ...] = ("conv", "linear", "attention", "matmul", "recurrent")
WINDOWED = {"avg_pool1d", "avg_pool2d", "avg_pool3d", "max_pool1d", "max_pool2d", "max_pool3d"}
_OP_OF = {name: op for op, names in FUNCTION_OPS.items() for name in names}


def function_op(name: str) -> Op | None:
    """The op of the torch function `name` (`torch.nn.functional.batch_norm` -> normalization), None if unknown."""
    return _OP_OF.get(name)


def call_cost(name: str, inputs: Sequence[int], outputs: Sequence[int], kernel: Sequence[int] = ()) -> float:
    """Elements one call moves: those it reads and writes, none for a view (`VIEWS`); a pooling call reads its window
    for every output (`kernel`, its kernel size, for a windowed pooling; else the input elements per output: global
    pooling, a mean).

    `inputs` and `outputs` are the element counts of the call's tensors.
    """
    if name in VIEWS:
        return 0.0
    read, written = float(sum(inputs)), float(sum(outputs))
    if function_op(name) != "pooling" or written <= 0:
        return read + written
    window = math.prod(kernel) if name in WINDOWED and kernel else max(inputs, default=0) / written
    return read + written * max(window, 1.0)


def own_op(functions: Mapping[str, float] | Iterable[str]) -> Op | None:
    """The op of a module whose own forward called `functions` (name -> total `call_cost` of its calls; names alone
    weigh one each): see the module's docstring. "other" where none is known, None where it called none."""
    costs = dict(functions) if isinstance(functions, Mapping) else dict.fromkeys(functions, 1.0)
    costs = {name: cost for name, cost in costs.items() if name not in INFERENCE_IDENTITIES}
    if not costs:
        return None
    per_op: dict[Op, float] = {}
    for name, cost in costs.items():
        op = function_op(name)
        if op is not None:
            per_op[op] = per_op.get(op, 0.0) + cost
    compute = next((op for op in COMPUTE if op in per_op), None)
    if compute is not None:
        return compute
    if not costs.keys().isdisjoint(STATISTICS):
        return "normalization"
    order = list(FUNCTION_OPS)
    return max(per_op, key=lambda op: (per_op[op], -order.index(op)), default="other")
