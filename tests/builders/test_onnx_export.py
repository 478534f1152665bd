"""The ONNX files the TensorRT backend builds from, produced and checked without TensorRT."""

import numpy as np
import onnx
import pytest
import torch
from modelopt.torch.quantization.nn import TensorQuantizer
from onnx import helper, numpy_helper

from builders.models.catalog import load_model
from builders.models.structure import model_structure
from builders.pytorch.variant_modules import variant_module
from builders.recipes.fp8 import select
from builders.tensorrt.onnx_export import OPSET, export, fp8_weight_initializers, match_graph_scales, standard_fp8_qdq
from builders.tensorrt.onnx_files import write_onnx_files
from sessions.documents.errors import InspectError
from sessions.documents.plan import VariantPlan, parse_variants


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
        assert counts.quantize == expected and counts.dequantize == 2 * expected  # activation Q/DQ, weight DQ
    assert [written[f"fp8-{n}"].counts.quantized_convolutions
            for n in ("all", "no-se", "no-se-no-layer1")] == [44, 28, 21]


@pytest.mark.slow
def test_fp16_onnx_agrees_with_pytorch_in_onnxruntime(files):
    ort = pytest.importorskip("onnxruntime")
    model, x, written = files
    session = ort.InferenceSession(str(written["fp16"].path), providers=["CPUExecutionProvider"])
    got = session.run(None, {"input": x[:1].half().numpy()})[0].astype(np.float32)
    with torch.no_grad():
        ref = model.module.float()(x[:1]).numpy()
    assert np.abs(got - ref).max() <= 0.02 * max(np.abs(ref).max(), 1e-3) + 1e-2


# --- FP8 as standard ONNX Q/DQ, on a small model: a grouped convolution with BatchNorm, a linear, and a
# --- quantizer that only ever sees zeros ---


