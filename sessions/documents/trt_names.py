"""TensorRT's spellings across versions 7, 8, 10 and 11, in one table: the one owner of every spelling rule.

Every importer (layer information JSON and text, profiles JSON and text, verbose logs, migrations of old
sessions) translates TensorRT's words through this module, so a new spelling is added here once.
Each row names where the spelling was seen:

- file: the public TensorRT outputs under `../shared/fixtures` (see their SOURCE.md) and the trtexec
  logs the project's tests describe in `tests/data/trt_text/`;
- api: the enum members the bindings wheels register, `tests/data/trt_api/tensorrt-10.16.1.11.txt` and
  `tensorrt-11.4.0.106.txt` (`DataType.HALF`, `LayerType.MATRIX_MULTIPLY`; identical in 10.16 and 11.4);
- source: trtexec's `samples/common/sampleReporting.cpp` (7.x to 11.x), as `../shared/docs/tensorrt-facts.md` cites it.

Data types: a tensor's `Format/Datatype` (`Row major linear FP16 format`, `Half`), a log's `Int8[1,3:4,...]`,
trtexec's `fp32:CHW`, the API's `DataType.HALF` / C++ `kHALF`. The first row whose spelling occurs wins,
so the narrower words (FP8, BFloat16) come before the words they contain.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Spelling:
    canonical: str  # the session's word
    spellings: tuple[str, ...]  # regular expressions, matched case-insensitively
    seen: str  # where these spellings were seen (TensorRT versions and the source)


DTYPES: tuple[Spelling, ...] = (
    Spelling("fp8", (r"\bFP8\b", r"\bFloat8", r"E4M3", r"\bkFP8\b"), "10.x file formats, api DataType.FP8"),
    Spelling("bf16", (r"BFloat16", r"\bBF16\b", r"\bkBF16\b"), "10.x file formats, api DataType.BF16"),
    Spelling("fp16", (r"\bFP16\b", r"\bHalf\b", r"\bkHALF\b"),
             "7.x-10.x files (`Half`, `FP16 format`), api DataType.HALF"),
    Spelling("int8", (r"\bInt8\b", r"\bkINT8\b"), "8.x-10.x files (`Int8[...]`, `Int8 NC/32HW32`), api DataType.INT8"),
    Spelling("int4", (r"\bInt4\b", r"\bkINT4\b"), "api DataType.INT4 (10.x, 11.x)"),
    Spelling("fp4", (r"\bFP4\b", r"\bkFP4\b"), "api DataType.FP4 (10.x, 11.x)"),
    Spelling("fp32", (r"\bFP32\b", r"\bFloat\b", r"\bkFLOAT\b"),
             "7.x-10.x files (`Float`, `FP32 format`, `fp32:CHW`), api DataType.FLOAT"),
    Spelling("int32", (r"\bInt32\b", r"\bkINT32\b"), "10.x files, api DataType.INT32"),
    Spelling("int64", (r"\bInt64\b", r"\bkINT64\b"), "10.x files, api DataType.INT64"),
    Spelling("uint8", (r"\bUInt8\b", r"\bkUINT8\b"), "api DataType.UINT8"),
    Spelling("bool", (r"\bBool\b", r"\bkBOOL\b"), "api DataType.BOOL"),
)

# A tactic's name spells the arithmetic of an int8 / fp8 kernel: i8i8, i8f16, i8816, int8x4, imma (8.x, 10.x files),
# e4m3 / fp8 (10.x FP8 kernels, api DataType.FP8), cuBLASLt's nvjet_smNN_qq... Other tactic names say nothing a
# layer's tensors do not.
TACTIC_PRECISIONS: tuple[Spelling, ...] = (
    Spelling("fp8", (r"e4m3", r"fp8", r"nvjet_sm\d+a?_qq"),
             "10.x tactic names (sm89/sm90 FP8 kernels); cuBLASLt's nvjet kernels name operand types by letter, q for "
             "FP8: nvjet_sm90_qqhsh for torch._scaled_mm, nvjet_sm90_hsh for fp16 (benchmarks/results/h200/"
             "vit_tiny_patch16_224-engine.json)"),
    Spelling("int8", (r"(?:^|_)i8", r"int8", r"imma"), "8.x-10.x files: TacticName `..._i8i8_...`, `..._imma_...`"),
)

# `ParameterType` of DETAILED layer information (8.2-10.x files), the same words as the API's LayerType
# members in CamelCase (api LayerType.MATRIX_MULTIPLY -> MatrixMultiply; identical in 10.16 and 11.4).
PARAMETER_TYPES: dict[str, str] = {
    "Convolution": "conv", "Deconvolution": "conv", "FullyConnected": "linear", "MatrixMultiply": "matmul",
    "Pooling": "pooling", "ElementWise": "elementwise", "PointWise": "elementwise", "Scale": "elementwise",
    "Activation": "activation", "Softmax": "softmax", "SoftMax": "softmax", "Concatenation": "concat",
    "Reformat": "reformat", "Shuffle": "shuffle", "Normalization": "normalization", "Quantize": "quantize",
    "Dequantize": "dequantize", "Constant": "noop", "Reduce": "elementwise", "Slice": "shuffle", "Padding": "shuffle",
    "Gather": "shuffle", "Unary": "elementwise", "Resize": "elementwise",
    "ConvActPool": "conv",  # 8.6 (LayerType CaskConvActPool): a convolution with its activation and pool fused
}

# `LayerType` (how a layer is run) of layer information and the `Layer(<Type>)` of a verbose log, 7.x-11.x:
# CaskConvolution / CaskGemmConvolution / CudaDepthwiseConvolution / CudnnConvolution (7.x), ConvActPool (8.4) /
# CaskConvActPool (8.6: kalfazed/tensorrt_starter@3782a93, `.../6.4-trt-engine-inspector/result/resnet50/`),
# gemm / kgen / Myelin (10.x Myelin), TrainStation, signal / wait / shape_call (10.x files). First match wins.
LAYER_TYPES: tuple[tuple[str, str], ...] = (
    (r"Deconvolution|Convolution|^(Cask)?ConvActPool$", "conv"),  # ConvActPool: a convolution with its pool fused
    (r"^(gemm|CaskGemmMatrixMultiply|CublasMatrixMultiply|MatrixMultiply)$", "matmul"),
    (r"FullyConnected", "linear"),
    (r"^(NoOp|Constant|signal|wait|shape_call|TrainStation)$", "noop"),
    (r"^(Shuffle|Slice|Padding|Gather)$", "shuffle"),
    (r"^(Myelin|kgen)$", "myelin"),
    (r"^Reformat$", "reformat"),
    (r"Pooling", "pooling"),
    (r"PointWise|^Scale$|ElementWise", "elementwise"),
    (r"Softmax", "softmax"),
    (r"Concat", "concat"),
    (r"^Dla|DLA", "dla"),
)

# trtexec's `--dumpProfile` table headers (source: sampleReporting.cpp; files: 8.5 `trt.out`, 10.16 result-05.log):
# 7.x `Layer  Time (ms)  Avg. Time (ms)  Time %`; 8.x adds `Median Time (ms)`; 8.6+ puts `Layer` last and
# writes `Time(ms)  Avg.(ms)  Median(ms)  Time(%)`.
PROFILE_COLUMNS: dict[str, tuple[str, ...]] = {
    "total_ms": ("Time (ms)", "Time(ms)"),
    "average_ms": ("Avg. Time (ms)", "Avg.(ms)", "Average (ms)"),
    "median_ms": ("Median Time (ms)", "Median(ms)"),
    "percentage": ("Time %", "Time(%)"),
    "name": ("Layer",),
}

# A Myelin layer's kernels as TensorRT's profiler names them, one record each: `<kernel>_myl<i>_<k>`, the k-th
# kernel of the Myelin layer at index i (from 0) of the engine's layers in engine order, a Myelin layer counted
# once (files: the public 10.14.1 / 10.16.0 / 10.16.1 trtexec logs tests/data/trt_text/README.md names, where the
# verbose build's `Layer(Myelin)` lines sit at exactly those indices; and in ../shared every `_myl` run of the 8.x DETR,
# 10.x MobileNetV2 and MNIST layer and profile files starts where its Myelin layer would stand).
MYELIN_KERNEL = r"_myl(\d+)_(\d+)$"

_DTYPE_PATTERNS = tuple((row.canonical, re.compile("|".join(row.spellings), re.IGNORECASE)) for row in DTYPES)
_TACTIC_PATTERNS = tuple((row.canonical, re.compile("|".join(row.spellings), re.IGNORECASE))
                         for row in TACTIC_PRECISIONS)
_LAYER_TYPE_PATTERNS = tuple((re.compile(pattern), op) for pattern, op in LAYER_TYPES)


def dtype_word(text: str | None) -> str | None:
    """The session's dtype word for a TensorRT spelling of a data type or format; None where none occurs."""
    if not text:
        return None
    return next((name for name, pattern in _DTYPE_PATTERNS if pattern.search(text)), None)


