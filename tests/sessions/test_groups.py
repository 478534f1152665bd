import copy
import json
import re

import pytest

from sessions.analyses.groups import builtin_rules, compare_groups, load_rules, op_from_name, role_of, stage_of
from sessions.analyses.lowering import diagnose
from sessions.documents import storage
from sessions.documents.errors import InputError
from sessions.documents.model import Layer
from tests.conftest import H200, ROOT, run_cli

SESSION = H200 / "senet154-h200.json"


@pytest.fixture(scope="module")
def session():
    return storage.load(SESSION)


def test_senet154_roles_on_real_kernels(session):
    rules = load_rules()
    table = {c.group: c for c in compare_groups(session, "role", rules)}
    grouped = table["grouped convolution"].rows["fp16"]
    assert grouped.layers == 50  # one 64-group 3x3 convolution per SENet block
    assert table["quantize / dequantize"].rows["fp16"] is None
    assert table["quantize / dequantize"].rows["fp8-all"].layers == 2 * 254
    assert table["quantize / dequantize"].rows["fp8-no-se"].layers == 2 * 154
    total = sum(c.rows["fp16"].kernels_per_call for c in table.values() if c.rows["fp16"])
    assert total == session.variant("fp16").trace.per_call  # every kernel in exactly one group


def test_undoctored_split_flags_match_the_group_count(session):
    flags = diagnose(session.variant("fp16"))
    assert {f.layer for f in flags} == {"layer1.0.conv2", "layer1.1.conv2", "layer1.2.conv2"}
    assert all(f.kernels_per_call == f.groups == 64 for f in flags)


def doctor(variant, layer_name, extra):
    """Give `layer_name` `extra` more kernels per call, copying one of its own kernels."""
    doctored = copy.deepcopy(variant)
    index = next(i for i, layer in enumerate(doctored.layers) if layer.name == layer_name)
    table = doctored.kernels
    row = table.layer.index(index)
    for _ in range(extra):
        for column in ("name", "layer", "call", "start_ns", "duration_ns", "stream", "grid", "block"):
            getattr(table, column).append(getattr(table, column)[row])
    return doctored


def test_a_doctored_grouped_convolution_with_64_kernels_is_flagged(session):
    fp16 = session.variant("fp16")
    target = "layer3.10.conv2"  # a 64-group convolution that cuDNN runs in a few kernels
    before = [f for f in diagnose(fp16) if f.layer == target]
    assert before == []
    kernels_now = sum(1 for i in fp16.kernels.layer if fp16.layers[i].name == target)
    doctored = doctor(fp16, target, 64 - kernels_now)
    flags = [f for f in diagnose(doctored) if f.layer == target]
    assert len(flags) == 1 and flags[0].reason == "per-group split" and flags[0].kernels_per_call == 64


def test_a_kernel_jump_against_the_baseline_is_flagged(session):
    fp16 = session.variant("fp16")
    target = "layer2.0.conv1"  # a 1x1 convolution: no groups, so only the jump can flag it
    doctored = doctor(fp16, target, 20)
    flags = diagnose(doctored, fp16)
    assert [(f.layer, f.reason) for f in flags if f.reason == "kernel jump"] == [(target, "kernel jump")]


def test_user_rules_come_first(tmp_path):
    rules_file = tmp_path / "r.toml"
    rules_file.write_text('[[roles]]\nname = "my stem"\nnames = ["^conv1\\\\."]\n')
    rules = load_rules(rules_file)
    assert role_of(Layer(name="conv1.0", kind="Conv2d", groups=1, kernel_shape=[3, 3], attrs={"op": "conv"}),
                   rules) == "my stem"
    bad = tmp_path / "bad.toml"
    bad.write_text('[[roles]]\nname = "x"\nnames = ["("]\n')
    with pytest.raises(InputError, match="bad regular expression"):
        load_rules(bad)