class _Stage(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv2 = torch.nn.Conv2d(16, 16, 3, padding=1, groups=4, bias=False)
        self.bn2 = torch.nn.BatchNorm2d(16)
        self.mix = torch.nn.Linear(16, 16)  # over channels, channels last
        self.dead = torch.nn.Conv2d(16, 16, 1)  # its input is always zero, like an SE block after a zeroed BatchNorm

    def forward(self, x):
        y = torch.relu(self.bn2(self.conv2(x)))
        y = self.mix(y.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)
        return y + self.dead(y * 0).mean()


class _Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = torch.nn.Conv2d(8, 16, 3, padding=1)  # the stem: runs before the first block
        self.layer1 = _Stage()  # a block: a chain of layers and a merge

    def forward(self, x):
        return self.layer1(torch.relu(self.stem(x)))


ZERO_CHANNELS = [3, 11]  # BatchNorm gamma 0: the folded kernel's channels are all zero


def _small_reference() -> _Net:
    torch.manual_seed(0)
    net = _Net().eval()
    bn = net.layer1.bn2
    with torch.no_grad():  # statistics that make folding change the kernel
        bn.running_mean.uniform_(-1, 1)
        bn.running_var.uniform_(0.5, 4)
        bn.weight.uniform_(-2, 2)
        bn.weight[ZERO_CHANNELS] = 0
        bn.bias.uniform_(-1, 1)
    return net


def _small_fp8(recipe: str, folder):
    reference = _small_reference()
    x = torch.randn(6, 8, 12, 12, generator=torch.Generator().manual_seed(1))
    built = variant_module(reference, VariantPlan("fp8", recipe), x, torch.float16)
    path = export(built.module, x[:1].half(), folder / f"small-{recipe}.onnx")
    return built, x, path


@pytest.fixture(scope="module")
def small_fp8(tmp_path_factory):
    return _small_fp8("all", tmp_path_factory.mktemp("fp8"))


def _qdq_scales(model) -> list[np.ndarray]:
    initializers = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    return [initializers[n.input[1]] for n in model.graph.node if n.op_type in ("QuantizeLinear", "DequantizeLinear")]


def _weight_dqs(model) -> dict[str, tuple[onnx.NodeProto, np.ndarray, np.ndarray]]:
    """Module path -> (DequantizeLinear, its float8e4m3fn weight as float32, its scale) for every weight DQ."""
    initializers = {t.name: t for t in model.graph.initializer}
    found = {}
    for node in model.graph.node:
        if node.op_type == "DequantizeLinear" and node.input[0] in initializers:
            weight = initializers[node.input[0]]
            assert weight.data_type == onnx.TensorProto.FLOAT8E4M3FN and node.input[0].endswith(".weight_fp8")
            found[node.input[0].removesuffix(".weight_fp8")] = (
                node, numpy_helper.to_array(weight).astype(np.float32),
                numpy_helper.to_array(initializers[node.input[1]]))
    return found


def test_fp8_export_is_standard_onnx_qdq(small_fp8):
    built, _, path = small_fp8
    model = onnx.load(str(path))
    onnx.checker.check_model(model, full_check=True)
    assert {o.domain: o.version for o in model.opset_import} == {"": OPSET} and OPSET >= 19
    ops = [n.op_type for n in model.graph.node]
    quantized = len(built.quantized)  # the recipe keeps the stem out
    assert built.quantized == {"layer1.conv2", "layer1.mix", "layer1.dead"}
    # activations: Q -> DQ; weights: a float8e4m3fn initializer -> DQ
    assert ops.count("QuantizeLinear") == quantized and ops.count("DequantizeLinear") == 2 * quantized
    assert sorted(_weight_dqs(model)) == sorted(built.quantized)
    assert not [n for n in model.graph.node if n.domain or n.op_type.startswith("TRT_")]
    initializers = {t.name: t for t in model.graph.initializer}
    assert not {f"{p}.weight" for p in built.quantized} & set(initializers)  # no fp16 copy of a quantized weight left
    for node in model.graph.node:
        if node.op_type == "QuantizeLinear":
            zero_point = initializers[node.input[2]]
            assert zero_point.data_type == onnx.TensorProto.FLOAT8E4M3FN and numpy_helper.to_array(zero_point) == 0
            assert {a.name: a.i for a in node.attribute} == {"saturate": 1}


def _folded_kernel(reference: _Net) -> torch.Tensor:
    stage = reference.layer1
    bn = stage.bn2
    return stage.conv2.weight * (bn.weight / torch.sqrt(bn.running_var + bn.eps)).reshape(-1, 1, 1, 1)


def test_weights_are_per_channel_amax_over_448_of_the_folded_kernel(small_fp8):
    """Every weight DQ: axis 0, one fp16 scale per output channel, amax / 448 of the BatchNorm-folded kernel."""
    built, _, path = small_fp8
    assert built.recipe.weights == "per-channel" and built.recipe.batchnorm_folded
    weights = _weight_dqs(onnx.load(str(path)))
    modules = dict(_small_reference().named_modules())
    expected = {"layer1.conv2": _folded_kernel(_small_reference()), "layer1.mix": modules["layer1.mix"].weight,
                "layer1.dead": modules["layer1.dead"].weight}
    for layer, kernel in expected.items():
        node, codes, scale = weights[layer]
        assert {a.name: a.i for a in node.attribute} == {"axis": 0}
        assert scale.dtype == np.float16 and scale.shape == (kernel.shape[0],) and codes.shape == tuple(kernel.shape)
        amax = kernel.detach().abs().reshape(kernel.shape[0], -1).amax(dim=1).half().float()
        want = (amax / 448).clamp(min=2.0**-14).half().numpy()  # all-zero channels get the fp16-normal floor
        np.testing.assert_array_equal(scale, want)
        # the codes are the kernel in FP8: within e4m3's half step (1/16) of each channel's largest value
        dequantized = codes * scale.astype(np.float32).reshape(-1, *[1] * (codes.ndim - 1))
        error = np.abs(dequantized - kernel.detach().numpy()).reshape(kernel.shape[0], -1).max(axis=1)
        assert np.all(error <= amax.numpy() / 16 + 1e-6)
    assert np.all(weights["layer1.conv2"][2][ZERO_CHANNELS] == 2.0**-14)
    assert not weights["layer1.conv2"][1][ZERO_CHANNELS].any()


def test_per_tensor_weights_stay_selectable(tmp_path):
    built, _, path = _small_fp8("all-per-tensor", tmp_path)
    assert built.recipe.weights == "per-tensor" and built.recipe.layout == "all-per-tensor"
    model = onnx.load(str(path))
    onnx.checker.check_model(model, full_check=True)
    for layer, (node, _, scale) in _weight_dqs(model).items():
        assert scale.shape == () and not node.attribute, layer
        assert built.module.get_submodule(layer).weight_quantizer.amax.numel() == 1


def test_a_quantizer_that_saw_only_zeros_gets_the_graphs_floor_scale(small_fp8):
    """The module's amax for an all-zero input is 448 x 2^-14, so its scale is the graph's 2^-14 and the note says
    so."""
    _, x, path = small_fp8
    fresh = variant_module(_small_reference(), VariantPlan("fp8", "all"), x, torch.float16)  # not exported
    note = next(n for n in fresh.notes if "saw only zeros" in n)
    assert "448 x 2^-14 = 0.0273438 (2 saw only zeros" in note  # dead's input, conv2's weights
    assert float(fresh.module.layer1.dead.input_quantizer.amax) == 448 * 2.0**-14
    conv2_amax = fresh.module.layer1.conv2.weight_quantizer.amax.reshape(-1)
    assert conv2_amax[ZERO_CHANNELS].tolist() == [448 * 2.0**-14] * len(ZERO_CHANNELS)
    model = onnx.load(str(path))
    initializers = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    dead_q = next(n for n in model.graph.node if n.op_type == "QuantizeLinear" and "/dead/" in n.name)
    assert float(initializers[dead_q.input[1]]) == 2.0**-14
    assert match_graph_scales(fresh.module) == 0  # the module already simulates the graph's floor


def test_every_fp8_scale_is_positive_and_fp16_normal(small_fp8):
    """A quantizer that saw only zeros exports the fp16 floor, never a scale of 0 (TensorRT rejects it)."""
    built, _, path = small_fp8
    scales = _qdq_scales(onnx.load(str(path)))
    assert len(scales) == 3 * len(built.quantized)  # input Q and DQ, weight DQ
    for scale in scales:
        assert scale.dtype == np.float16 and np.all(np.isfinite(scale)) and np.all(scale >= 2.0**-14)
    assert min(float(s.min()) for s in scales) == 2.0**-14  # the zero quantizers, floored


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
            # which now and then moves a value across an FP8 rounding boundary in the next quantizer: one or
            # two of the linear's 2,304 inputs per image, each one e4m3 step, moving that pixel's 16 outputs
            error = np.abs(got - want) / np.abs(want).max()
            assert np.isfinite(got).all()
            assert error.max() <= 0.05 and error.mean() <= 1e-3 and (error > 1e-3).mean() <= 0.05


def test_match_graph_scales_rounds_amax_to_the_fp16_scale_and_floors_it(small_fp8):
    built, _, _ = small_fp8
    amaxes = [q.amax for q in built.module.modules() if isinstance(q, TensorQuantizer) and q.is_enabled]
    assert len(amaxes) == 2 * len(built.quantized) and any(a.numel() > 1 for a in amaxes)
    for amax in amaxes:  # export already matched them; doing it again changes nothing
        scale = amax.float() / 448
        assert (amax.dtype == torch.float32 and torch.equal(scale.half().float(), scale)
                and bool((scale >= 2.0**-14).all()))
    assert match_graph_scales(built.module) == 0


def _trt_qdq_graph(scale_source: str):
    """x -> trt::TRT_FP8QuantizeLinear -> trt::TRT_FP8DequantizeLinear, the scale a Constant, an initializer or
    computed."""
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


def test_grouped_model_weights_are_per_channel_scales_of_the_folded_kernels(files):
    """seresnext26d_32x4d (32-group convolutions, BatchNorm after every convolution), recipe `all`."""
    model, x, written = files
    graph = onnx.load(str(written["fp8-all"].path))
    onnx.checker.check_model(graph)
    weights = _weight_dqs(graph)
    structure = model_structure(model.module, x[:1])
    assert sorted(weights) == sorted(select(structure, "all", []).quantized)
    modules = dict(model.module.named_modules())
    batchnorm = dict(structure.conv_bn)
    grouped = folded = 0
    for layer, (node, _, scale) in weights.items():
        kernel = modules[layer].weight.detach()
        if layer in batchnorm:
            bn = modules[batchnorm[layer]]
            kernel = kernel * (bn.weight / torch.sqrt(bn.running_var + bn.eps)).detach().reshape(-1, 1, 1, 1)
            folded += 1
        amax = kernel.half().float().abs().reshape(kernel.shape[0], -1).amax(dim=1)
        assert {a.name: a.i for a in node.attribute} == {"axis": 0} and scale.shape == (kernel.shape[0],)
        np.testing.assert_allclose(scale.astype(np.float32), (amax / 448).clamp(min=2.0**-14).half().float().numpy(),
                                   rtol=2**-10)  # one fp16 step: the fold's own fp32 rounding
        grouped += getattr(modules[layer], "groups", 1) > 1
    assert grouped == 8 and folded == 28  # every block convolution and downsample; the 16 SE convolutions have no BN


def _weight_qdq_graph():
    """Two [4, 3] weights, the second a copy the exporter deduplicated (an Identity of the first), each
    Q -> DQ -> MatMul."""
    weight = numpy_helper.from_array(np.arange(12, dtype=np.float16).reshape(4, 3) - 6, "a.weight")
    scale = numpy_helper.from_array(np.array(0.5, dtype=np.float16), "scale")
    zero = helper.make_tensor("zp", onnx.TensorProto.FLOAT8E4M3FN, [], [0.0])
    nodes = [helper.make_node("Identity", ["a.weight"], ["b.weight"])]
    for name in ("a", "b"):
        nodes += [helper.make_node("QuantizeLinear", [f"{name}.weight", "scale", "zp"], [f"{name}.q"], saturate=1),
                  helper.make_node("DequantizeLinear", [f"{name}.q", "scale"], [f"{name}.w"]),
                  helper.make_node("MatMul", ["x", f"{name}.w"], [f"{name}.y"])]
    x = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT16, [2, 4])
    outputs = [helper.make_tensor_value_info(f"{n}.y", onnx.TensorProto.FLOAT16, [2, 3]) for n in "ab"]
    graph = helper.make_graph(nodes, "g", [x], outputs, [weight, scale, zero])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])


