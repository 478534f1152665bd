"""The why in numbers (sessions/analyses/roofline.py, sessions/reports/roofline_report.py, the verdict's clause).

Expected values come from elsewhere: a convolution's FLOPs from PyTorch's own counter (torch.utils.flop_counter) on
a meta-device Conv2d of the recorded shape, the H200's peaks from NVIDIA's datasheet figures, times and ops from the
session's raw JSON."""

from __future__ import annotations

import copy
import json
import re

import pytest

from sessions.analyses.groups import load_rules
from sessions.analyses.roofline import LATENCY_FACTOR, group_roofs, layer_roofs, peaks_of, shortest_kernel_ms, work_of
from sessions.analyses.verdict import verdict_lines
from sessions.documents import storage
from sessions.reports.export import export_markdown
from tests.conftest import ROOT, run_cli

DPN68 = ROOT / "benchmarks/results/h200/dpn68-engine.json"  # fp16, cudnn-fp16, cudnn-fp8-all at batch 1
SENET_B32 = ROOT / "benchmarks/results/h200/senet154-engine-b32.json"
CPU_RUN = ROOT / "benchmarks/results/cpu/run-1.json"
# NVIDIA H100 / H200 SXM datasheet: 989.4 dense fp16 and 1978.9 dense FP8 tensor TFLOPS at the 1830 MHz boost clock,
# 132 SMs; the H200's memory 4.8 TB/s
DATASHEET_FP16, DATASHEET_FP8, DATASHEET_CLOCK_MHZ, DATASHEET_BW = 989.4e12, 1978.9e12, 1830, 4.8e12
_SIG = re.compile(r"in=(\d+)x(\d+)x(\d+)x(\d+) k=(\d+) r=\((\d+), (\d+)\) s=\((\d+), (\d+)\) p=\((\d+), (\d+)\) "
                  r"d=\((\d+), (\d+)\) g=(\d+)")


@pytest.fixture(scope="module")
def dpn68():
    return storage.load(DPN68)


@pytest.fixture(scope="module")
def senet():
    return storage.load(SENET_B32)