def test_groups_command_text_and_json():
    text = run_cli("groups", str(SESSION), "--variant", "fp16", "--variant", "fp8-all")
    assert text.returncode == 0, text.stderr
    assert "grouped convolution" in text.stdout and "flagged layers: 6" in text.stdout
    as_json = run_cli("groups", str(SESSION), "--by", "stage", "--json")
    assert as_json.returncode == 0 and '"layer3"' in as_json.stdout
    unknown = run_cli("groups", str(SESSION), "--variant", "int4")
    assert unknown.returncode == 2 and "no variant 'int4'" in unknown.stderr


def test_a_stage_from_the_models_structure_wins_over_a_name_that_looks_like_one():
    rules = load_rules()
    named = Layer(name="features.conv2_3.c1x1_a.conv", kind="Conv2d")  # dpn68: conv2_3 ends the first stage
    assert stage_of(named, rules) != "stage 1"
    named.attrs["stage"] = "stage 1"
    assert stage_of(named, rules) == "stage 1"


ENGINE_SESSION = ROOT / "benchmarks/results/h200/plans-held/senet154-plans-held.json"


def test_fp8_layers_on_kernels_without_fp8_tensor_cores_are_flagged():
    """On the H200 the engine's FP8 grouped 3x3 convolutions ran kernels built for sm80 (no FP8 tensor cores); the
    expected layers come from the raw JSON: FP8 as run, every kernel name's smNN token below 89."""
    raw = json.loads(ENGINE_SESSION.read_text())
    session = storage.load(ENGINE_SESSION)
    for name in ("cudnn-fp8-all", "cudnn-fp16"):
        variant = next(v for v in raw["variants"] if v["name"] == name)
        kernels = variant["kernels"]
        names_of: dict[int, set[str]] = {}
        for owner, name_id in zip(kernels["layer"], kernels["name"], strict=False):
            names_of.setdefault(owner, set()).add(kernels["names"][name_id])
        expected = set()
        for index, layer in enumerate(variant["layers"]):
            archs = [re.search(r"sm(\d+)", n) for n in names_of.get(index, ())]
            if layer["precision"] == "fp8" and archs and all(a and int(a.group(1)) < 89 for a in archs):
                expected.add(layer["name"])
        flagged = {f.layer for f in diagnose(session.variant(name)) if f.reason.startswith("fp8 on sm")}
        assert flagged == expected
        if name == "cudnn-fp8-all":
            grouped = {layer["name"] for layer in variant["layers"]
                       if (layer.get("groups") or 1) > 1 and layer["precision"] == "fp8"}
            assert expected == grouped and len(grouped) == 47  # every grouped convolution run in FP8, nothing else
        else:
            assert not expected


@pytest.mark.parametrize(("name", "arch"), [
    ("sm80_xmma_fprop_implicit_gemm_f16f16_f16f32_f32_nhwckrsc_nhwc", (8, 0)),
    ("cudnn_generated_fort_native_sm90_convFwd_pointwise_knob_19", (9, 0)),
    ("cutlass3x_sm90_tensorop_s64x128x32gemm_e4m3", (9, 0)),
    ("sm90a_xmma_gemm", (9, 0)),
    ("kernel_sm120_gemm", (12, 0)),
    ("triton_poi_fused__to_copy_clamp_mul_0", None),
    ("ampere_fp16_s1688gemm_fp16_128x128", None),
    ("asm80x_kernel", None),  # inside a longer word: no token
])
def test_a_kernels_architecture_is_its_own_smNN_token(name, arch):
    from sessions.analyses.lowering import kernel_arch

    assert kernel_arch(name) == arch


