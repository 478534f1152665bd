"""One table of TensorRT's spellings (sessions/documents/trt_names.py), for TensorRT 7, 8, 10 and 11, and no other
owner.

The expected words are written out here by hand from the files and wheels named in each case.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from sessions.documents.trt_names import dtype_word, layer_type_op, tactic_precision
from tests.conftest import ROOT

API = ROOT / "tests" / "data" / "trt_api"


@pytest.mark.parametrize(("spelling", "dtype"), [
    ("kHALF", "fp16"), ("kFLOAT", "fp32"), ("kINT8", "int8"),  # 7.x C++ enum words in logs
    ("Row major linear FP16 format", "fp16"), ("Channel major FP16 format where channel % 8 == 0", "fp16"),  # 8.x JSON
    ("Int8[1,3:4,2208,3872]", "int8"), ("fp32:CHW", "fp32"), ("Float", "fp32"), ("Half", "fp16"),  # 8.5 log, 10.x JSON
    ("BFloat16", "bf16"), ("Row major linear FP8 format", "fp8"), ("Int64", "int64"),  # 10.x
    ("DataType.HALF", "fp16"), ("DataType.FP8", "fp8"), ("DataType.BF16", "bf16"), ("kBF16", "bf16"),  # 10.x / 11.x API
    ("Unknown format", None),
])
def test_every_versions_dtype_spelling_gives_one_word(spelling: str, dtype: str | None) -> None:
    assert dtype_word(spelling) == dtype


def test_every_data_type_the_wheels_register_has_a_session_word() -> None:
    expected = {"BF16": "bf16", "BOOL": "bool", "FLOAT": "fp32", "FP4": "fp4", "FP8": "fp8", "HALF": "fp16",
                "INT32": "int32", "INT4": "int4", "INT64": "int64", "INT8": "int8", "UINT8": "uint8"}
    for wheel in sorted(API.glob("tensorrt-*.txt")):
        members = [line.split(".", 1)[1] for line in wheel.read_text().splitlines() if line.startswith("DataType.")]
        assert {m: dtype_word(f"DataType.{m}") for m in members if m != "E8M0"} == expected, wheel.name


@pytest.mark.parametrize(("tactic", "precision"), [
    ("sm80_xmma_fprop_implicit_gemm_interleaved_i8i8_i8i32_f32_nchw_vect_c_32kcrs_vect_c_32", "int8"),  # 8.4 file
    ("sm75_xmma_fprop_implicit_gemm_imma_int8", "int8"),
    ("sm90_xmma_gemm_e4m3e4m3_e4m3f32_f32_tn_n", "fp8"),
    ("nvjet_sm90_qqhsh_128x128_128x6_1x1_h_bz_coopA_algo2_ovscale_bias_TNT", "fp8"),  # H200 torch._scaled_mm
    ("nvjet_sm90_hsh_64x32_64x16_4x1_v_bz_TNT", None),  # the same GEMM in fp16
    ("sm80_xmma_fprop_implicit_gemm_f32f32_f32f32_f32_nchwkcrs_nchw", None),  # 10.16 file: says nothing new
    ("0x5b8bf1b8028629d9", None),
])
def test_tactic_names_spell_int8_and_fp8_arithmetic(tactic: str, precision: str | None) -> None:
    assert tactic_precision(tactic) == precision


@pytest.mark.parametrize(("layer_type", "parameter_type", "op"), [
    ("CudnnConvolution", None, "conv"), ("CaskConvolution", "Convolution", "conv"),  # 7.x, 8.x
    ("CudaDepthwiseConvolution", None, "conv"), ("ConvActPool", None, "conv"), ("CaskGemmConvolution", None, "conv"),
    ("CaskConvActPool", "ConvActPool", "conv"), ("CaskConvActPool", None, "conv"),  # 8.6: the pool fused in a conv
    ("gemm", None, "matmul"), ("kgen", None, "myelin"), ("Myelin", None, "myelin"), ("TrainStation", None, "noop"),
    ("PointWiseV2", None, "elementwise"), ("Reformat", "Reformat", "reformat"), ("shape_call", None, "noop"),
    ("CaskGemmMatrixMultiply", "MatrixMultiply", "matmul"), ("SomethingNew", None, None),
])
def test_layer_type_words_of_every_version_give_an_op(layer_type: str, parameter_type: str | None,
                                                      op: str | None) -> None:
    assert layer_type_op(layer_type, parameter_type) == op


SPELLINGS = ("imma", "BFloat16", "Half", "kHALF", "E4M3", "Avg. Time (ms)", "Median(ms)", "CaskConvolution",
             "CudaDepthwiseConvolution", "MatrixMultiply")


def _code_strings(path: Path) -> list[str]:
    """The string constants of a module's code, docstrings left out."""
    tree = ast.parse(path.read_text())
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef)) and node.body
                  and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    return [node.value for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings]


def test_no_module_but_the_table_spells_tensorrt_words() -> None:
    owners = []
    for folder in ("profilers", "sessions", "inspector", "builders"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if path.name != "trt_names.py" and any(word in s for s in _code_strings(path) for word in SPELLINGS):
                owners.append(str(path.relative_to(ROOT)))
    assert owners == []
