"""The FP8 probe without a GPU: layer collection, calibration and dedupe, the quantize, the probe's glue with a
stand-in engine for what needs a GPU (its kernels are the engine's: tests/inspector/test_probe_engine_layers.py), the
session it builds, the estimate's wording, and the exit-3 refusals."""

from __future__ import annotations

import contextlib
import copy
import sys

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from builders.engine.build import static_refusals
from builders.engine.tactics import CUBLASLT
from builders.fp8 import quantizer as fp8_quantizer
from builders.fp8.format import E4M3_MAX, capability_problem, quantize_weight
from builders.fp8.quantizer import quantize
from builders.models.layer_spec import LayerSpec, group_by_spec, spec_of
from inspector.cli import main
from inspector.probe import engine_layers, fp8_probe
from inspector.probe.probe_session import (
    ISOLATED,
    UNATTRIBUTED_NOTE,
    UNTRACED_NOTE,
    ProbedLayer,
    ShapeTimes,
    fp8_layers,
    fp16_layers,
    probe_variant,
    quantizer_name,
)
from profilers import module_ranges
from profilers.attribution import KernelRecord, Launch, Range, TraceRecords
from sessions.analyses.groups import load_rules, role_of
from sessions.documents.errors import InputError, joined_message
from sessions.documents.model import Environment, Session, Study, TimingMethod
from sessions.documents.storage import load, save
from sessions.reports.probe_summary import (
    ESTIMATE_LABEL,
    FP8_VARIANT,
    FP16_VARIANT,
    QUANTIZE_ROLE,
    estimate_line,
    no_kernel_shapes,
    probe_text,
    role_rows,
)
from tests.conftest import run_cli
from tests.inspector.test_probe_engine_layers import stand_in_context