def test_only_fp8_layers_whose_every_kernel_names_an_architecture_below_8_9_are_flagged():
    """sm80 alone: flagged; sm89 (FP8 tensor cores): not; sm80 beside a kernel naming no architecture: nothing
    to conclude; an fp16 layer on sm80: not an FP8 question."""
    from sessions.documents.model import KernelTable, TraceSummary, Variant

    kernels = {"a": ["sm80_xmma_fprop"], "b": ["sm89_xmma_fprop_e4m3"], "c": ["sm80_xmma_fprop", "triton_quantize"],
               "d": ["sm80_xmma_fprop"]}
    layers = [Layer(name, "conv", precision="fp16" if name == "d" else "fp8") for name in kernels]
    names = sorted({k for ks in kernels.values() for k in ks})
    owned = [(i, names.index(k)) for i, ks in enumerate(kernels.values()) for k in ks]
    table = KernelTable(names=names, name=[n for _, n in owned], layer=[i for i, _ in owned], call=[0] * len(owned),
                        start_ns=[0] * len(owned), duration_ns=[1] * len(owned), stream=[0] * len(owned),
                        grid=[[1, 1, 1]] * len(owned), block=[[1, 1, 1]] * len(owned))
    variant = Variant(name="v", backend="cudnn", precision="fp8", device="cuda", layers=layers, kernels=table,
                      trace=TraceSummary(tracer="cupti", unit="kernels", calls=1, records=len(owned), unattributed=0,
                                         dropped=0))
    assert {(f.layer, f.reason) for f in diagnose(variant)} == {("a", "fp8 on sm80 kernels")}


@pytest.mark.parametrize(("name", "op"), [
    ("node_conv2d_1 + node_relu_1", "conv"),  # TensorRT 10.16's name for a fused conv + relu of torch.onnx's graph
    ("node_max_pool2d_1", "pooling"),
    ("node_linear_1", "linear"),
    ("node_addmm_2", "linear"),
    ("node_bmm", "matmul"),
    ("node_layer_norm_3", "normalization"),
    ("node_cat_1", "concat"),
    ("node_gelu_4", "activation"),
    ("node_add_12", "elementwise"),
    ("node_permute_2", "shuffle"),
    ("node_after_classifier", None),  # a name the exporter gave no op word: no guess
])
def test_names_of_torch_onnx_nodes_give_their_op(name, op):
    assert op_from_name(name, builtin_rules()) == op


def test_a_layers_op_decides_before_its_class_name():
    """A module class whose name holds another role's word (rexnet's `LinearBottleneck`, whose own ops slice, add and
    concatenate) is what its ops are; unfused attention computed by the module itself is a matmul whatever its class
    is called; a kind decides where no op is known (a TensorRT layer type the vocabulary lacks)."""
    rules = load_rules(None)
    assert role_of(Layer(name="features.3", kind="LinearBottleneck", op="elementwise"), rules) == (
        "pooling / elementwise / activation")
    assert {role_of(Layer(name="blocks.0.attn", kind=kind, op="matmul"), rules)
            for kind in ("Attention", "CrossAttention", "Attention2d")} == {"GEMM / linear"}
    assert role_of(Layer(name="x", kind="Reformat"), rules) == "reformat"
    assert role_of(Layer(name="head.drop", kind="Dropout", op="other"), rules) == "pooling / elementwise / activation"


@pytest.mark.parametrize(("kernel", "groups", "inputs", "role"), [
    (None, None, None, "unknown-kernel convolution"),  # names alone: any shape
    (None, 1, None, "unknown-kernel convolution"),  # one group, no kernel: pointwise or spatial
    ([1, 1], None, None, "pointwise (1x1) convolution"),
    ([3, 3], None, None, "other convolution"),
    (None, 32, 32, "depthwise convolution"),  # a group per input channel, whatever the kernel
    (None, 4, 32, "grouped convolution"),
])
def test_a_convolution_whose_files_state_no_kernel_is_not_called_spatial(kernel, groups, inputs, role):
    from sessions.documents.model import Tensor

    layer = Layer(name="block/conv", kind="Convolution", op="conv", kernel_shape=kernel, groups=groups,
                  in_channels=inputs,
                  inputs=[Tensor(name="x", shape=[1, inputs, 8, 8])] if inputs else [])
    assert role_of(layer, load_rules()) == role
