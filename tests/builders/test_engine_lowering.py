"""The cuDNN / cuBLASLt engine's lowering on the CPU, on real timm graphs (BatchNorm folded, as the engine
folds it): which epilogues fuse into which convolution, where quantize layers go, which layers fall back
and why, and the precision each layer records. cuDNN is stood in for by the refusals it would give; the
expectations come from the models' own module structure and forward calls, not from the lowering."""

from __future__ import annotations

import copy

import pytest
import torch

from builders.engine.build import _layer, static_refusals, unexplained_fp16, unlowered
from builders.engine.fusion_regions import find_regions
from builders.engine.graph import record_run, trace
from builders.engine.lowering import QUANTIZE_SUFFIX, OpNode, Program, Step, lower
from builders.models.structure import model_structure
from builders.pytorch.variant_modules import fold_batchnorm
from builders.recipes.fp8 import select
from tests.engine_stand_in import stand_in_engine

timm = pytest.importorskip("timm")
pytestmark = pytest.mark.slow
TRACED_INPUT = (2, 3, 224, 224)  # the engine's graph holds the traced input's shape: the runs below use it


def _lowered(name: str, recipe: str | None, refused: dict[str, str] | None = None,
             output_refused: dict[str, str] | None = None):
    model = timm.create_model(name, pretrained=False).eval()
    structure = model_structure(model, torch.zeros(1, 3, 224, 224))
    fp8 = set(select(structure, recipe, []).quantized) if recipe else set()
    keys = {node.path: node.input_key for node in structure.layers}  # one input tensor, one amax: one scale
    folded = copy.deepcopy(model)
    fold_batchnorm(folded, structure.conv_bn)
    traced = trace(folded, torch.zeros(TRACED_INPUT))
    refused = {**static_refusals(folded, fp8), **(refused or {})}  # as the engine starts: what no kernel takes
    shapes = record_run(traced, torch.zeros(TRACED_INPUT)).shapes  # as the engine lowers: adds that broadcast stay
    return model, fp8, lower(traced.nodes, fp8, keys, refused, output_refused, shapes), traced


def _steps(program: Program) -> dict[str, Step]:
    return {step.name: step for step in program.steps}


@pytest.fixture(scope="module")
def resnet18():
    return _lowered("resnet18", "all")


@pytest.fixture(scope="module")
def seresnext():
    return _lowered("seresnext26d_32x4d", "all")


def test_resnet_blocks_fuse_relu_and_the_residual_add(resnet18):
    model, _, program, _ = resnet18
    steps = _steps(program)
    blocks = [(path, block) for path, block in model.named_modules() if type(block).__name__ == "BasicBlock"]
    assert len(blocks) == 8
    for path, block in blocks:
        assert steps[f"{path}.conv1"].epilogue == ("relu",)
        assert steps[f"{path}.conv2"].epilogue == ("add", "relu")  # conv2 runs first: the add of two convs is its
        if block.downsample is not None:
            assert steps[f"{path}.downsample.0"].epilogue == ()
            assert steps[f"{path}.conv2"].inputs[1] == steps[f"{path}.downsample.0"].node
    # every BatchNorm folded, every ReLU and add fused: what stays a PyTorch op is the stem's pool, the head's
    # pooling and flatten
    assert [s.op for s in program.steps if s.kind == "torch"] == ["pooling", "pooling", "other"]


def test_fp8_output_where_every_reader_is_fp8_and_quantize_layers_elsewhere(seresnext):
    _, fp8, program, _ = seresnext
    steps = _steps(program)
    block = "layer2.1"
    assert steps[f"{block}.conv1"].output_fp8 and steps[f"{block}.conv1"].output_scale_of == f"{block}.conv2"
    assert steps[f"{block}.conv2"].output_fp8 and steps[f"{block}.conv2"].inputs == (steps[f"{block}.conv1"].node,)
    assert not steps[f"{block}.conv3"].output_fp8  # read by the SE block's mean and multiply
    assert steps[f"{block}.se.fc1"].epilogue == ("relu",) and steps[f"{block}.se.fc2"].epilogue == ("sigmoid",)
    assert steps[f"{block}.se.fc1"].inputs == (f"{block}.se.fc1{QUANTIZE_SUFFIX}",)  # from the mean: a quantize layer
    assert steps[f"{block}.conv1"].inputs == (f"{block}.conv1{QUANTIZE_SUFFIX}",)  # from the block's ReLU
    quantizers = [s for s in program.steps if s.kind == "quantize"]
    assert all(s.precision == "fp8" for s in quantizers)
    # every FP8 layer reads FP8: a quantize layer or a conv graph that writes FP8
    fp8_values = {s.node for s in program.steps if s.kind == "quantize" or s.output_fp8}
    for step in program.steps:
        if step.precision == "fp8" and step.kind in ("conv", "linear"):
            assert step.inputs[0] in fp8_values, step.name
    assert {s.name for s in program.steps if s.precision == "fp8" and s.kind == "conv"} == fp8


