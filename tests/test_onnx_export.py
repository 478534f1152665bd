"""The ONNX files the TensorRT backend builds from, produced and checked without TensorRT."""

import numpy as np
import onnx
import pytest
import torch
from modelopt.torch.quantization.nn import TensorQuantizer
from onnx import helper, numpy_helper

from builders.fp8_recipes import select
from builders.model_structure import model_structure
from builders.models import load_model
from builders.onnx_export import OPSET, export, match_graph_scales, standard_fp8_qdq
from builders.onnx_files import write_onnx_files
from builders.variant_modules import variant_module
from sessions.errors import InspectError
from sessions.plan import VariantPlan, parse_variants


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    model = load_model("seresnext26d_32x4d")
    x = torch.randn(4, *model.input_size, generator=torch.Generator().manual_seed(0))
    specs = parse_variants("fp16,fp8", ["all", "no-se", "no-se-no-layer1"], [])
    written = write_onnx_files(model, specs, x[:1], x, tmp_path_factory.mktemp("onnx"))
    return model, x, {f.variant: f for f in written}


@pytest.mark.slow
def test_onnx_checker_passes_and_fp16_is_fp16(files):
    _, _, written = files
    for f in written.values():
        onnx.checker.check_model(str(f.path))
    graph = onnx.load(str(written["fp16"].path)).graph
    assert graph.input[0].type.tensor_type.elem_type == onnx.TensorProto.FLOAT16


@pytest.mark.slow
def test_qdq_counts_follow_the_layouts(files):
    model, x, written = files
    assert written["fp16"].counts.quantize == 0
    for layout in ("all", "no-se", "no-se-no-layer1"):
        expected = len(select(model_structure(model.module, x[:1]), layout, []).quantized)
        counts = written[f"fp8-{layout}"].counts
        assert counts.quantized_convolutions == expected
        assert counts.quantize == counts.dequantize == 2 * expected  # activation and weight per convolution
    assert [written[f"fp8-{n}"].counts.quantized_convolutions for n in ("all", "no-se", "no-se-no-layer1")] == [44, 28, 21]


@pytest.mark.slow
def test_fp16_onnx_agrees_with_pytorch_in_onnxruntime(files):
    ort = pytest.importorskip("onnxruntime")
    model, x, written = files
    session = ort.InferenceSession(str(written["fp16"].path), providers=["CPUExecutionProvider"])
    got = session.run(None, {"input": x[:1].half().numpy()})[0].astype(np.float32)
    with torch.no_grad():
        ref = model.module.float()(x[:1]).numpy()
    assert np.abs(got - ref).max() <= 0.02 * max(np.abs(ref).max(), 1e-3) + 1e-2


# --- FP8 as standard ONNX Q/DQ, on a small model with a quantizer that only ever sees zeros ---


