"""The FP8 probe times the engine's own kernels with the engine's scales, checked on the CPU: each convolution's
signature against the engine's lowering of the same model, what the probe asks for per layer and precision, its
scales against the engine's ModelOpt calibration, and the engine's choice of library (its graph's plan or another
library's tactic) and its refusals, with a stand-in engine whose times and refusals the test sets."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from torch import nn

from builders.engine import build
from builders.engine.build import BuildContext, static_refusals
from builders.engine.compiler import PlanCompiler
from builders.engine.conv_tactics import companions, offered
from builders.engine.graph import record_run, trace
from builders.engine.kernels import ConvGraph, ConvSignature
from builders.engine.lowering import lower
from builders.engine.plans import Choice
from builders.engine.tactics import CUBLASLT, CUDNN, CUDNN_MATMUL, CUDNN_SCALED, PYTORCH, PYTORCH_NCHW
from builders.fp8.format import calibrated_scale
from builders.fp8.quantizer import Quantizer, quantize
from inspector.probe import engine_layers, fp8_probe
from inspector.probe.engine_layers import CONV, GEMM, TORCH, Kernel, ask, choose, signature
from sessions.documents.options import FP8_LAYERS_KEPT


class Shapes(nn.Module):
    """Convolutions of every kind the engine lowers (strided, dilated and grouped, depthwise, 1x1, one it refuses),
    each followed by what the engine fuses into its graph, and two linears (one without an FP8 GEMM)."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 3, stride=2, padding=1)
        self.grouped = nn.Conv2d(16, 32, 3, padding=2, dilation=2, groups=4, bias=False)
        self.depthwise = nn.Conv2d(32, 32, 5, padding=2, groups=32)
        self.pointwise = nn.Conv2d(32, 48, 1)
        self.reflect = nn.Conv2d(48, 48, 3, padding=1, padding_mode="reflect")
        self.fc = nn.Linear(48, 64)
        self.head = nn.Linear(64, 1000)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.stem(x))
        x = torch.relu(self.depthwise(self.grouped(x)))
        x = self.reflect(torch.relu(self.pointwise(x)))
        return self.head(torch.relu(self.fc(x.mean((2, 3)))))


def conv_inputs(model: nn.Module, x: torch.Tensor) -> dict[str, tuple[int, ...]]:
    """Each convolution's input shape, recorded by hooks of the test's own."""
    shapes: dict[str, tuple[int, ...]] = {}

    def record(path: str):
        def hook(_module: nn.Module, args: tuple) -> None:  # None: the inputs stay as they are
            shapes.setdefault(path, tuple(args[0].shape))

        return hook

    hooks = [m.register_forward_pre_hook(record(p)) for p, m in model.named_modules() if isinstance(m, nn.Conv2d)]
    with torch.no_grad():
        model(x)
    for hook in hooks:
        hook.remove()
    return shapes


def engine_signatures(model: nn.Module, x: torch.Tensor, precision: str) -> dict[str, ConvSignature]:
    """The signatures the engine's own lowering gives the model's convolutions, every layer asked for in `precision`."""
    paths = {p for p, m in model.named_modules() if isinstance(m, (nn.Conv2d, nn.Linear))}
    fp8 = paths if precision == "fp8" else set()
    program = lower(trace(model, x).nodes, fp8, {}, static_refusals(model, fp8))
    return build._conv_signatures(program, model, conv_inputs(model, x), False)


def probe_specs(model: nn.Module, x: torch.Tensor) -> dict:
    """Each convolution's and linear's spec, as the probe collects them, with the engine's epilogues."""
    return {layer.name: layer.spec for layer in probe_layers(model, x)}


def probe_layers(model: nn.Module, x: torch.Tensor) -> list:
    """The layers as the probe collects them, with the engine's epilogues and residuals."""
    captured = fp8_probe.collect(model, x, {}, [])
    return fp8_probe.with_engine_epilogues(model, x, captured, static_refusals(model, {c.name for c in captured}))