class SE(nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        self.fc1 = nn.Conv2d(channels, 32, 1)
        self.fc2 = nn.Conv2d(32, channels, 1)

    def forward(self, x):
        gate = torch.sigmoid(self.fc2(torch.relu(self.fc1(x.mean((2, 3), keepdim=True)))))
        return x * gate


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(16, 32, 1, bias=False)
        self.conv2 = nn.Conv2d(32, 32, 3, padding=1, groups=4, bias=False)
        self.conv3 = nn.Conv2d(32, 16, 1, bias=False)
        self.se = SE(16)
        nn.init.zeros_(self.conv3.weight)  # like timm's zero-initialised last BatchNorm: the SE sees zeros

    def forward(self, x):
        return x + self.se(self.conv3(torch.relu(self.conv2(self.conv1(x)))))


class Tiny(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 3, padding=1)
        self.blocks = nn.Sequential(Block(), Block())
        self.head = nn.Linear(16, 1000)  # 1000 outputs: no FP8 GEMM (not divisible by 16)

    def forward(self, x):
        return self.head(self.blocks(self.stem(x)).mean((2, 3)))


@pytest.fixture(autouse=True)
def no_nvtx_injection(monkeypatch):
    """run_probe points NVTX at CUPTI through the environment; keep that out of other tests."""
    monkeypatch.setenv("NVTX_INJECTION64_PATH", "unused-in-tests")


@pytest.fixture
def tiny():
    torch.manual_seed(0)
    return Tiny().eval(), torch.randn(2, 3, 8, 8), torch.randn(4, 3, 8, 8)


def test_collect_keeps_call_order_inputs_and_calibration_amax(tiny):
    model, x, calib = tiny
    amax = fp8_probe.calibration_amax(model, calib)
    layers = fp8_probe.collect(model, x, amax, [])
    names = [layer.name for layer in layers]
    assert names[:6] == ["stem", "blocks.0.conv1", "blocks.0.conv2", "blocks.0.conv3", "blocks.0.se.fc1",
                         "blocks.0.se.fc2"]
    assert names[-1] == "head" and len(names) == 12
    stem = layers[0]
    assert stem.spec.input_shape == (2, 3, 8, 8) and torch.equal(stem.x16, x)
    assert stem.x16.is_contiguous(memory_format=torch.channels_last)  # as the engine holds a convolution's input
    assert stem.amax == float(calib.abs().max())  # from the calibration images, not the probe batch
    fc1 = layers[4]
    assert fc1.spec.input_shape == (2, 16, 1, 1) and not fc1.x16.any() and fc1.amax == 0.0
    only_blocks = fp8_probe.collect(model, x, amax, ["blocks.1.*"])
    assert only_blocks[0].name == "blocks.1.conv1" and len(only_blocks) == 5


def test_calibration_runs_in_the_engines_chunks_and_keeps_an_overflow():
    """Max calibration over 20 images in chunks of 16 (as ModelOpt's forward loop runs them): every chunk counts; an
    Inf in one chunk's activations stays Inf, so the probe calibrates in fp32 as the engine falls back to."""
    torch.manual_seed(0)
    conv = nn.Conv2d(3, 4, 1)
    calib = torch.randn(20, 3, 4, 4)
    calib[18, 0, 0, 0] = 50.0  # in the second chunk only
    chunks: list[int] = []

    def count(_module: nn.Module, args: tuple) -> None:  # None: the inputs stay as they are
        chunks.append(len(args[0]))

    conv.register_forward_pre_hook(count)
    assert fp8_probe.calibration_amax(conv, calib)[""] == 50.0 and chunks == [16, 4]
    calib[2, 1, 1, 1] = float("inf")
    assert fp8_probe.calibration_amax(conv, calib)[""] == float("inf")


def test_calibration_falls_back_to_fp32_and_refuses_what_overflows_there_too():
    """An amax fp16 cannot hold is taken again in fp32, as the engine's calibration falls back; one fp32 cannot hold
    either is one error line, never a scale floored to saturate the tensor."""
    conv = nn.Conv2d(3, 4, 1)
    calib = torch.randn(4, 3, 4, 4)
    calib[1, 0, 0, 0] = 1e6  # beyond fp16 (65504), well within fp32
    fp32_built: list[str] = []

    def fp32() -> nn.Module:
        fp32_built.append("fp32")
        return conv.float()

    amax, calibrated_in = fp8_probe.engine_calibration(copy.deepcopy(conv).half(), fp32, calib)
    assert calibrated_in == "fp32" and amax[""] == 1e6 and fp32_built == ["fp32"]
    assert fp8_probe.engine_calibration(copy.deepcopy(conv).half(), fp32, calib.clamp(-10, 10))[1] == "fp16"
    calib[2, 1, 1, 1] = float("inf")
    with pytest.raises(InputError, match="even in fp32") as raised:
        fp8_probe.engine_calibration(copy.deepcopy(conv).half(), fp32, calib)
    assert "\n" not in str(raised.value)


@pytest.mark.parametrize("amax, weight", [(float("inf"), 1.0), (1.0, float("nan"))])
def test_a_layers_scales_refuse_an_amax_that_is_not_finite_in_one_line_naming_it(amax, weight):
    conv = nn.Conv2d(3, 4, 1)
    with torch.no_grad():
        conv.weight[2, 1] = weight
    layer = fp8_probe.CapturedLayer("blocks.0.conv", conv, spec_of(conv, torch.zeros(1, 3, 4, 4)), amax, None)
    with pytest.raises(InputError, match=r"^blocks\.0\.conv: .*not finite") as raised:
        fp8_probe.layer_scales(layer, amax, per_channel=True, fp8=True)
    assert "\n" not in str(raised.value)
    if weight == 1.0:  # a layer that runs no FP8 still needs its input scale
        with pytest.raises(InputError):
            fp8_probe.layer_scales(layer, amax, per_channel=True, fp8=False)
    else:  # nor weight scales where it runs no FP8
        assert fp8_probe.layer_scales(layer, amax, per_channel=True, fp8=False) == (1.0 / 448, None)


def test_equal_specs_are_grouped_once_with_their_count(tiny):
    model, x, _ = tiny
    groups = group_by_spec((layer.name, layer.spec) for layer in fp8_probe.collect(model, x, {}, []))
    assert len(groups) == 7  # stem, conv1, conv2, conv3, fc1, fc2, head
    counts = {spec.label(): names for spec, names in groups.items()}
    assert counts["conv 3x3 g4 32->32 @ 2x32x8x8"] == ["blocks.0.conv2", "blocks.1.conv2"]
    assert counts["linear 16->1000 @ 2x16"] == ["head"]
    spec = next(s for s in groups if s.groups == 4)
    assert spec.output_shape() == (2, 32, 8, 8) and spec.gemm_size() == (128, 8, 72) and not spec.pointwise


def test_quantize_saturates_instead_of_nan():
    x = torch.tensor([[[[1000.0, -1000.0], [0.5, 0.0]]]])
    q = quantize(x, torch.tensor(1.0), channels_last=True)
    assert q.dtype == torch.float8_e4m3fn
    assert q.float().flatten().tolist() == [E4M3_MAX, -E4M3_MAX, 0.5, 0.0]
    wide = quantize(torch.randn(2, 8, 3, 3), torch.tensor(4.0), channels_last=True)
    assert wide.is_contiguous(memory_format=torch.channels_last)


def test_the_scales_note_takes_the_format_and_floor_from_the_fp8_module(monkeypatch):
    """The note quotes `builders.fp8.format`'s e4m3 maximum and scale floor, whatever they are."""
    from builders.fp8 import format as fp8_format

    recipe = engine_layers.probe_recipe()
    assert "amax / 448 " in fp8_probe.scales_note(recipe, 4, "fp16") and "at least 2^-14;" in fp8_probe.scales_note(
        recipe, 4, "fp16")
    monkeypatch.setattr(fp8_format, "E4M3_MAX", 240.0)
    monkeypatch.setattr(fp8_format, "MIN_SCALE", 2.0**-10)
    note = fp8_probe.scales_note(recipe, 4, "fp16")
    assert note.count("amax / 240 ") == 2 and "at least 2^-10;" in note and "448" not in note


def test_relative_error():
    ref = torch.tensor([3.0, 4.0])
    assert fp8_probe.relative_error(ref, ref) == 0.0
    assert fp8_probe.relative_error(torch.tensor([3.0, 5.0]), ref) == pytest.approx(0.2)
    assert fp8_probe.relative_error(ref, torch.zeros(2)) is None


STEP_MS = {"fp16": 0.010, "fp8": 0.006, "quantize": 0.002, "amax": 0.003}


def _fake_measure(fns, plan, measured_as):
    for fn in fns.values():
        fn()  # every timed step must run
    samples = {name: [STEP_MS[name]] * 3 for name in fns}
    return ShapeTimes(measured_as, samples, {name: 4 for name in fns}, graphed=True)


BOUND: dict[int, tuple] = {}  # id of a module -> the scales the stand-in graph was bound with


def _stand_in_graph(_context, graph, module, x_scale, w_scale):
    """The engine's cuDNN graph on the CPU: the convolution of the operands the graph reads (FP8 ones dequantized
    with the scales the probe bound it with), fp16 out."""
    sig = graph.sig
    if sig.precision == "fp8":
        BOUND[id(module)] = (x_scale, w_scale)
    weight, bias = module.weight.float(), module.bias.float() if module.bias is not None else None

    def run(x: torch.Tensor, residual: torch.Tensor | None = None) -> torch.Tensor:
        w = weight
        if sig.precision == "fp8":
            scale = w_scale.float().reshape(-1, 1, 1, 1)
            w, x = quantize_weight(module.weight, scale).float() * scale, x.float() * x_scale
        y = F.conv2d(x.float(), w, bias, sig.stride, sig.padding, sig.dilation, sig.groups)
        for word in sig.epilogue:  # the graph's epilogue, as cuDNN's pointwise ops compute it
            y = y + residual.float() if word == "add" else {"relu": torch.relu, "sigmoid": torch.sigmoid}[word](y)
        return y.half()

    return run


def test_probe_layers_glue_with_a_stand_in_engine(tiny, monkeypatch):
    """What the GPU run does between collection and the session, with the CPU standing in for cuDNN's graphs: each
    layer runs the kernel the engine picks (the test's times), with its scales, or says why it has none."""
    monkeypatch.setattr(fp8_probe, "measure_shape", _fake_measure)
    monkeypatch.setattr(engine_layers, "bind_graph", _stand_in_graph)
    reserved: list[list] = []
    monkeypatch.setattr(engine_layers, "reserve_workspace", lambda _context, kernels: reserved.append(list(kernels)))
    model, x, calib = tiny
    model, x = model.half(), x.half()
    context = stand_in_context(model, x, {}, {("blocks.0.conv2", "fp8"): "cuDNN: no engine for 8 channels per group"},
                               {("blocks.0.conv1", CUBLASLT, "fp8"): 2.0})
    layers = fp8_probe.collect(model, x, fp8_probe.calibration_amax(model, calib.half()), [])
    layers = fp8_probe.with_engine_epilogues(model, x, layers, static_refusals(model, {layer.name for layer in layers}))
    lines: list[str] = []
    with torch.no_grad():
        probed, times, runs, implementation = fp8_probe.probe_layers(
            layers, None, context, static_refusals(model, {layer.name for layer in layers}), True, lines.append)
    assert implementation == "eager (test)" and len(lines) == 7 and lines[0].startswith("1/7 conv 3x3 3->16")
    assert len(reserved) == 1 and len(reserved[0]) == 14  # before any layer was bound: both precisions of 7 shapes
    by_name = {p.name: p for p in probed}
    conv1, stem = by_name["blocks.0.conv1"], by_name["stem"]
    assert conv1.fp8_path.startswith("torch._scaled_mm (cuBLASLt, 1x1 conv as a GEMM)") and 0 < conv1.rel_error < 0.1
    assert conv1.fp16_path == "cuDNN conv graph (fp16), plan plan-blocks.0.conv1"
    assert stem.fp8_path == "cuDNN conv graph (fp8), plan plan-stem" and 0 < stem.rel_error < 0.1
    x_scale, w_scale = BOUND[id(model.stem)]  # the engine's: max calibration, weights per output channel, / 448
    assert x_scale == float(calib.half().abs().max()) / E4M3_MAX
    assert torch.equal(w_scale, model.stem.weight.abs().amax(dim=(1, 2, 3)).float() / E4M3_MAX)
    conv2 = by_name["blocks.1.conv2"]
    assert conv2.fp8_path is None and conv2.refusals == ["cuDNN: no engine for 8 channels per group"]
    assert "divisible by 16" in by_name["head"].refusals[0] and by_name["head"].fp16_path == "PyTorch Linear (fp16)"
    assert by_name["blocks.0.se.fc1"].zero_input and by_name["blocks.0.se.fc1"].rel_error is None
    assert "random data" in times[by_name["blocks.0.se.fc1"].spec].note
    assert by_name["blocks.0.se.fc2"].spec.epilogue == ("sigmoid",) and by_name["blocks.1.conv2"].spec.epilogue == (
        "relu",)  # the engine's epilogues, timed with the layers
    assert 0 < by_name["blocks.1.se.fc2"].rel_error < 0.1  # against the fp16 layer with its sigmoid
    run = runs[1]  # blocks.0.conv1: quantize, then the FP8 GEMM on what it wrote
    assert [step.name for step in run.fp8] == [quantizer_name("blocks.0.conv1"), "blocks.0.conv1"]
    with torch.no_grad():
        for step in run.fp8 + run.fp16:
            step.write()
            step.run()


def _probed() -> tuple[list[ProbedLayer], dict]:
    conv = LayerSpec("conv", (1, 64, 8, 8), 64, (1, 1), (1, 1), (0, 0), (1, 1), 1)
    grouped = LayerSpec("conv", (1, 64, 8, 8), 64, (3, 3), (1, 1), (1, 1), (1, 1), 32)
    se = LayerSpec("conv", (1, 64, 1, 1), 16, (1, 1), (1, 1), (0, 0), (1, 1), 1, True)
    probed = [
        ProbedLayer("layer1.0.conv1", "Conv2d", conv, "torch._scaled_mm", rel_error=0.03),
        ProbedLayer("layer1.0.conv2", "Conv2d", grouped, None, ["cuDNN conv_fprop: no engine"]),
        ProbedLayer("layer1.0.se_module.fc1", "Conv2d", se, "torch._scaled_mm", rel_error=None, zero_input=True),
        ProbedLayer("layer1.1.conv1", "Conv2d", conv, "torch._scaled_mm", rel_error=0.04),
    ]
    times = {
        conv: ShapeTimes("layer1.0.conv1",
                         {"fp16": [0.010] * 3, "fp8": [0.006] * 3, "quantize": [0.003] * 3, "amax": [0.004] * 3},
                         {}, True),
        grouped: ShapeTimes("layer1.0.conv2", {"fp16": [0.050] * 3}, {}, True),
        se: ShapeTimes("layer1.0.se_module.fc1", {"fp16": [0.005] * 3, "fp8": [0.005] * 3, "quantize": [0.002] * 3},
                       {}, True),
    }
    return probed, times


def _records(names: list[tuple[str, int, int]]) -> TraceRecords:
    """One traced call: `count` kernels of `ns` nanoseconds each inside each named range, all on thread 1."""
    ranges, kernels, launches = [Range("trt-inspect/call/0", 1, 0, 10_000_000)], [], []
    t = 10
    for name, count, ns in names:
        ranges.append(Range(name, 1, t, t + 1000))
        for i in range(count):
            correlation = len(kernels) + 1
            launches.append(Launch(correlation, 1, t + 1 + i))
            kernels.append(KernelRecord(f"kernel_{name}", t + 100 + i * 10, t + 100 + i * 10 + ns, correlation))
        t += 2000
    return TraceRecords("cupti", "kernel", 1, kernels, launches, ranges)


# what each layer's kernels take in the traced call (ns a kernel), unlike the isolated timings of `_probed`
FP16_TRACED = {"layer1.0.conv1": 12_000, "layer1.0.conv2": 1_000, "layer1.0.se_module.fc1": 6_000,
               "layer1.1.conv1": 11_000}


def _session(tmp_path) -> Session:
    probed, times = _probed()
    fp16_trace = _records([(p.name, 64 if p.spec.groups == 32 else 1, FP16_TRACED[p.name]) for p in probed])
    fp8_trace = _records([(quantizer_name("layer1.0.conv1"), 1, 4_000), ("layer1.0.conv1", 1, 7_000),
                          ("layer1.0.conv2", 64, 1_000), (quantizer_name("layer1.0.se_module.fc1"), 1, 3_000),
                          ("layer1.0.se_module.fc1", 1, 6_000), (quantizer_name("layer1.1.conv1"), 1, 4_000),
                          ("layer1.1.conv1", 2, 3_000)])
    session = Session(
        study=Study("senet-like", "timm", [3, 224, 224], 1, ["trt-inspect", "probe", "senet-like"],
                    "2026-01-01T00:00:00+00:00", "probe", "cuda", "0.1.0"),
        environment=Environment("host", "linux", "cpu", 2, "3.12", {}),
        method=TimingMethod("cuda-events", "isolated layers", True, 0.05, 5, 20, True, False, True, "isolated",
                            "cupti"),
    )
    session.variants = [
        probe_variant(FP16_VARIANT, "fp16", fp16_layers(probed, times), fp16_trace, []),
        probe_variant(FP8_VARIANT, "fp8", fp8_layers(probed, times), fp8_trace, []),
    ]
    path = tmp_path / "probe.json"
    save(session, path)
    return load(path)


def test_session_from_measured_records(tmp_path):
    session = _session(tmp_path)
    fp16, fp8 = session.variant(FP16_VARIANT), session.variant(FP8_VARIANT)
    assert [layer.name for layer in fp16.layers] == ["layer1.0.conv1", "layer1.0.conv2", "layer1.0.se_module.fc1",
                                                     "layer1.1.conv1"]
    # times are the layers' traced kernel times per call; the isolated timings of their shapes (shared by equal
    # shapes) are kept beside them
    assert [layer.time_ms for layer in fp16.layers] == pytest.approx([0.012, 0.064, 0.006, 0.011])
    assert [layer.attrs[ISOLATED]["ms"] for layer in fp16.layers] == pytest.approx([0.010, 0.050, 0.005, 0.010])
    isolated = fp16.layers[3].attrs[ISOLATED]
    assert isolated["same_shape_layers"] == 2 and isolated["measured_as"] == "layer1.0.conv1"
    grouped16 = fp16.layers[1]
    assert (grouped16.op, grouped16.groups, grouped16.kernel_shape, grouped16.in_channels,
            grouped16.out_channels) == ("conv", 32, [3, 3], 64, 64)
    assert (grouped16.inputs[0].shape == [1, 64, 8, 8] and grouped16.inputs[0].dtype == "fp16"
            and not grouped16.quantized)
    names8 = [layer.name for layer in fp8.layers]
    assert names8[:3] == [quantizer_name("layer1.0.conv1"), "layer1.0.conv1", "layer1.0.conv2"]
    conv2 = fp8.layers[2]
    assert (conv2.precision == "fp16" and conv2.time_ms == pytest.approx(0.064)
            and "no engine" in conv2.attrs["no_fp8_kernel"])
    quantizer, conv1 = fp8.layers[0], fp8.layers[1]
    assert (conv1.precision == "fp8" and conv1.quantized and conv1.inputs[0].dtype == "fp8"
            and conv1.inputs[0].format == "NHWC")
    assert quantizer.op == "quantize" and quantizer.outputs[0].dtype == "fp8"
    assert (quantizer.kind == "Quantize" and quantizer.time_ms == pytest.approx(0.004)
            and quantizer.attrs[ISOLATED]["dynamic_amax_ms"] == pytest.approx(0.004)
            and quantizer.attrs[ISOLATED]["ms"] == pytest.approx(0.003))
    rules = load_rules()
    assert role_of(quantizer, rules) == QUANTIZE_ROLE
    assert fp8.trace.records == 71 and fp8.trace.unattributed == 0


def test_role_rows_and_estimate_wording(tmp_path):
    session = _session(tmp_path)
    rules = load_rules()
    rows = {r.role: r for r in role_rows(session, rules)}
    pointwise = rows["pointwise (1x1) convolution"]
    assert (pointwise.layers == 2 and pointwise.fp16_ms == pytest.approx(0.023)
            and pointwise.fp8_ms == pytest.approx(0.013))
    assert (pointwise.quantize_ms == pytest.approx(0.008) and pointwise.fp8_kernels == 3
            and pointwise.quantize_kernels == 2)
    grouped = rows["grouped convolution"]
    assert grouped.no_fp8 == 1 and grouped.fp16_kernels == 64 and grouped.fp8_ms == pytest.approx(0.064)
    assert rows["squeeze-excitation"].quantize_ms == pytest.approx(0.003)
    line = estimate_line(session, rules)
    assert ESTIMATE_LABEL in line and ESTIMATE_LABEL == "estimate from layers run alone, not an engine time"
    assert "fp16 0.093 ms" in line and "FP8 0.094 ms = 0.083 ms layers + 0.011 ms quantize" in line
    assert "(1 layers kept fp16: no FP8 kernel)" in line and "x0.99" in line
    assert no_kernel_shapes(session) == [("conv 3x3 g32 64->64 @ 1x64x8x8", 1, "cuDNN conv_fprop: no engine")]
    assert "no FP8 kernel:" in probe_text(session, rules)


def test_views_read_a_probe_session(tmp_path):
    _session(tmp_path)
    path = str(tmp_path / "probe.json")
    for command in (["show", path], ["groups", path], ["groups", path, "--by", "kernel"], ["export", path]):
        result = run_cli(*command)
        assert result.returncode == 0, (command, result.stderr)
    assert "quantize / dequantize" in run_cli("groups", path).stdout


def test_no_gpu_is_exit_3(capsys, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert main(["probe", "resnet18"]) == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "needs a CUDA GPU" in err[0]


def test_old_gpu_is_exit_3(capsys, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: (8, 0))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "NVIDIA A100")
    assert main(["probe", "resnet18"]) == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "8.9" in err[0] and "NVIDIA A100 has 8.0" in err[0]


def test_missing_cudnn_frontend_is_exit_3(capsys, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: (9, 0))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "NVIDIA H200")
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setitem(sys.modules, "cudnn", None)  # import cudnn raises ImportError
    monkeypatch.setenv("LD_LIBRARY_PATH", "")
    assert main(["probe", "resnet18"]) == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "pip install nvidia-cudnn-frontend" in err[0]