def test_weight_rewrite_follows_deduplicated_weights_and_refuses_what_it_cannot_map():
    ort = pytest.importorskip("onnxruntime")
    per_channel = torch.tensor([[1.0], [2.0], [4.0], [8.0]]) * 448 / 8  # [out, 1] as ModelOpt keeps it (axis 0)
    model = fp8_weight_initializers(_weight_qdq_graph(), {"a.weight": per_channel, "b.weight": torch.tensor(448.0)})
    onnx.checker.check_model(model, full_check=True)
    ops = [n.op_type for n in model.graph.node]
    assert "QuantizeLinear" not in ops and "Identity" not in ops and ops.count("DequantizeLinear") == 2
    assert {t.name for t in model.graph.initializer} == {"a.weight_fp8", "a.weight_scale",
                                                          "b.weight_fp8", "b.weight_scale"}
    got = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {"x": np.eye(2, 4, dtype=np.float16)})
    weight = (np.arange(12).reshape(4, 3) - 6).astype(np.float32)
    np.testing.assert_array_equal(got[0], weight[:2])  # 1/8 .. 1 per channel: every integer up to 6 is exact in e4m3
    np.testing.assert_array_equal(got[1], weight[:2])
    with pytest.raises(InspectError, match="quantizes b.weight, which has no FP8 weight quantizer"):
        fp8_weight_initializers(_weight_qdq_graph(), {"a.weight": per_channel})
    with pytest.raises(InspectError, match="1 FP8 weights are not quantized in the graph, e.g. c.weight"):
        fp8_weight_initializers(_weight_qdq_graph(), {"a.weight": per_channel, "b.weight": per_channel,
                                                      "c.weight": per_channel})