@functools.lru_cache(maxsize=4096)  # an engine runs a few hundred tactics, each in many layers
def tactic_precision(tactic: str | None) -> str | None:
    """`int8` / `fp8` where a tactic's name spells that arithmetic; None for any other name."""
    if not tactic:
        return None
    return next((name for name, pattern in _TACTIC_PATTERNS if pattern.search(tactic)), None)


# fp32 tensors whose kernels multiply in TF32 (Ampere on): the A100 fp32 ResNet sets' CaskConvolution tactics
# `..._f32f32_tf32f32_f32_...`; a kernel that multiplies in full fp32 names no tf32
_TF32_TACTIC = re.compile(r"tf32", re.IGNORECASE)


def tactic_math(tactic: str | None) -> str | None:
    """`tf32` where a tactic's name says its fp32 layer multiplies in TF32; None for any other name."""
    return "tf32" if tactic and _TF32_TACTIC.search(tactic) else None


def layer_type_op(layer_type: str | None, parameter_type: str | None) -> str | None:
    """The op of TensorRT's type words (ParameterType first, then LayerType); None where neither is known."""
    if parameter_type and parameter_type in PARAMETER_TYPES:
        return PARAMETER_TYPES[parameter_type]
    if layer_type:
        return next((op for pattern, op in _LAYER_TYPE_PATTERNS if pattern.search(layer_type)), None)
    return None