def torch_conv(signature: str) -> tuple[int, int, int, int]:
    """FLOPs of the convolution a signature describes, as PyTorch's flop counter counts them (meta tensors), and
    the element counts of its input, weight and output."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    n, c, h, w, k, r, s, sh, sw, ph, pw, dh, dw, g = map(int, _SIG.search(signature).groups())
    conv = torch.nn.Conv2d(c, k, (r, s), stride=(sh, sw), padding=(ph, pw), dilation=(dh, dw), groups=g, bias=False,
                           device="meta")
    x = torch.empty(n, c, h, w, device="meta")
    with FlopCounterMode(display=False) as counter:
        y = conv(x)
    return counter.get_total_flops(), x.numel(), conv.weight.numel(), y.numel()


def torch_conv_flops(signature: str) -> int:
    return torch_conv(signature)[0]


def test_peaks_agree_with_nvidias_datasheet(senet):
    peaks = peaks_of(senet)
    gpu = senet.environment.gpu
    per_sm_clock = {p: f / (gpu.multiprocessors * gpu.max_sm_clock_mhz * 1e6) for p, f in peaks.flops.items()}
    assert per_sm_clock["fp16"] == pytest.approx(DATASHEET_FP16 / (132 * DATASHEET_CLOCK_MHZ * 1e6), rel=1e-3)
    assert per_sm_clock["fp8"] == pytest.approx(DATASHEET_FP8 / (132 * DATASHEET_CLOCK_MHZ * 1e6), rel=1e-3)
    assert peaks.bandwidth == pytest.approx(DATASHEET_BW, rel=1e-3)
    assert "132 SMs" in peaks.source and "datasheet" in peaks.source
    assert peaks_of(storage.load(CPU_RUN)) is None  # a CPU has no GPU peaks


def test_conv_flops_and_achieved_rates_match_pytorchs_counter_and_the_recorded_times(senet):
    raw = json.loads(SENET_B32.read_text())
    variant = senet.variant("cudnn-fp8-all")
    raw_layers = {layer["name"]: layer for v in raw["variants"] if v["name"] == "cudnn-fp8-all"
                  for layer in v["layers"]}
    roofs = {r.layer: r for r in layer_roofs(senet, variant)}
    stem = next(name for name, layer in raw_layers.items() if "signature" in layer["attrs"])
    checked = 0
    for name in ("layer1.0.conv1", "layer1.1.conv2", "layer4.2.conv3", stem):  # 1x1, grouped 3x3, 1x1, stem
        layer = raw_layers[name]
        flops, inputs, weights, outputs = torch_conv(layer["attrs"]["signature"])
        width = {"fp8": 1, "fp16": 2}
        operand, result = (width[w]
                           for w in re.search(r"^conv (\w+) .* out=(\w+)$", layer["attrs"]["signature"]).groups())
        roof = roofs[name]
        assert roof.work.flops == flops
        assert roof.work.bytes == (inputs + weights) * operand + outputs * result  # each element moved once
        assert roof.tflops == pytest.approx(flops / (layer["time_ms"] / 1e3) / 1e12)
        checked += 1
    assert checked == 4


def test_a_layer_without_shapes_borrows_them_from_the_same_layer_of_another_variant(dpn68):
    raw = json.loads(DPN68.read_text())
    signatures = {layer["name"]: layer["attrs"]["signature"] for v in raw["variants"] if v["name"] == "cudnn-fp16"
                  for layer in v["layers"] if "signature" in layer["attrs"]}
    torch_fp16 = dpn68.variant("fp16")
    conv = next(layer for layer in torch_fp16.layers if layer.name in signatures)
    work = work_of(dpn68, torch_fp16, conv)
    assert work is not None and work.how == "signature of cudnn-fp16"
    assert work.flops == torch_conv_flops(signatures[conv.name])
    pooled = next(layer for layer in torch_fp16.layers if layer.op == "pooling")
    assert work_of(dpn68, torch_fp16, pooled) is None  # no shapes recorded: no figures, not a guess


def test_fp8_layers_on_kernels_without_fp8_tensor_cores_are_held_to_the_fp16_peak(dpn68):
    raw = json.loads(DPN68.read_text())
    fp8 = next(v for v in raw["variants"] if v["name"] == "cudnn-fp8-all")
    kernels = fp8["kernels"]
    arch: dict[int, set[str]] = {}
    for owner, name_id in zip(kernels["layer"], kernels["name"], strict=False):
        arch.setdefault(owner, set()).update(re.findall(r"sm(\d\d)", kernels["names"][name_id]))
    on_sm80 = {fp8["layers"][i]["name"] for i, found in arch.items() if found == {"80"}
               and fp8["layers"][i]["precision"] == "fp8" and fp8["layers"][i]["op"] == "conv"}
    assert on_sm80
    peaks = peaks_of(dpn68)
    for roof in layer_roofs(dpn68, dpn68.variant("cudnn-fp8-all")):
        if roof.layer in on_sm80:
            assert roof.work.precision == "fp16"
            assert roof.compute_share == pytest.approx(roof.tflops * 1e12 / peaks.flops["fp16"])


def test_each_bound_label_on_shapes_chosen_far_from_the_edges(dpn68):
    """A layer's time set against its floors by orders of magnitude, floors computed here from the shape."""
    session = copy.deepcopy(dpn68)
    variant = session.variant("cudnn-fp16")
    layer = next(layer for layer in variant.layers if layer.attrs.get("signature"))
    peaks, floor = peaks_of(session), shortest_kernel_ms(variant)

    def label(signature: str, time_ms: float) -> str | None:
        layer.attrs["signature"], layer.time_ms = signature, time_ms
        return next(r for r in layer_roofs(session, variant) if r.layer == layer.name).bound

    big = "conv fp16 in=256x512x28x28 k=512 r=(3, 3) s=(1, 1) p=(1, 1) d=(1, 1) g=1 epi=- out=fp16"
    compute_ms = torch_conv_flops(big) / peaks.flops["fp16"] * 1e3
    assert label(big, compute_ms * 2) == "compute"
    depthwise = "conv fp16 in=256x512x56x56 k=512 r=(3, 3) s=(1, 1) p=(1, 1) d=(1, 1) g=512 epi=- out=fp16"
    memory_ms = 2 * (2 * 256 * 512 * 56 * 56 + 512 * 9) / peaks.bandwidth * 1e3  # fp16 in and out, weights
    assert memory_ms > 10 * torch_conv_flops(depthwise) / peaks.flops["fp16"] * 1e3
    assert label(depthwise, memory_ms * 2) == "memory"
    tiny = "conv fp16 in=1x8x4x4 k=8 r=(1, 1) s=(1, 1) p=(0, 0) d=(1, 1) g=1 epi=- out=fp16"
    assert label(tiny, floor * 2) == "launch"
    assert label(tiny, floor * (LATENCY_FACTOR + 5)) == "latency"
    assert label(big, compute_ms * (LATENCY_FACTOR + 5)) == "latency"