@pytest.mark.parametrize("precision", ["fp16", "fp8"])
def test_each_convolution_is_the_engines_graph_of_that_layer_with_its_epilogue(precision):
    torch.manual_seed(0)
    model, x = Shapes().eval(), torch.randn(2, 3, 16, 16)
    expected = engine_signatures(model, x, precision)
    assert set(expected) == {"stem", "grouped", "depthwise", "pointwise"}  # the reflect-padded one is PyTorch's
    assert expected["stem"].epilogue == ("relu",) and expected["grouped"].epilogue == ()
    specs = probe_specs(model, x)
    for name, sig in expected.items():  # what the engine fuses, the probe times; its output stays fp16
        assert signature(specs[name], precision, False) == dataclasses.replace(sig, output_fp8=False), name


class Residual(nn.Module):
    """A block whose second convolution's graph adds the block's input and applies a ReLU, and a convolution whose
    output has two readers (nothing fuses into it)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(8, 8, 3, padding=1)
        self.conv2 = nn.Conv2d(8, 8, 1)
        self.conv3 = nn.Conv2d(8, 8, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.conv2(torch.relu(self.conv1(x))) + x)
        z = self.conv3(y)
        return z * torch.sigmoid(z)


def test_a_convolution_that_adds_a_residual_is_timed_with_that_residual():
    torch.manual_seed(0)
    model, x = Residual().eval(), torch.randn(2, 8, 6, 6)
    layers = {layer.name: layer for layer in probe_layers(model, x)}
    engine = engine_signatures(model, x, "fp8")
    assert {name: layer.spec.epilogue for name, layer in layers.items()} == {
        name: sig.epilogue for name, sig in engine.items()} == {"conv1": ("relu",), "conv2": ("add", "relu"),
                                                                "conv3": ()}
    conv2 = layers["conv2"]
    assert torch.equal(conv2.residual, x) and conv2.residual.is_contiguous(memory_format=torch.channels_last)
    assert conv2.epilogue_args() == (conv2.residual,)
    assert layers["conv1"].residual is None and layers["conv1"].epilogue_args() == ()
    assert conv2.spec.label().endswith(" +add +relu")  # layers fused differently are timed apart


def test_what_the_probe_asks_the_engine_for_per_layer():
    torch.manual_seed(0)
    model, x = Shapes().eval(), torch.randn(2, 3, 16, 16)
    specs = probe_specs(model, x)
    refused = static_refusals(model, set(specs))
    asked = {(name, p): ask(spec, p, refused, name, False) for name, spec in specs.items() for p in ("fp16", "fp8")}
    pointwise = ConvSignature("fp8", (2, 32, 8, 8), 48, (1, 1), (1, 1), (0, 0), (1, 1), 1, ("relu",), False)
    assert asked["pointwise", "fp8"] == Kernel("fp8", CONV, pointwise)
    assert asked["pointwise", "fp16"] == Kernel("fp16", CONV, dataclasses.replace(pointwise, precision="fp16"))
    cold = ask(specs["pointwise"], "fp8", refused, "pointwise", True)  # timed on cold weights, as the engine's context
    assert cold == Kernel("fp8", CONV, dataclasses.replace(pointwise, cold_weights=True))
    reflect16, reflect8 = asked["reflect", "fp16"], asked["reflect", "fp8"]
    assert reflect16.kind == TORCH and "reflect" in str(reflect16.refusal)  # PyTorch's op, as the engine runs it
    assert reflect8.signature is None and "reflect" in str(reflect8.refusal)  # no FP8 kernel
    assert asked["fc", "fp16"] == Kernel("fp16", TORCH) and asked["fc", "fp8"] == Kernel("fp8", GEMM)
    head = asked["head", "fp8"]
    assert head.kind == GEMM and "divisible by 16" in str(head.refusal) and asked["head", "fp16"] == Kernel("fp16",
                                                                                                           TORCH)


def test_the_scale_rule_floors_what_calibration_cannot_scale():
    assert calibrated_scale(448.0) == 1.0 and calibrated_scale(896.0) == 2.0
    for degenerate in (0.0, -1.0, 1e-9):
        assert calibrated_scale(degenerate) == 2.0**-14
    scales = calibrated_scale(torch.tensor([896.0, 0.0, -1.0, 1e-9, 0.02734375]))
    assert scales.tolist() == [2.0, 2.0**-14, 2.0**-14, 2.0**-14, 2.0**-14]


@pytest.mark.parametrize("amax", [float("inf"), float("nan"), torch.tensor([896.0, float("inf")]),
                                  torch.tensor([float("nan"), 1.0])])
def test_the_scale_rule_refuses_an_amax_that_is_not_finite(amax):
    """A floored scale would saturate the whole tensor: no scale is given, in one line."""
    with pytest.raises(ValueError, match="not finite") as raised:
        calibrated_scale(amax)
    assert "\n" not in str(raised.value)


class Folded(nn.Module):
    """BatchNorm the recipe folds, a weight channel of zeros and a convolution that only ever sees zeros: the two
    scales the rule floors."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 3, padding=1)
        self.bn = nn.BatchNorm2d(16)
        self.conv = nn.Conv2d(16, 32, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(32)
        self.idle = nn.Conv2d(32, 32, 1)
        self.pointwise = nn.Conv2d(32, 16, 1)
        self.head = nn.Linear(16, 10)
        with torch.no_grad():
            for bn in (self.bn, self.bn2):
                bn.running_mean.uniform_(-1, 1)
                bn.running_var.uniform_(0.5, 2)
                bn.weight.uniform_(0.5, 2)
                bn.bias.uniform_(-1, 1)
            self.conv.weight[3].zero_()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.bn2(self.conv(torch.relu(self.bn(self.stem(x))))))
        x = x + self.idle(-torch.relu(x) * 0)  # the engine's calibration sees only zeros here
        return self.head(self.pointwise(x).mean((2, 3)))