def test_environment_problem_wording():
    assert capability_problem((9, 0), "NVIDIA H200") is None
    assert capability_problem((8, 9), "NVIDIA L4") is None
    assert ("8.9" in capability_problem((8, 6), "NVIDIA A10")
            and "NVIDIA A10 has 8.6" in capability_problem((8, 6), "NVIDIA A10"))
    assert "unknown" in capability_problem(None, "NVIDIA A10")


def test_quantizer_without_a_gpu_is_the_eager_one():
    quantizer = fp8_quantizer.make_quantizer()
    assert quantizer.run is quantize and quantizer.implementation.startswith(fp8_quantizer.EAGER_QUANTIZE)


def test_probe_json_document(tmp_path):
    from sessions.reports.probe_summary import probe_document

    document = probe_document(_session(tmp_path), load_rules(), "probe.json")
    roles = {r["role"]: r for r in document["roles"]}
    assert document["label"] == ESTIMATE_LABEL and roles["grouped convolution"]["no_fp8"] == 1
    assert roles["pointwise (1x1) convolution"]["speedup"] == pytest.approx(0.023 / (0.013 + 0.008))


def test_calls_per_replay_fill_about_the_target():
    assert fp8_probe._calls_per_replay(0.001) == fp8_probe.MAX_CALLS_PER_REPLAY
    assert fp8_probe._calls_per_replay(0.05) == 4
    assert fp8_probe._calls_per_replay(1.0) == 1


