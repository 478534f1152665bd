"""The session's vocabularies: every word a field may hold, in one place.

Sources (PyTorch, TensorRT, imported files) translate their own words into these; views read only
these. `codec` checks `Literal` fields on load, so a word outside the list is a load error.
"""

from __future__ import annotations

import re
from typing import Literal, get_args

Device = Literal["cuda", "cpu"]
Source = Literal["timm", "hf", "onnx", "trtexec", "probe"]
Status = Literal["ok", "failed"]
# what a variant computes in: the number format of its quantized layers, else its base precision
Precision = Literal["fp32", "fp16", "bf16", "fp8", "int8", "int4", "fp4", "mixed", "unknown"]  # unknown: names-only files
# tensor element types, as sessions spell them
DType = Literal["fp32", "fp16", "bf16", "fp8", "int8", "int4", "fp4", "int32", "int64", "uint8", "bool"]
# what a layer computes, in one dialect for every source
Op = Literal[
    "conv", "linear", "matmul", "pooling", "elementwise", "activation", "normalization", "softmax", "attention",
    "concat", "reformat", "shuffle", "quantize", "dequantize", "myelin", "noop", "dla", "other",
]
TraceUnit = Literal["kernel", "op"]
Timer = Literal["cuda-events", "perf_counter", "trtexec", "unknown"]

PRECISIONS: tuple[str, ...] = get_args(Precision)
OPS: tuple[str, ...] = get_args(Op)

_DTYPE_TOKENS = (  # order matters: the first match wins
    ("fp8", re.compile(r"\bFP8\b|\bFloat8|E4M3", re.IGNORECASE)),
    ("bf16", re.compile(r"BFloat16|\bBF16\b", re.IGNORECASE)),
    ("fp16", re.compile(r"\bFP16\b|\bHalf\b", re.IGNORECASE)),
    ("int8", re.compile(r"\bInt8\b", re.IGNORECASE)),
    ("int4", re.compile(r"\bInt4\b", re.IGNORECASE)),
    ("fp4", re.compile(r"\bFP4\b", re.IGNORECASE)),
    ("fp32", re.compile(r"\bFP32\b|\bFloat\b", re.IGNORECASE)),
    ("int32", re.compile(r"\bInt32\b", re.IGNORECASE)),
    ("int64", re.compile(r"\bInt64\b", re.IGNORECASE)),
    ("uint8", re.compile(r"\bUInt8\b", re.IGNORECASE)),
    ("bool", re.compile(r"\bBool\b", re.IGNORECASE)),
)


def dtype_of(text: str | None) -> str | None:
    """The session's dtype word inside a TensorRT format string (`Row major linear FP16 format`)."""
    if not text:
        return None
    for name, pattern in _DTYPE_TOKENS:
        if pattern.search(text):
            return name
    return None