def test_layers_reading_one_tensor_share_one_quantize_layer(seresnext):
    model, _, program, _ = seresnext
    steps = _steps(program)
    # layer1.0's shortcut is a stride-1 conv reading the block input, as conv1 does (the 'd' average pool only
    # in the later stages)
    assert isinstance(model.layer1[0].downsample[0], torch.nn.Identity)
    shared = steps["layer1.0.downsample.1"].inputs[0]
    assert shared == steps["layer1.0.conv1"].inputs[0] == f"layer1.0.conv1{QUANTIZE_SUFFIX}"
    assert not isinstance(model.layer2[0].downsample[0], torch.nn.Identity)
    assert steps["layer2.0.downsample.1"].inputs[0] == f"layer2.0.downsample.1{QUANTIZE_SUFFIX}"


def test_a_layer_cudnn_refuses_runs_fp16_with_the_reason_and_its_neighbours_adapt():
    _, _, program, _ = _lowered("seresnext26d_32x4d", "all",
                                refused={"layer1.0.conv2": "no engine for 4 channels per group"})
    steps = _steps(program)
    conv2 = steps["layer1.0.conv2"]
    assert (conv2.precision, conv2.asked, conv2.fallback) == ("fp16", "fp8", "no engine for 4 channels per group")
    assert not steps["layer1.0.conv1"].output_fp8  # its reader no longer takes FP8
    assert conv2.output_fp8  # an fp16 graph still writes FP8 for the FP8 conv3
    layer = _layer(conv2)
    assert (layer.precision, layer.quantized, layer.attrs["fallback"]) == (
        "fp16", False, "no engine for 4 channels per group")


def test_no_cudnn_graph_at_all_makes_a_pytorch_op_and_a_refused_output_a_quantize_layer():
    _, _, program, _ = _lowered("resnet18", "all", refused={"layer1.0.conv1@fp16": "padding mode"},
                                output_refused={"layer2.0.conv1": "FP8 output not fused"})
    steps = _steps(program)
    assert (steps["layer1.0.conv1"].kind, steps["layer1.0.conv1"].fallback) == ("torch", "padding mode")
    assert not steps["layer2.0.conv1"].output_fp8
    assert steps["layer2.0.conv2"].inputs[0] == f"layer2.0.conv2{QUANTIZE_SUFFIX}"


def test_silent_fp16_is_caught():
    step = Step("a.conv", "conv", "a_conv", ("x",), "fp16", "conv", asked="fp8")
    program = Program([step], "a_conv", "x")
    assert unexplained_fp16(program, {"a.conv"}) == ["a.conv"]
    step.fallback = "cuDNN refused"
    assert unexplained_fp16(program, {"a.conv"}) == []