def test_long_library_messages_keep_their_reason():
    message = "no engine proposed a plan\n" + "x" * 1000 + "\nReason: FORT_NATIVE kernels need 16 channels per group"
    text = joined_message(RuntimeError(message))
    assert len(text) <= 400 and text.startswith("no engine proposed a plan") and text.endswith("16 channels per group")
    assert "\n" not in text and joined_message(RuntimeError("")) == "RuntimeError"


@pytest.mark.parametrize("name", ["senet154-probe-b1", "senet154-probe-b32", "segformer-b0-probe-b1",
                                  "segformer-b0-probe-b32"])
def test_h200_probe_sessions_read_back(name):
    """The sessions `benchmarks/h200_probe.sh` wrote on the H200 (schema 1, migrated on load)."""
    from tests.conftest import H200

    session = load(H200 / f"{name}.json")
    rules = load_rules()
    rows = {r.role: r for r in role_rows(session, rules)}
    fp8 = session.variant(FP8_VARIANT)
    assert fp8.trace.unattributed == 0 and fp8.trace.dropped == 0
    line = estimate_line(session, rules)
    assert ESTIMATE_LABEL in line and fp8.notes[-1].split(": ", 1)[1] == line.split(": ", 1)[1]  # the figures kept
    if name.startswith("senet154"):
        assert rows["grouped convolution"].no_fp8 == 3  # layer1's 2 channels per group: no cuDNN FP8 engine
        assert rows["pointwise (1x1) convolution"].fp8_kernels == rows["pointwise (1x1) convolution"].layers
    else:
        assert rows["depthwise convolution"].no_fp8 == rows["depthwise convolution"].layers == 8