@pytest.mark.slow  # ModelOpt calibrates on the CPU
def test_the_scales_are_those_of_the_engines_calibration():
    """The engine's scales come from ModelOpt's max calibration of its recipe (the twin); the probe applies the same
    rule to the same images on the model as the engine builds it, and gets the same numbers."""
    from builders.engine.twin import Twin
    from builders.models.structure import model_structure
    from builders.pytorch.variant_modules import variant_module
    from sessions.documents.plan import VariantPlan

    torch.manual_seed(0)
    model, calibration = Folded().eval(), torch.randn(20, 3, 12, 12)  # 20 images: two calibration chunks
    recipe = engine_layers.probe_recipe()
    twin = Twin.of("key", variant_module(model, VariantPlan("fp8", recipe.name, ()), calibration, torch.float16))
    assert {"conv", "idle", "pointwise"} <= set(twin.scales)
    plain = engine_layers.plain_model(model, model_structure(model, calibration[:1]).conv_bn, torch.float16)
    amax = fp8_probe.calibration_amax(plain, calibration.half())
    for name, (x_scale, w_scale) in twin.scales.items():
        assert calibrated_scale(amax[name]) == x_scale, name
        probe_w = engine_layers.weight_scales(plain.get_submodule(name).weight, recipe.weights == "per-channel")
        assert torch.equal(probe_w, w_scale), name
    assert twin.scales["idle"][0] == 2.0**-14 and twin.scales["conv"][1][3] == 2.0**-14  # the floors were met


