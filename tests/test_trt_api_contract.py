"""The TensorRT backend cannot run here, so its use of the API is checked against the documentation.

Every `trt.<name>` the backend touches must be in the documented 10.x / 11.x Python API
(../shared/docs/tensorrt-facts.md sections 2-3, and the 10.x / 11.0 Python API pages for ICudaEngine:
num_io_tensors, get_tensor_name / _mode / _shape / _dtype, TensorIOMode), and nothing removed in
11.x may appear at all (`ILayer.precision` and `ITensor.dynamic_range` are left out of that list:
the names collide with fields of our own).
"""

import ast

from tests.conftest import ROOT

FILES = [ROOT / "builders" / "trt_compat.py", ROOT / "builders" / "tensorrt_backend.py"]

DOCUMENTED_TRT = {
    "__version__", "Logger", "Logger.WARNING", "Builder", "OnnxParser", "Runtime", "IProgressMonitor", "IProfiler",
    "NetworkDefinitionCreationFlag.STRONGLY_TYPED", "ProfilingVerbosity.DETAILED", "LayerInformationFormat.JSON",
    "TensorIOMode.INPUT", "nptype",
    # in both real bindings' name lists (tensorrt-cu12-bindings 10.16, tensorrt-cu13-bindings 11.4)
    "ILogger", "ILogger.__init__", "ILogger.Severity.ERROR", "ILogger.Severity.INTERNAL_ERROR",
    "ProfilingVerbosity.NONE", "ProfilingVerbosity.LAYER_NAMES_ONLY",
}
REMOVED_IN_11 = {
    "FP16", "INT8", "FP8", "BF16", "INT4", "FP4", "STRICT_TYPES", "OBEY_PRECISION_CONSTRAINTS", "PREFER_PRECISION_CONSTRAINTS",
    "int8_calibrator", "platform_has_fast_fp16", "platform_has_fast_int8", "max_workspace_size", "device_memory_size",
    "EXPLICIT_BATCH", "CUBLAS", "CUBLAS_LT", "CUDNN", "execute_v2", "execute_async_v2",
    "enqueue_v2", "get_binding_name", "binding_is_input", "num_bindings", "get_binding_shape",
}


def trt_chains(tree: ast.AST) -> set[str]:
    """`trt.A.B` chains, as 'A.B', wherever the module object is named trt."""
    chains = set()
    inner = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and id(node) not in inner:
            parts = []
            current = node
            while isinstance(current, ast.Attribute):
                parts.append(current.attr)
                current = current.value
            if isinstance(current, ast.Name) and current.id == "trt":
                chains.add(".".join(reversed(parts)))
    return chains


def attribute_names(tree: ast.AST) -> set[str]:
    return {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)}


def test_only_documented_tensorrt_names_are_used():
    used = set()
    for path in FILES:
        used |= trt_chains(ast.parse(path.read_text()))
    # a chain is fine when it, or its documented prefix, is listed (trt.Logger.WARNING -> Logger.WARNING)
    undocumented = {c for c in used if c not in DOCUMENTED_TRT and not any(c.startswith(d + ".") for d in DOCUMENTED_TRT)}
    assert used and not undocumented, undocumented


def test_no_api_removed_in_tensorrt_11_is_touched():
    for path in FILES:
        names = attribute_names(ast.parse(path.read_text()))
        assert not names & REMOVED_IN_11, (path.name, names & REMOVED_IN_11)


def test_the_contract_check_catches_a_removed_flag():
    bad = ast.parse("config.set_flag(trt.BuilderFlag.FP16)\nengine.get_binding_name(0)")
    assert attribute_names(bad) & REMOVED_IN_11 == {"FP16", "get_binding_name"}
    assert trt_chains(bad) == {"BuilderFlag.FP16"}