def test_group_rates_are_their_layers_sums_over_their_time(senet):
    from sessions.analyses.groups import role_of

    variant = senet.variant("cudnn-fp8-all")
    roofs = layer_roofs(senet, variant)
    rules = load_rules()
    peaks = peaks_of(senet)
    groups = group_roofs(roofs, variant.layers, rules, peaks)
    assert any(g.tflops for g in groups) and any(g.compute_share for g in groups)
    for group in groups:
        members = [(r, layer) for r, layer in zip(roofs, variant.layers, strict=False)
                   if role_of(layer, rules) == group.group]
        shaped = [(r, layer) for r, layer in members if r.work is not None and layer.time_ms]
        seconds = sum(layer.time_ms for _, layer in shaped) / 1e3
        assert group.time_ms == pytest.approx(sum(layer.time_ms or 0.0 for _, layer in members))
        if shaped:
            assert group.tflops == pytest.approx(sum(r.work.flops for r, _ in shaped) / seconds / 1e12)
            assert group.gbps == pytest.approx(sum(r.work.bytes for r, _ in shaped) / seconds / 1e9)
            assert group.memory_share == pytest.approx(group.gbps * 1e9 / DATASHEET_BW)
            precisions = {r.work.precision for r, _ in shaped}
            if len(precisions) == 1 and group.compute_share is not None:
                held = {"fp16": DATASHEET_FP16, "fp8": DATASHEET_FP8}[precisions.pop()] * 1980 / DATASHEET_CLOCK_MHZ
                assert group.compute_share == pytest.approx(group.tflops * 1e12 / held, rel=1e-3)
            elif len(precisions) > 1:
                assert group.compute_share is None  # mixed precisions: no one peak to hold them to
        else:
            assert group.tflops is None and group.bounds == {}


def test_the_verdict_names_the_fp8_time_fp8_cannot_speed_up(dpn68):
    raw = json.loads(DPN68.read_text())
    fp8 = next(v for v in raw["variants"] if v["name"] == "cudnn-fp8-all")
    total = sum(layer["time_ms"] or 0.0 for layer in fp8["layers"])
    no_product = sum(layer["time_ms"] or 0.0 for layer in fp8["layers"]
                     if layer["op"] not in ("conv", "linear", "matmul"))
    line = next(line for line in verdict_lines(dpn68, load_rules()) if line.startswith("cudnn-fp8-all is "))
    found = re.search(r"([\d.]+) of its ([\d.]+) ms of layer time \((\d+) %\) is in layers FP8 cannot speed up "
                      r"\(([\d.]+) ms launch-bound products, ([\d.]+) ms in layers without a convolution or matrix "
                      r"product\)", line)
    assert found is not None, line
    cannot, whole, share, launch, without = map(float, found.groups())
    assert whole == pytest.approx(total, abs=0.005) and without == pytest.approx(no_product, abs=0.005)
    assert cannot == pytest.approx(launch + without, abs=0.011) and share == pytest.approx(cannot / whole * 100, abs=1)
    assert all("cannot speed up" not in line for line in verdict_lines(dpn68, load_rules())
               if not line.startswith("cudnn-fp8-all"))  # fp16 variants: no FP8 clause