@pytest.mark.slow  # ModelOpt calibrates on the CPU
def test_the_scales_of_weight_standardized_convolutions_are_of_the_weight_the_engine_runs():
    """A convolution that standardizes its weight at every call, then a BatchNorm: the probe's model is the engine's
    (made plain, then the BatchNorm folded into the weight it computes), so its weight scales are the twin's and it
    computes the model."""
    std_conv = pytest.importorskip("timm.layers.std_conv")
    from builders.engine.twin import Twin
    from builders.models.structure import model_structure
    from builders.pytorch.variant_modules import variant_module
    from sessions.documents.plan import VariantPlan

    torch.manual_seed(0)
    model = nn.Sequential(std_conv.StdConv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
                          std_conv.StdConv2d(16, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
                          std_conv.StdConv2d(16, 16, 1)).eval()
    with torch.no_grad():
        for norm in (model[1], model[4]):
            norm.weight.uniform_(0.5, 2.0)
            norm.running_var.uniform_(0.5, 2.0)
    calibration = torch.randn(20, 3, 12, 12)
    recipe = engine_layers.probe_recipe()
    twin = Twin.of("key", variant_module(model, VariantPlan("fp8", recipe.name, ()), calibration, torch.float16))
    plain = engine_layers.plain_model(model, model_structure(model, calibration[:1]).conv_bn, torch.float32)
    assert twin.scales and set(twin.scales) <= {"3", "6"}
    for name, (_, w_scale) in twin.scales.items():
        probe_w = engine_layers.weight_scales(plain.get_submodule(name).weight.half(), recipe.weights == "per-channel")
        assert torch.equal(probe_w, w_scale), name
    with torch.no_grad():
        expected = model(calibration)
        error = (plain(calibration) - expected).abs().max() / expected.abs().max()
    assert error < 1e-4


def stand_in_context(model: nn.Module, x: torch.Tensor, graph_us: dict, refusals: dict, library_us: dict,
                     plan_limit: int = 4, scaled_us: dict | None = None,
                     matmul_us: dict | None = None) -> BuildContext:
    """A BuildContext whose graphs (every convolution's, alone, in both precisions, and the scaled companions the
    engine builds) and other libraries' tactics stand in with the test's times: `graph_us[(layer, precision)]` (10 us
    where not given), `refusals[(layer, precision)]` (cuDNN's reason it has no graph), `library_us[(layer, library,
    precision)]` (a tactic not given did not run), `scaled_us[layer]` (a scaled graph not given was not built),
    `matmul_us[(layer, precision)]` (likewise the matmul graph)."""
    graphs: dict = {}
    times: dict = {}
    for name, spec in probe_specs(model, x).items():
        for precision in ("fp16", "fp8") if spec.op == "conv" else ():
            sig = signature(spec, precision, False)
            if sig in graphs:  # a layer of a spec seen before: the first one's times stand
                continue
            reason = refusals.get((name, precision))
            graphs[sig] = reason or ConvGraph(sig, None, None, None, Choice(
                0, f"plan-{name}", 1, 1, graph_us.get((name, precision), 10.0), False, []), None)
            for library in offered(sig, plan_limit):
                times[sig, library] = library_us.get((name, library, precision), "not timed here")
            held = {CUDNN_SCALED: ((scaled_us or {}).get(name), "scaled"),
                    CUDNN_MATMUL: ((matmul_us or {}).get((name, precision)), "matmul")}
            for library, companion in companions(sig, plan_limit).items():
                time_us, word = held[library]
                graphs[companion] = "not built here" if time_us is None else ConvGraph(
                    companion, None, None, None, Choice(0, f"{word}-plan-{name}", 1, 1, time_us, False, []), None)
    eager = Quantizer(quantize, "eager (test)")
    return BuildContext(None, None, x, plan_limit, None, PlanCompiler(0),  # type: ignore[arg-type]
                        lambda: eager, FP8_LAYERS_KEPT, graphs, library_us=times)


def test_each_layer_runs_the_library_the_engine_would_pick():
    torch.manual_seed(0)
    model, x = Shapes().eval(), torch.randn(2, 3, 16, 16)
    context = stand_in_context(
        model, x, {("pointwise", "fp8"): 9.0, ("depthwise", "fp16"): 7.0},
        {("grouped", "fp8"): "cuDNN: no engine for 4 channels per group"},
        {("pointwise", CUBLASLT, "fp8"): 4.0, ("pointwise", CUBLASLT, "fp16"): 12.0,
         ("depthwise", PYTORCH, "fp16"): 8.0, ("depthwise", PYTORCH_NCHW, "fp16"): 3.0})
    specs = probe_specs(model, x)
    refused = static_refusals(model, set(specs))
    chosen = {(n, p): choose(context, ask(s, p, refused, n, False)) for n, s in specs.items() for p in ("fp16", "fp8")}
    assert chosen["pointwise", "fp8"].library == CUBLASLT  # 4 us against its graph's 9
    assert chosen["pointwise", "fp16"].library == CUDNN  # 10 us against the GEMM's 12
    assert chosen["depthwise", "fp16"].library == PYTORCH_NCHW  # 3 us against 7 and 8
    assert chosen["depthwise", "fp8"].library == CUDNN  # PyTorch has no FP8 convolution
    grouped = chosen["grouped", "fp8"]
    assert grouped.refusal == "cuDNN: no engine for 4 channels per group" and grouped.library is None
    assert chosen["grouped", "fp16"].library == CUDNN and chosen["stem", "fp8"].library == CUDNN
    assert chosen["reflect", "fp16"].kind == TORCH and chosen["fc", "fp8"] == Kernel("fp8", GEMM)


@pytest.mark.parametrize("layer, precision, built, library, words", [
    ("grouped", "fp16", {"scaled_us": {"grouped": 4.0}}, CUDNN_SCALED,
     "cuDNN conv graph (fp16, scaled by ones), plan scaled-plan-grouped"),
    ("pointwise", "fp8", {"matmul_us": {("pointwise", "fp8"): 4.0}}, CUDNN_MATMUL,
     "cuDNN matmul graph (fp8), plan matmul-plan-pointwise"),
])
def test_a_layer_runs_the_engines_companion_graph_where_it_is_fastest(monkeypatch, layer, precision, built, library,
                                                                      words):
    """The engine's fp16 grouped convolution on its graph scaled by ones, its FP8 1x1 convolution on its matmul graph
    (4 us against 10): the probe picks each as the engine does, binds that graph, not the plain one, and names it;
    where the companion was not built, the plain graph's plan runs."""
    model, x = Shapes().eval(), torch.randn(2, 3, 16, 16)
    context = stand_in_context(model, x, {}, {}, {}, **built)
    specs = probe_specs(model, x)
    refused = static_refusals(model, set(specs))
    kernel = choose(context, ask(specs[layer], precision, refused, layer, False))
    assert kernel.library == library
    bound: list[ConvGraph] = []
    monkeypatch.setattr(engine_layers, "bind_graph", lambda _c, graph, *_a: bound.append(graph) or (lambda t: t))
    scales = (0.5, torch.ones(1)) if precision == "fp8" else (None, None)
    path = engine_layers.bind(context, kernel, model.get_submodule(layer), *scales).path
    assert bound[0].sig.key() != kernel.signature.key() and path == words
    plain = stand_in_context(model, x, {}, {}, {})
    assert choose(plain, ask(specs[layer], precision, refused, layer, False)).library == CUDNN


def test_a_graph_cudnn_refuses_in_fp16_leaves_the_layer_to_pytorch():
    torch.manual_seed(0)
    model, x = Shapes().eval(), torch.randn(2, 3, 16, 16)
    context = stand_in_context(model, x, {}, {("stem", "fp16"): "cuDNN: no engine"}, {})
    stem = choose(context, ask(probe_specs(model, x)["stem"], "fp16", {}, "stem", False))
    assert stem == Kernel("fp16", TORCH, refusal="cuDNN: no engine")
    bound = engine_layers.bind(context, stem, model.stem, None, None)
    assert bound is not None and bound.path == "PyTorch Conv2d (fp16): cuDNN: no engine"
    with torch.no_grad():
        assert torch.equal(bound.run(x), model.stem(x))


def test_a_fused_graph_cudnn_refuses_in_fp16_leaves_the_convolution_alone_to_pytorch():
    """The engine runs a convolution whose fused graph cuDNN refuses as PyTorch's op, what it would have fused as
    ops after it: the probe times the module alone, whatever its epilogue would have taken (here a residual)."""
    torch.manual_seed(0)
    model, x = Residual().eval(), torch.randn(2, 8, 6, 6)
    conv2 = {layer.name: layer for layer in probe_layers(model, x)}["conv2"]
    context = stand_in_context(model, x, {}, {("conv2", "fp16"): "cuDNN: no engine"}, {})
    kernel = choose(context, ask(conv2.spec, "fp16", {}, "conv2", False))
    assert kernel.kind == TORCH and conv2.epilogue_args()
    bound = engine_layers.bind(context, kernel, model.conv2, None, None)
    with torch.no_grad():
        assert torch.equal(bound.run(conv2.x16, *conv2.epilogue_args()), model.conv2(conv2.x16))


class CalledTwice(nn.Module):
    """One convolution called twice: `add_first` gives its first call an add epilogue and its second a ReLU (whose
    conv step comes first in the engine's program: a step runs where its last fused node stood); else the first
    call feeds the second (nothing fuses into it) and the second ends in a ReLU."""

    def __init__(self, add_first: bool) -> None:
        super().__init__()
        self.conv, self.add_first = nn.Conv2d(8, 8, 1), add_first

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.add_first:
            return self.conv(x) + torch.relu(self.conv(2 * x))
        return torch.relu(self.conv(self.conv(x)))


@pytest.mark.parametrize("add_first, epilogue", [(True, ("add",)), (False, ())])
def test_a_module_called_twice_is_timed_with_its_first_calls_epilogue(add_first, epilogue):
    torch.manual_seed(0)
    model, x = CalledTwice(add_first).eval(), torch.randn(2, 8, 4, 4)
    layer = probe_layers(model, x)[0]
    assert torch.equal(layer.x16, x)  # the first call's input ...
    assert layer.spec.epilogue == epilogue  # ... with the first call's epilogue
    if add_first:
        assert torch.allclose(layer.residual, torch.relu(model.conv(2 * x)))


class BroadcastBias(nn.Module):
    """A convolution whose output gets a per-channel constant added: the engine's lowering fuses the add, whose
    operand has another shape than the output."""

    def __init__(self) -> None:
        super().__init__()
        self.conv, self.bias = nn.Conv2d(8, 8, 1), nn.Parameter(torch.randn(8, 1, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.conv(x) + self.bias)


def test_a_convolution_whose_added_value_is_not_output_shaped_is_timed_alone():
    torch.manual_seed(0)
    model, x = BroadcastBias().eval(), torch.randn(2, 8, 4, 4)
    layer = probe_layers(model, x)[0]
    assert layer.spec.epilogue == () and layer.residual is None


def test_one_weight_scale_binds_as_one_per_output_channel(monkeypatch):
    """As the engine binds a per-tensor weight scale to a convolution's graph: one per output channel."""
    bound: list[torch.Tensor] = []
    monkeypatch.setattr(engine_layers, "bind_graph", lambda _c, _g, _m, _x, w_scale: bound.append(w_scale))
    torch.manual_seed(0)
    model, x = Shapes().eval(), torch.randn(2, 3, 16, 16)
    context = stand_in_context(model, x, {}, {}, {})
    stem = choose(context, ask(probe_specs(model, x)["stem"], "fp8", {}, "stem", False))
    engine_layers.bind(context, stem, model.stem, 0.5, torch.tensor([0.25]))
    assert bound[0].tolist() == [0.25] * 16


def test_a_model_the_engine_cannot_trace_is_one_line(monkeypatch):
    from builders.engine import graph
    from sessions.documents.errors import InputError

    def untraceable(_model, _example):
        raise RuntimeError("torch.fx could not trace the model: a stand-in reason")

    monkeypatch.setattr(graph, "trace", untraceable)
    model, x = Residual().eval(), torch.randn(2, 8, 6, 6)
    with pytest.raises(InputError, match="^probe: torch.fx could not trace the model: a stand-in reason$"):
        fp8_probe.with_engine_epilogues(model, x, fp8_probe.collect(model, x, {}, []), {})


class TwoSizes(nn.Module):
    """One convolution called on the input, then on the input pooled to half its size."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(8, 8, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x).mean() + self.conv(torch.nn.functional.avg_pool2d(x, 2)).mean()


@pytest.mark.parametrize("make", [Shapes, Residual, lambda: CalledTwice(True), lambda: CalledTwice(False), TwoSizes])
def test_the_engines_convolution_input_shapes_come_from_one_run_of_its_graph(make):
    """Read from the value shapes of one run of the traced graph, as the engine builds: each convolution's input
    shape is the one the test's own hooks see at its first call."""
    torch.manual_seed(0)
    model = make().eval()
    x = torch.randn(2, 3, 16, 16) if isinstance(model, Shapes) else torch.randn(2, 8, 6, 6)
    traced = trace(model, x)
    assert build.conv_input_shapes(traced, record_run(traced, x).shapes) == conv_inputs(model, x)


def test_the_probe_leaves_nothing_compiling_once_its_graphs_are_made(monkeypatch):
    """The companions sent ahead with the probe's graphs (some never asked for: a refused graph's) are withdrawn
    before the probe times its layers."""
    from types import SimpleNamespace

    model, x = Shapes().eval(), torch.randn(2, 3, 16, 16)
    context = stand_in_context(model, x, {}, {}, {})
    calls: list[str] = []
    monkeypatch.setattr(engine_layers, "make_graphs", lambda _context, _sigs: calls.append("made"))
    context.compiler = SimpleNamespace(withdraw_ahead=lambda: calls.append("withdrawn"))  # type: ignore[assignment]
    specs = probe_specs(model, x)
    refused = static_refusals(model, set(specs))
    engine_layers.build_graphs(context, [ask(spec, "fp8", refused, name, False) for name, spec in specs.items()])
    assert calls == ["made", "withdrawn"]
