"""The ONNX files the TensorRT backend builds from, produced and checked without TensorRT."""

import numpy as np
import onnx
import pytest
import torch

from sessions.plan import parse_variants
from builders.fp8_recipes import select
from builders.model_structure import model_structure
from builders.models import load_model
from builders.onnx_files import write_onnx_files


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    model = load_model("seresnext26d_32x4d")
    x = torch.randn(4, *model.input_size, generator=torch.Generator().manual_seed(0))
    specs = parse_variants("fp16,fp8", ["all", "no-se", "no-se-no-layer1"], [])
    written = write_onnx_files(model, specs, x[:1], x, tmp_path_factory.mktemp("onnx"))
    return model, x, {f.variant: f for f in written}


def test_onnx_checker_passes_and_fp16_is_fp16(files):
    _, _, written = files
    for f in written.values():
        onnx.checker.check_model(str(f.path))
    graph = onnx.load(str(written["fp16"].path)).graph
    assert graph.input[0].type.tensor_type.elem_type == onnx.TensorProto.FLOAT16


def test_qdq_counts_follow_the_layouts(files):
    model, _, written = files
    assert written["fp16"].counts.quantize == 0
    for layout in ("all", "no-se", "no-se-no-layer1"):
        expected = len(select(model_structure(model.module, x[:1]), layout, []).quantized)
        counts = written[f"fp8-{layout}"].counts
        assert counts.quantized_convolutions == expected
        assert counts.quantize == counts.dequantize == 2 * expected  # activation and weight per convolution
    assert [written[f"fp8-{n}"].counts.quantized_convolutions for n in ("all", "no-se", "no-se-no-layer1")] == [44, 28, 21]


def test_fp16_onnx_agrees_with_pytorch_in_onnxruntime(files):
    ort = pytest.importorskip("onnxruntime")
    model, x, written = files
    session = ort.InferenceSession(str(written["fp16"].path), providers=["CPUExecutionProvider"])
    got = session.run(None, {"input": x[:1].half().numpy()})[0].astype(np.float32)
    with torch.no_grad():
        ref = model.module.float()(x[:1]).numpy()
    assert np.abs(got - ref).max() <= 0.02 * max(np.abs(ref).max(), 1e-3) + 1e-2