async def test_tui_drills_into_a_probe_session():
    from inspector.tui.app import InspectorApp
    from inspector.tui.screens.overview import OverviewScreen
    from inspector.tui.screens.tables import GroupsScreen, KernelsScreen, LayersScreen
    from tests.conftest import H200

    path = H200 / "senet154-probe-b1.json"
    app = InspectorApp(session=load(path), path=path)
    async with app.run_test(size=(120, 36)) as pilot:
        assert isinstance(app.screen, OverviewScreen)
        await pilot.press("g")
        assert isinstance(app.screen, GroupsScreen)
        await pilot.press("enter")
        assert isinstance(app.screen, LayersScreen) and app.screen.panel.table.row_count > 0
        await pilot.press("enter")
        assert isinstance(app.screen, KernelsScreen)


def test_each_shape_is_timed_after_its_graphs_are_made_and_the_gpu_state_settled(monkeypatch):
    """The probe's layers are timed in the state the engine's rows are (profilers.gpu_contexts): the device's settle
    runs after the shape's steps are captured and before they are timed, and the shape keeps what it said."""
    from profilers import timing
    from profilers.device import StudyDevice
    from sessions.documents.plan import TimingPlan

    events: list[str] = []

    def timed(fn):
        events.append("capture")
        return fp8_probe.TimedStep(fn, 1, True)

    monkeypatch.setattr(fp8_probe, "timed_step", timed)
    monkeypatch.setattr(StudyDevice, "settle", lambda self: events.append("settle") or "settled words")
    monkeypatch.setattr(timing, "measure", lambda steps, *a, **k: events.append("measure") or {n: [1.0] for n in steps})
    monkeypatch.setattr(timing, "clock_for", lambda device: None)
    times = fp8_probe.measure_shape({"fp16": lambda: None, "fp8": lambda: None}, TimingPlan(0.0, 1, 1), "layer")
    assert events == ["capture", "capture", "settle", "measure"] and times.gpu_state == "settled words"