def test_the_roofline_exports(dpn68, tmp_path):
    text = export_markdown(dpn68, load_rules(), ["roofline"])
    assert "## Roofline" in text and "TFLOP/s" in text and "latency" in text
    cpu = export_markdown(storage.load(CPU_RUN), load_rules(), ["roofline"])
    assert "No GPU peaks: the session ran on a CPU." in cpu
    unshaped = copy.deepcopy(dpn68)  # no signatures: no work anywhere, one line instead of empty tables
    for variant in unshaped.variants:
        for layer in variant.layers:
            layer.attrs.pop("signature", None)
    assert "nothing to place on the roofline" in export_markdown(unshaped, load_rules(), ["roofline"])
    result = run_cli("export", str(DPN68), "--format", "csv", "--sections", "roofline")
    assert result.returncode == 0, result.stderr
    rows = [line.split(",") for line in result.stdout.splitlines()]
    raw = json.loads(DPN68.read_text())
    assert len(rows) - 1 == sum(len(v["layers"]) for v in raw["variants"])
    assert {row[11] for row in rows[1:]} <= {"", "launch", "memory", "compute", "latency"}
    document = run_cli("export", str(DPN68), "--format", "json", "--sections", "roofline")
    records = json.loads(document.stdout)["layers"]
    assert len(records) == len(rows) - 1 and {r["bound"] for r in records} >= {"launch", "latency"}


def test_work_from_recorded_tensors_as_tensorrt_files_give_them(dpn68):
    """TensorRT's layer information records each tensor's shape and type: a convolution and a matrix product."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from sessions.documents.model import Layer, Tensor

    conv = torch.nn.Conv2d(64, 128, 3, stride=2, padding=1, groups=4, bias=False, device="meta")
    linear = torch.nn.Linear(192, 576, bias=False, device="meta")
    x_conv, x_linear = torch.empty(8, 64, 56, 56, device="meta"), torch.empty(8, 197, 192, device="meta")
    with FlopCounterMode(display=False) as conv_count:
        y_conv = conv(x_conv)
    with FlopCounterMode(display=False) as linear_count:
        y_linear = linear(x_linear)
    layers = [
        Layer("c", "Convolution", op="conv", precision="fp16", groups=4, kernel_shape=[3, 3],
              inputs=[Tensor("x", "fp16", list(x_conv.shape))], outputs=[Tensor("y", "fp16", list(y_conv.shape))]),
        Layer("m", "MatrixMultiply", op="linear", precision="fp8",
              inputs=[Tensor("x", "fp8", list(x_linear.shape))], outputs=[Tensor("y", "fp16", list(y_linear.shape))]),
    ]
    variant = dpn68.variant("cudnn-fp8-all")
    c, m = (work_of(dpn68, variant, layer) for layer in layers)
    assert c.flops == conv_count.get_total_flops() and c.how == "tensors" and c.precision == "fp16"
    assert c.bytes == 2 * (x_conv.numel() + conv.weight.numel() + y_conv.numel())
    assert m.flops == linear_count.get_total_flops() and m.precision == "fp8"
    assert m.bytes == x_linear.numel() + linear.weight.numel() + 2 * y_linear.numel()


def test_shapes_no_library_would_run_give_no_work_not_an_error(dpn68):
    from sessions.documents.model import Layer, Tensor

    variant = dpn68.variant("cudnn-fp8-all")
    zero_groups = Layer("z", "conv", op="conv", precision="fp16",
                        attrs={"signature": "conv fp16 in=1x8x4x4 k=8 r=(1, 1) s=(1, 1) p=(0, 0) d=(1, 1) g=0 epi=- "
                                            "out=fp16"})
    uneven = Layer("u", "Convolution", op="conv", precision="fp16", groups=3, kernel_shape=[3, 3],
                   inputs=[Tensor("x", "fp16", [1, 8, 4, 4])], outputs=[Tensor("y", "fp16", [1, 8, 4, 4])])
    dynamic = Layer("d", "MatrixMultiply", op="matmul", precision="fp16",
                    inputs=[Tensor("x", "fp16", [-1, 8])], outputs=[Tensor("y", "fp16", [-1, 8])])
    assert [work_of(dpn68, variant, layer) for layer in (zero_groups, uneven, dynamic)] == [None, None, None]


def test_fp32_products_are_held_to_the_tf32_peak_where_pytorch_allows_tf32():
    """segformer-b0 on the H200: PyTorch's tf32_cudnn was on, so its fp32 convolutions ran on TF32 tensor cores."""
    session = storage.load(ROOT / "benchmarks/results/h200/segformer-b0-engine.json")
    assert session.environment.torch.tf32_cudnn
    datasheet_tf32 = 494.7e12 * session.environment.gpu.max_sm_clock_mhz / DATASHEET_CLOCK_MHZ  # H100 / H200 SXM
    convs = [r for r in layer_roofs(session, session.variant("fp32")) if r.op == "conv" and r.work is not None]
    assert convs and all(r.work.precision == "tf32" for r in convs)
    assert convs[0].compute_share == pytest.approx(convs[0].tflops * 1e12 / datasheet_tf32, rel=1e-3)
    session.environment.torch.tf32_cudnn = False
    fp32 = next(r for r in layer_roofs(session, session.variant("fp32")) if r.layer == convs[0].layer)
    assert fp32.work.precision == "fp32"