class _Stage(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(8, 16, 3, padding=1)
        self.dead = torch.nn.Conv2d(16, 16, 1)  # its input is always zero, like an SE block after a zeroed BatchNorm
        self.conv2 = torch.nn.Conv2d(16, 8, 3, padding=1)

    def forward(self, x):
        y = torch.relu(self.conv1(x))
        return self.conv2(y) + self.dead(y * 0).mean()


class _Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layer1 = _Stage()

    def forward(self, x):
        return self.layer1(x)


@pytest.fixture(scope="module")
def small_fp8(tmp_path_factory):
    torch.manual_seed(0)
    reference = _Net().eval()
    x = torch.randn(6, 8, 12, 12)
    built = variant_module(reference, VariantPlan("fp8", "all"), x, 2, torch.float16)
    path = export(built.module, x[:1].half(), tmp_path_factory.mktemp("fp8") / "small-fp8.onnx")
    return built, x, path


def _qdq_scales(model) -> list[np.ndarray]:
    initializers = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    return [initializers[n.input[1]] for n in model.graph.node if n.op_type in ("QuantizeLinear", "DequantizeLinear")]


def test_fp8_export_is_standard_onnx_qdq(small_fp8):
    built, _, path = small_fp8
    model = onnx.load(str(path))
    onnx.checker.check_model(model, full_check=True)
    assert {o.domain: o.version for o in model.opset_import} == {"": OPSET} and OPSET >= 19
    ops = [n.op_type for n in model.graph.node]
    quantized = len(built.quantized)  # the recipe keeps the stem out: 2 of the 3 convolutions
    assert quantized == 2 and ops.count("QuantizeLinear") == ops.count("DequantizeLinear") == 2 * quantized
    assert not [n for n in model.graph.node if n.domain or n.op_type.startswith("TRT_")]
    initializers = {t.name: t for t in model.graph.initializer}
    for node in model.graph.node:
        if node.op_type == "QuantizeLinear":
            zero_point = initializers[node.input[2]]
            assert zero_point.data_type == onnx.TensorProto.FLOAT8E4M3FN and numpy_helper.to_array(zero_point) == 0
            assert {a.name: a.i for a in node.attribute} == {"saturate": 1}


def test_every_fp8_scale_is_positive_and_fp16_normal(small_fp8):
    """Bug 4: a quantizer that saw only zeros used to export a scale of 0 in fp16 (TensorRT rejects it)."""
    built, _, path = small_fp8
    assert any("saw only zeros" in note for note in built.notes)  # the case is there
    scales = _qdq_scales(onnx.load(str(path)))
    assert len(scales) == 4 * len(built.quantized)  # input and weight, each a Q and a DQ
    for scale in scales:
        assert scale.dtype == np.float16 and np.all(np.isfinite(scale)) and np.all(scale >= 2.0**-14)
    assert min(float(s.min()) for s in scales) == 2.0**-14  # the zero quantizer, floored


def test_fp8_onnx_equals_the_modules_fake_quantization_in_onnxruntime(small_fp8):
    ort = pytest.importorskip("onnxruntime")
    built, x, path = small_fp8
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    with torch.no_grad():
        for image in x.split(1):
            got = session.run(None, {"input": image.half().numpy()})[0].astype(np.float32)
            want = built.module(image.half()).float().numpy()
            # the same quantizers; what differs is fp16 rounding (onnxruntime convolves in fp32 on the CPU),
            # which now and then moves a value across an FP8 rounding boundary in the next quantizer
            error = np.abs(got - want)
            assert np.isfinite(got).all()
            assert error.max() <= 0.02 * np.abs(want).max() and error.mean() <= 1e-3 * np.abs(want).max()


def test_match_graph_scales_rounds_amax_to_the_fp16_scale_and_floors_it(small_fp8):
    built, _, _ = small_fp8
    amaxes = [q.amax for q in built.module.modules() if isinstance(q, TensorQuantizer) and q.is_enabled]
    assert len(amaxes) == 2 * len(built.quantized)
    for amax in amaxes:  # export already matched them; doing it again changes nothing
        scale = amax.float() / 448
        assert amax.dtype == torch.float32 and torch.equal(scale.half().float(), scale) and bool((scale >= 2.0**-14).all())
    assert match_graph_scales(built.module) == 0


def _trt_qdq_graph(scale_source: str):
    """x -> trt::TRT_FP8QuantizeLinear -> trt::TRT_FP8DequantizeLinear, the scale a Constant, an initializer or computed."""
    scale = helper.make_tensor("scale", onnx.TensorProto.FLOAT, [], [1e-9])
    nodes = [helper.make_node("TRT_FP8QuantizeLinear", ["x", "scale"], ["q"], domain="trt"),
             helper.make_node("TRT_FP8DequantizeLinear", ["q", "scale"], ["y"], domain="trt")]
    initializers = []
    if scale_source == "constant":
        nodes.insert(0, helper.make_node("Constant", [], ["scale"], value=scale))
    elif scale_source == "initializer":
        initializers.append(scale)
    else:
        nodes.insert(0, helper.make_node("Abs", ["x"], ["scale"]))
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [4])],
                              [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [4])], initializers,
                              value_info=[helper.make_tensor_value_info("q", onnx.TensorProto.UINT8, [4])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET), helper.make_opsetid("trt", 1)])


@pytest.mark.parametrize("scale_source", ["constant", "initializer"])
def test_rewrite_floors_a_tiny_scale_and_runs_in_onnxruntime(scale_source):
    ort = pytest.importorskip("onnxruntime")
    model = standard_fp8_qdq(_trt_qdq_graph(scale_source))
    onnx.checker.check_model(model, full_check=True)
    assert [n.op_type for n in model.graph.node] == ["QuantizeLinear", "DequantizeLinear"]
    assert [float(s) for s in _qdq_scales(model)] == [2.0**-14, 2.0**-14]
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    x = np.array([0.0, 2.0**-14 * 3, -1.0, 1.0], dtype=np.float32)
    y = session.run(None, {"x": x})[0]
    np.testing.assert_array_equal(y, [0.0, 2.0**-14 * 3, -448 * 2.0**-14, 448 * 2.0**-14])  # saturated at +-448


def test_rewrite_refuses_a_scale_computed_in_the_graph():
    with pytest.raises(InspectError, match="computed in the graph"):
        standard_fp8_qdq(_trt_qdq_graph("computed"))


def test_fp8_files_of_a_real_model_have_positive_fp16_normal_scales(files):
    _, _, written = files
    for layout in ("all", "no-se", "no-se-no-layer1"):
        for scale in _qdq_scales(onnx.load(str(written[f"fp8-{layout}"].path))):
            assert np.all(np.isfinite(scale)) and np.all(scale.astype(np.float16) >= 2.0**-14)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["seresnext26d_32x4d", "vit_tiny_patch16_224"])
def test_fp8_onnx_agrees_with_pytorch_fp8_on_the_study_images(name, tmp_path):
    pytest.importorskip("onnxruntime")
    from tests.fp8_onnx_numerics import check

    row = check(name, tmp_path)
    assert row.nonfinite == 0 and row.top1_agreement == 1.0
    assert row.ort_vs_fp8 <= 2 * row.fp8_vs_fp32