def test_the_probe_session_states_a_shape_not_settled_over_those_that_were():
    from inspector.probe.probe_session import ShapeTimes
    from sessions.documents.vocab import GPU_STATE_NOT_SETTLED, GPU_STATE_SETTLED

    def shape(state):
        return ShapeTimes("layer", {}, {}, True, gpu_state=state)

    failed = f"{GPU_STATE_NOT_SETTLED}the helper process failed (exit 7)"
    assert fp8_probe.probe_gpu_state([shape(GPU_STATE_SETTLED), shape(failed), shape(GPU_STATE_SETTLED)]) == failed
    assert fp8_probe.probe_gpu_state([shape(GPU_STATE_SETTLED)] * 2) == GPU_STATE_SETTLED
    assert fp8_probe.probe_gpu_state([shape(None)]) is None


def test_untraced_layers_keep_their_isolated_times_and_the_variant_says_so():
    probed, times = _probed()
    variant = probe_variant(FP16_VARIANT, "fp16", fp16_layers(probed, times), None, [])
    assert [layer.time_ms for layer in variant.layers] == pytest.approx([0.010, 0.050, 0.005, 0.010])
    assert UNTRACED_NOTE in variant.notes


def test_a_layer_the_trace_attributed_no_kernel_to_keeps_its_isolated_time_and_the_variant_says_so():
    probed, times = _probed()
    traced = _records([(p.name, 1, FP16_TRACED[p.name]) for p in probed if p.name != "layer1.0.conv2"])
    variant = probe_variant(FP16_VARIANT, "fp16", fp16_layers(probed, times), traced, [])
    assert [layer.time_ms for layer in variant.layers] == pytest.approx([0.012, 0.050, 0.006, 0.011])
    assert UNATTRIBUTED_NOTE.format(count=1) in variant.notes