SCALED = ROOT / "benchmarks/results/h200/scaled-fp16/main/senet154-warm.json"


def test_a_layer_on_the_scaled_graph_has_its_own_signatures_work():
    """The engine's convolutions on a graph scaled by ones record signatures ending in `scale=1`: each gets the work
    PyTorch's counter gives its shape, from its own signature (not borrowed from another variant's layer)."""
    session = storage.load(SCALED)
    raw = json.loads(SCALED.read_text())
    variant = next(v for v in raw["variants"] if v["name"] == "cudnn-fp16")
    scaled = {layer["name"]: layer["attrs"]["signature"] for layer in variant["layers"]
              if str(layer["attrs"].get("signature", "")).endswith(" scale=1")}
    assert len(scaled) == 50
    engine = session.variant("cudnn-fp16")
    for layer in engine.layers:
        if layer.name in scaled:
            work = work_of(session, engine, layer)
            assert work is not None and work.how == "signature"
            assert work.flops == torch_conv_flops(scaled[layer.name])


MATMUL = ROOT / "benchmarks/results/h200/matmul-tactic/final/main/senet154-warm.json"


@pytest.mark.parametrize("variant_name", ["cudnn-fp16", "cudnn-fp8-all"])
def test_a_layer_on_the_matmul_graph_has_its_own_signatures_work(variant_name):
    """The engine's 1x1 convolutions on cuDNN's matmul graph record signatures ending in `matmul`: each gets the work
    PyTorch's counter gives its convolution's shape, from its own signature."""
    session = storage.load(MATMUL)
    raw = json.loads(MATMUL.read_text())
    variant = next(v for v in raw["variants"] if v["name"] == variant_name)
    matmul = {layer["name"]: layer["attrs"]["signature"] for layer in variant["layers"]
              if str(layer["attrs"].get("signature", "")).endswith(" matmul")}
    assert len(matmul) > 90
    engine = session.variant(variant_name)
    for layer in engine.layers:
        if layer.name in matmul:
            work = work_of(session, engine, layer)
            assert work is not None and work.how == "signature", layer.name
            assert work.flops == torch_conv_flops(matmul[layer.name])


@pytest.mark.parametrize("words", [{}, {"unit_scale": True}, {"as_matmul": True}, {"cold_weights": True},
                                   {"unit_scale": True, "cold_weights": True},
                                   {"as_matmul": True, "cold_weights": True}])
def test_every_way_the_engine_defines_or_times_a_graph_keeps_its_convolutions_work(words):
    """Each signature the engine writes (`ConvSignature.key`, whatever graph defines the convolution or however its
    tactics were timed) gets the work PyTorch's counter gives its convolution."""
    from builders.engine.kernels import ConvSignature
    from sessions.analyses.roofline import _signature_work

    key = ConvSignature("fp16", (2, 64, 14, 14), 128, (1, 1), (1, 1), (0, 0), (1, 1), 1, ("relu",), False,
                        **words).key()
    work = _signature_work(key, None)
    assert work is not None and work.flops == torch_conv_flops(key)