def test_fp8_files_of_a_real_model_have_positive_fp16_normal_scales(files):
    _, _, written = files
    for layout in ("all", "no-se", "no-se-no-layer1"):
        for scale in _qdq_scales(onnx.load(str(written[f"fp8-{layout}"].path))):
            assert np.all(np.isfinite(scale)) and np.all(scale.astype(np.float16) >= 2.0**-14)


@pytest.mark.slow
def test_fp8_onnx_agrees_with_pytorch_fp8_on_the_study_images(tmp_path):
    """seresnext26d_32x4d (grouped convolutions, per-channel weights): onnxruntime = PyTorch FP8, top-1 100 %."""
    pytest.importorskip("onnxruntime")
    from tests.fp8_onnx_numerics import check

    row = check("seresnext26d_32x4d", tmp_path)
    assert row.nonfinite == 0 and row.top1_agreement == 1.0
    assert row.ort_vs_fp8 <= 2 * row.fp8_vs_fp32


@pytest.mark.slow
def test_fp8_onnx_of_a_vit_differs_from_pytorch_only_at_pytorchs_own_noise_floor(tmp_path):
    """vit_tiny_patch16_224, 48 FP8 linears (random weights): PyTorch's FP8 moves by ~0.07 on inputs one fp16 step
    away, so onnxruntime may pick another class only where PyTorch's top-1 margin is below that (docs/evidence/onnx)."""
    pytest.importorskip("onnxruntime")
    from tests.fp8_onnx_numerics import check

    row = check("vit_tiny_patch16_224", tmp_path, noise_floor=True)
    assert row.misses_are_near_ties and row.ort_vs_fp8 <= 2 * row.noise_floor