def test_the_probe_traces_as_many_calls_as_a_study_traces_a_variant(monkeypatch):
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)  # no GPU here: the layers are stand-ins
    calls: list[int] = []

    class Counting:
        range_kind = "annotation"

        def trace(self, run_once, count, device, synchronize):
            calls.append(count)
            for _ in range(count):
                run_once()
            return _records([])

    from inspector.cli import build_parser

    study_calls = build_parser().parse_args(["run", "resnet18"]).trace_calls  # what `run` traces by default
    ran: list[str] = []

    @contextlib.contextmanager
    def named_range(_kind, name):
        ran.append(f"enter {name}")
        yield
        ran.append(f"exit {name}")

    monkeypatch.setattr(module_ranges, "named_range", named_range)
    fp8_probe._trace([fp8_probe.TracedStep("a", lambda: ran.append("a"), lambda: ran.append("write a")),
                      fp8_probe.TracedStep("b", lambda: ran.append("b"))], Counting())
    one_call = ["write a", "enter a", "a", "exit a", "enter b", "b", "exit b"]  # inputs written outside the range
    assert calls == [study_calls] and ran == one_call * (1 + study_calls)  # one untraced call first


def test_each_traced_layer_reads_its_stored_inputs_written_just_before_it_into_shared_buffers():
    inputs = fp8_probe.WrittenInputs()
    read: list[torch.Tensor] = []
    first, second = torch.randn(2, 4, 3, 3), torch.randn(2, 4, 3, 3)
    residual = torch.randn(2, 4, 3, 3).contiguous(memory_format=torch.channels_last)
    one = inputs.step("one", lambda x: read.append(x.clone()), (first,))
    two = inputs.step("two", lambda x, r: read.extend([x.clone(), r.clone()]), (second, residual))
    for step in (one, two):
        step.write()
        step.run()
    assert [torch.equal(a, b) for a, b in zip(read, [first, second, residual], strict=True)] == [True] * 3
    assert inputs.buffer(first) is inputs.buffer(second)  # one buffer per shape, layout and dtype
    assert inputs.buffer(residual, 1) is not inputs.buffer(first) and inputs.buffer(first) is not first
    assert inputs.buffer(residual, 1).is_contiguous(memory_format=torch.channels_last)
    assert inputs.buffer(first, 1) is not inputs.buffer(first)  # a layer's input and residual: never one buffer
    first.fill_(7.0)
    one.run()  # not written again: the layer reads its buffer, never the stored tensor
    assert not torch.equal(read[-1], first)