def test_dpn68_concatenations_are_layers_of_their_own():
    model, _, program, _ = _lowered("dpn68", "all")
    calls = []
    original = torch.cat

    def counting(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    torch.cat = counting
    try:
        with torch.no_grad():
            model(torch.zeros(1, 3, 224, 224))
    finally:
        torch.cat = original
    assert len([s for s in program.steps if s.op == "concat"]) == len(calls) > 0


def test_vit_linears_lower_to_fp8_gemms_with_quantize_layers_and_gelu_stays_pytorch():
    model, fp8, program, _ = _lowered("vit_tiny_patch16_224", "all")
    linears = [p for p, m in model.named_modules() if isinstance(m, torch.nn.Linear)]
    steps = _steps(program)
    assert [s.name for s in program.steps if s.kind == "linear"] == linears
    assert {s.name for s in program.steps if s.kind == "linear" and s.precision == "fp8"} == fp8
    for path in fp8:
        assert steps[path].inputs == (f"{path}{QUANTIZE_SUFFIX}",)
    assert steps["blocks.0.mlp.act"].op == "activation"
    assert steps["patch_embed.proj"].kind == "conv" and steps["patch_embed.proj"].precision == "fp16"  # the stem


def test_an_add_that_broadcasts_is_not_fused_into_the_convolution_before_it():
    """A global-context block adds its (N, C, 1, 1) term, a 1x1 convolution's output, onto its (N, C, H, W) input: a
    cuDNN graph's residual has the graph's output shape, so the add stays a PyTorch op; the same lowering without
    shapes (structure alone) would fuse it (adds of equal shapes still fuse: resnet18's, below)."""
    model, _, program, traced = _lowered("gcresnext26ts", None)
    steps = _steps(program)
    add_terms = [name for name in steps if name.endswith("attn.mlp_add.fc2")]
    assert len(add_terms) == 8 and all(steps[name].epilogue == () for name in add_terms)
    by_structure = _steps(lower(traced.nodes, set(), {}, static_refusals(model, set())))
    assert all(by_structure[name].epilogue == ("add",) for name in add_terms)
    torch.manual_seed(0)
    x = torch.randn(TRACED_INPUT)
    with torch.no_grad():
        expected = model(x)
    torch.testing.assert_close(stand_in_engine(program, traced, x).infer(x), expected, rtol=1e-4, atol=1e-4)


def test_the_fp16_engine_lowers_the_same_graph_without_quantize_layers():
    _, _, program, _ = _lowered("resnet18", None)
    assert not [s for s in program.steps if s.kind == "quantize" or s.precision == "fp8" or s.output_fp8]
    assert _steps(program)["layer1.0.conv2"].epilogue == ("add", "relu")


@pytest.mark.parametrize("name", ["resnet18", "seresnext26d_32x4d", "dpn68", "vit_tiny_patch16_224"])
def test_the_engine_runs_its_fp16_lowering_to_the_models_own_outputs(name):
    """The engine's interpreter (steps in order, fused epilogues, aliases, optional inputs, freed values) with a
    stand-in for cuDNN gives the model's outputs: every fusion read the right operands."""
    model, _, program, traced = _lowered(name, None)
    torch.manual_seed(0)
    x = torch.randn(TRACED_INPUT)
    with torch.no_grad():
        expected = model(x)
    torch.testing.assert_close(stand_in_engine(program, traced, x).infer(x), expected, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("name", ["seresnext26d_32x4d", "dpn68", "vit_tiny_patch16_224"])
def test_the_engine_runs_its_fp8_lowering_to_the_models_own_outputs(name):
    """With recipe `all`, every layer the recipe quantizes is an FP8 layer or names why it is not (grouped
    convolutions, concatenations, linears), and the lowered program with quantize layers standing in as
    pass-throughs computes the model: each FP8 layer and quantize layer reads the right value."""
    model, fp8, program, traced = _lowered(name, "all")
    steps = _steps(program)
    assert fp8 and not traced.leaves
    assert all(steps[path].precision == "fp8" or steps[path].fallback for path in fp8)
    assert unexplained_fp16(program, fp8) == []
    torch.manual_seed(0)
    x = torch.randn(TRACED_INPUT)
    with torch.no_grad():
        expected = model(x)
    torch.testing.assert_close(stand_in_engine(program, traced, x).infer(x), expected, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("known, fused", [({"conv": (1, 8, 4, 4), "other": (1, 8, 4, 4)}, True),
                                          ({"conv": (1, 8, 4, 4), "other": (1, 8, 1, 1)}, False),
                                          ({"x": (1, 8, 4, 4)}, False)])
def test_an_add_fuses_only_where_both_operands_shapes_are_known_and_equal(known, fused):
    nodes = [OpNode("x", "input"), OpNode("conv", "conv", ("x",), "conv"), OpNode("other", "other", ("x",), "other"),
             OpNode("add", "add", ("conv", "other")), OpNode("out", "output", ("add",))]
    conv = _steps(lower(nodes, set(), {}, {}, value_shapes=known))["conv"]
    assert (conv.epilogue == ("add",)) is fused and (conv.residual == "other") is fused


def test_a_recipe_layer_the_engine_runs_as_a_pytorch_op_is_asked_for_fp8_and_says_why():
    """eca_resnet33ts's channel attention convolves with a Conv1d, which recipe `all` selects (a convolution) and the
    engine has no kernel for (its convolutions are 2-D cuDNN graphs): each runs as a PyTorch op in fp16, asked for in
    FP8, with its reason, so the engine builds (a layer in fp16 without one stops it), and the outputs hold."""
    model, fp8, program, traced = _lowered("eca_resnet33ts", "all")
    one_d = [path for path, module in model.named_modules() if isinstance(module, torch.nn.Conv1d)]
    assert one_d and set(one_d) <= fp8
    steps = _steps(program)
    for path in one_d:
        assert (steps[path].kind, steps[path].asked, steps[path].precision) == ("torch", "fp8", "fp16")
        assert "Conv1d" in str(steps[path].fallback)
    assert unexplained_fp16(program, fp8) == [] and unlowered(program, fp8) == []
    # run fp16, each joins its block's fused region as the fp16 engine's does (the region keeps its record:
    # tests/builders/test_engine_fusion.py)
    in_regions = {program.steps[index].name for region in find_regions(traced.nodes, program.steps)
                  for index in region.steps}
    assert set(one_d) <= in_regions
    torch.manual_seed(0)
    x = torch.randn(TRACED_INPUT)
    with torch.no_grad():
        expected = model(x)
    torch.testing.assert_close(stand_in_engine(program, traced, x).infer(x), expected, rtol=1e-4, atol=1e-4)