def test_a_layer_whose_epilogue_adds_runs_on_its_input_and_residual_in_both_precisions():
    x16, residual = torch.randn(1, 4, 2, 2), torch.randn(1, 4, 2, 2)
    layer = fp8_probe.CapturedLayer("conv", None, LayerSpec("conv", (1, 4, 2, 2), 4, epilogue=("add",)), 1.0, x16,
                                    residual)
    got: dict[str, tuple] = {}
    fp16 = engine_layers.Bound(lambda *args: got.setdefault("fp16", tuple(a.clone() for a in args)), "fp16 kernel")
    fp8 = engine_layers.Bound(lambda *args: got.setdefault("fp8", tuple(a.clone() for a in args)), "fp8 kernel")
    quantizer = fp8_quantizer.Quantizer(lambda x, inverse, _channels_last: x * inverse, "scaled (test)")
    inputs = fp8_probe.WrittenInputs()
    steps = fp8_probe._fp16_run(layer, fp16, inputs) + fp8_probe._fp8_run(layer, torch.tensor(2.0), fp8, quantizer,
                                                                          True, inputs)
    assert [step.name for step in steps] == ["conv", quantizer_name("conv"), "conv"]
    for step in steps:
        step.write()
        step.run()
    assert [torch.equal(a, b) for a, b in zip(got["fp16"], (x16, residual), strict=True)] == [True, True]
    assert [torch.equal(a, b) for a, b in zip(got["fp8"], (x16 * 2, residual), strict=True)] == [True, True]
    residual_buffer = steps[2].run.args[0]  # the FP8 layer's residual: never the buffer its quantize read
    assert residual_buffer is inputs.buffer(residual, 1) and residual_buffer is not inputs.buffer(x16, 0)


def test_the_probes_method_names_its_rounds_alternating_order():
    """The probe times through `profilers.timing.measure`, whose rounds alternate their order: its method says so."""
    from profilers.tracers import NoTracer
    from sessions.documents.plan import TimingPlan

    empty = TraceRecords("none", "kernel", 1, [], [], [])
    method = fp8_probe.probe_method(TimingPlan(0.05, 5, 20), True, "torch.compile",
                                    fp8_probe.Traces(empty, empty, NoTracer()))
    assert "5 rounds in alternating order (A B C, then C B A) of 20 replays" in method.timed_region
