"""Layers of derived classes whose forward is their base class's operation built as the base class: convolutions that
compute their weight at every call (weight standardization) as plain convolutions of that weight, as TensorRT's
constant folding builds them, and linears and convolutions that override forward only to run it on their own weight
(timm's `Linear`), which ModelOpt would otherwise leave unquantized. Which ones (read here from timm's own classes,
which the code under test never names), the outputs kept, the engine's lowering then giving each one its own layer
and running the model's outputs, and the forwards that must be left alone."""

from __future__ import annotations

import copy
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from builders.backend import BackendContext
from builders.engine.cudnn_backend import CudnnBackend, twin_notes
from builders.engine.graph import record_run, trace
from builders.engine.lowering import lower
from builders.models.plain_layers import plain_layers
from builders.models.structure import model_structure
from builders.pytorch.torch_backend import TorchBackend
from builders.pytorch.variant_modules import folded_reference, variant_module
from builders.recipes.fp8 import select
from sessions.analyses.captions import precision_of
from sessions.analyses.verdict import cpu_measured
from sessions.documents.model import Layer, Variant
from sessions.documents.plan import StudyPlan, TimingPlan, VariantPlan, parse_variants
from sessions.reports.sections import jobs_recipe_section, recipe_section
from tests.engine_stand_in import stand_in_engine

timm = pytest.importorskip("timm")
std_conv = pytest.importorskip("timm.layers.std_conv")
TRACED_INPUT = (1, 3, 224, 224)


def plain_paths(model: torch.nn.Module) -> list[str]:
    """The paths `plain_layers` made plain in `model`, in its order."""
    return [layer.path for layer in plain_layers(model)]


def _standardized(model: torch.nn.Module) -> list[str]:
    """The paths of timm's weight-standardized convolutions that convolve their input as it comes (a `...Same`
    convolution pads it first where its padding is dynamic)."""
    classes = (std_conv.StdConv2d, std_conv.ScaledStdConv2d, std_conv.StdConv2dSame, std_conv.ScaledStdConv2dSame)
    return [path for path, module in model.named_modules()
            if isinstance(module, classes) and not getattr(module, "same_pad", False)]


@pytest.mark.parametrize("name", ["nf_resnet26", "resnetv2_50x1_bit", "vit_base_r50_s16_224"])
def test_weight_standardized_convolutions_become_plain_ones_with_the_models_outputs(name):
    torch.manual_seed(0)
    model = timm.create_model(name, pretrained=False).eval()
    expected_paths = _standardized(model)
    x = torch.randn(TRACED_INPUT)
    with torch.no_grad():
        expected = model(x)
    plain = copy.deepcopy(model)
    assert plain_paths(plain) == expected_paths and expected_paths
    modules = dict(plain.named_modules())
    assert all(type(modules[path]) is torch.nn.Conv2d for path in expected_paths)
    untouched = [path for path, module in model.named_modules()
                 if isinstance(module, torch.nn.Conv2d) and path not in expected_paths]
    assert all(type(modules[path]) is type(dict(model.named_modules())[path]) for path in untouched)
    with torch.no_grad():
        torch.testing.assert_close(plain(x), expected, rtol=1e-5, atol=1e-5)


def test_the_engine_lowers_each_such_convolution_as_its_own_convolution_layer_and_runs_the_models_outputs():
    """nf_resnet26 as written lowers to no convolution layer at all (each one a PyTorch op after five ops that
    normalize its weight); made plain, every convolution is a conv step of the engine's, no step computes a weight,
    and the engine's interpreter (PyTorch standing in for cuDNN) gives the model's outputs."""
    torch.manual_seed(0)
    model = timm.create_model("nf_resnet26", pretrained=False).eval()
    example = torch.zeros(TRACED_INPUT)
    as_written = trace(model, example)
    assert not [step for step in lower(as_written.nodes, set(), {}, {}).steps if step.kind == "conv"]
    plain = copy.deepcopy(model)
    paths = plain_paths(plain)
    traced = trace(plain, example)
    program = lower(traced.nodes, set(), {}, {}, value_shapes=record_run(traced, example).shapes)
    assert sorted(step.name for step in program.steps if step.kind == "conv") == sorted(paths)  # in call order
    assert paths == _standardized(model)
    assert not [step for step in program.steps if step.op == "normalization"]
    x = torch.randn(TRACED_INPUT)
    with torch.no_grad():
        expected = model(x)
    torch.testing.assert_close(stand_in_engine(program, traced, x).infer(x), expected, rtol=1e-4, atol=1e-4)


class PaddedFirst(torch.nn.Conv2d):
    """Pads its input before convolving it: not a convolution of its input as it comes."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(torch.nn.functional.pad(x, (1, 1, 1, 1)))


class WeightFromInput(torch.nn.Conv2d):
    """Scales its weight by its input's mean: the weight is not computed from the module's own tensors."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.conv2d(x, self.weight * x.mean(), self.bias, self.stride, self.padding)


class ActivatedAfter(torch.nn.Conv2d):
    """Its output is the convolution's, activated: more than a convolution."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(super().forward(x))


class StrideFromInput(torch.nn.Conv2d):
    """Its stride is read from its input: not a constant."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.conv2d(x, self.weight, self.bias, x.shape[-1] // 4, self.padding)


class StrideFromWeight(torch.nn.Conv2d):
    """Its stride is computed from its own weight's shape, its weight and bias its own: nothing to fold."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.conv2d(x, self.weight, self.bias, self.weight.shape[-1] - 2, self.padding)


class ClampedFirst(torch.nn.Conv2d):
    """Clamps its input before convolving it: on a typical input the same as the plain convolution, not on all."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self._conv_forward(x.clamp(-100.0, 100.0), self.weight, self.bias)


class ClampedAfter(torch.nn.Conv2d):
    """Clamps its output: on a typical input the same as the plain convolution, not on all."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self._conv_forward(x, self.weight, self.bias).clamp(-100.0, 100.0)


def clamped_conv2d(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, stride: Any, padding: Any,
                   dilation: Any, groups: int) -> torch.Tensor:
    """A 2-D convolution with the arguments of conv2d, its output clamped: a function torch.fx does not trace into."""
    return torch.nn.functional.conv2d(x, weight, bias, stride, padding, dilation, groups).clamp(-100.0, 100.0)


torch.fx.wrap("clamped_conv2d")


class ConvolutionLookalike(torch.nn.Conv2d):
    """Returns a call with conv2d's arguments that is not conv2d: on a typical input the same, not on all."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return clamped_conv2d(x, self.weight * 1.0, self.bias, self.stride, self.padding, self.dilation, self.groups)


class AsConv2d(torch.nn.Conv2d):
    """Convolves as Conv2d does, with its own weight and bias: nothing computed, nothing to fold."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self._conv_forward(x, self.weight, self.bias)


class TwoConvolutions(torch.nn.Conv2d):
    """Convolves twice with its weight: more than one convolution."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self._conv_forward(self._conv_forward(x, self.weight, self.bias), self.weight, self.bias)


class NoisyWeight(torch.nn.Conv2d):
    """Adds noise to its weight at every call: computed from its own tensors, but another weight at each call."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self._conv_forward(x, self.weight + torch.randn_like(self.weight), self.bias)


class SecondInput(torch.nn.Conv2d):
    """Takes a second argument: its forward is not a function of one image."""

    def forward(self, x: torch.Tensor, scale: float = 1.0) -> torch.Tensor:
        return self._conv_forward(x, self.weight * scale, self.bias)


class UnitNorm(torch.nn.Conv2d):
    """Each filter scaled to unit norm at every call, with a bias: converted, stride and padding its own."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        weight = self.weight / self.weight.flatten(1).norm(dim=1).view(-1, 1, 1, 1)
        return torch.nn.functional.conv2d(x, weight, bias=self.bias, stride=self.stride, padding=self.padding,
                                          groups=self.groups)


@pytest.mark.parametrize("kind", [PaddedFirst, ClampedFirst, ClampedAfter, ConvolutionLookalike, WeightFromInput,
                                  ActivatedAfter, StrideFromInput, TwoConvolutions, NoisyWeight, SecondInput])
def test_a_forward_that_is_more_than_a_convolution_of_constants_is_left_as_it_is(kind):
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), kind(8, 8, 3, padding=1))
    first, second = model[0], model[1]
    assert plain_layers(model) == []
    assert model[0] is first and model[1] is second


def test_a_weight_normalized_at_every_call_keeps_its_settings():
    torch.manual_seed(0)
    model = torch.nn.Sequential(UnitNorm(4, 8, 3, stride=2, padding=1, groups=2), UnitNorm(8, 8, 1))
    x = torch.randn(2, 4, 17, 17)
    with torch.no_grad():
        expected = model(x)
    assert plain_layers(model) == [("0", "UnitNorm", True), ("1", "UnitNorm", True)]
    conv = model[0]
    assert (conv.stride, conv.padding, conv.groups, conv.in_channels) == ((2, 2), (1, 1), 2, 4)
    with torch.no_grad():
        torch.testing.assert_close(model(x), expected, rtol=1e-5, atol=1e-5)


def _standardized_then_batchnorm() -> torch.nn.Sequential:
    torch.manual_seed(0)
    model = torch.nn.Sequential(std_conv.StdConv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
                                std_conv.StdConv2d(8, 8, 3, padding=1)).eval()
    with torch.no_grad():
        model[1].weight.uniform_(0.5, 2.0)
        model[1].running_var.uniform_(0.5, 2.0)
        model[1].running_mean.uniform_(-1.0, 1.0)
    return model


def test_the_engines_model_has_them_plain_before_batchnorm_is_folded():
    """`CudnnBackend._plain`: a BatchNorm after a weight-standardized convolution folds into the weight it computes
    (folded into the weight it standardizes, the BatchNorm's scale would be normalized away)."""
    model = _standardized_then_batchnorm()
    x = torch.randn(2, 3, 16, 16)
    with torch.no_grad():
        expected = model(x)
    backend = SimpleNamespace(_reference=model, structure=model_structure(model, x))
    assert backend.structure.conv_bn == [("0", "1")]
    plain, made_plain = CudnnBackend._plain(backend)  # type: ignore[arg-type]
    assert [layer.path for layer in made_plain] == ["0", "3"] and type(plain[1]) is torch.nn.Identity
    with torch.no_grad():
        error = (plain.float()(x) - expected).abs().max() / expected.abs().max()
    assert error < 1e-2  # fp16 weights; the BatchNorm folded into the standardized weight misses by far more


def test_every_pytorch_variant_starts_from_them_plain_and_fp8_quantizes_the_weight_they_compute():
    """`folded_reference` (what every PyTorch variant is made from) and the FP8 calibration make them plain first,
    so ModelOpt puts its quantizers on them (it has none for timm's classes) and the engine's scales are of the weight
    the engine runs; the source still computes the model."""
    model = _standardized_then_batchnorm()
    x = torch.randn(2, 3, 16, 16)
    with torch.no_grad():
        expected = model(x)
    source = folded_reference(model, x[:1])
    assert [layer.path for layer in source.made_plain] == ["0", "3"] and source.batchnorm_folded == 1
    with torch.no_grad():
        torch.testing.assert_close(source.module(x), expected, rtol=1e-4, atol=1e-4)
    built = variant_module(model, VariantPlan("fp8", "all"), x, torch.float32)
    modules = dict(built.module.named_modules())
    assert built.quantized == set(select(model_structure(model, x[:1]), "all", []).quantized) == {"3"}
    assert all(modules[path].weight_quantizer.is_enabled for path in built.quantized)
    assert [note for note in built.notes if "weight standardization; 0 first" in note]  # as the TensorRT variant's


def _padded_first_variant() -> tuple[Any, list[str]]:
    """The FP8 `all` variant of a model whose two middle convolutions ModelOpt cannot quantize, and what `all`
    selects."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3), torch.nn.ReLU(), PaddedFirst(16, 16, 3), torch.nn.ReLU(),
                                PaddedFirst(16, 16, 3), torch.nn.ReLU(), torch.nn.Conv2d(16, 16, 3)).eval()
    x = torch.randn(2, 3, 16, 16)
    selected = select(model_structure(model, x[:1]), "all", []).quantized
    return variant_module(model, VariantPlan("fp8", "all"), x, torch.float32), selected


def test_a_selected_layer_modelopt_gives_no_quantizer_is_counted_apart_and_said():
    """A convolution of a type ModelOpt does not convert (and that is not made plain: it pads its input first) gets
    no quantizer: the FP8 variant must not count it among its FP8 layers, nor among those its recipe keeps out."""
    built, selected = _padded_first_variant()
    assert {"2", "4", "6"} <= set(selected)
    assert built.quantized == set(selected) - {"2", "4"}
    recipe = built.recipe
    assert recipe is not None and recipe.unquantized == ["2", "4"]
    assert not {"2", "4"} & {*recipe.excluded, *recipe.quantized}
    assert recipe.layer_count == 4  # the model's four convolutions, each counted once
    assert any("PaddedFirst" in note and "no FP8 quantizer" in note for note in built.notes)


def test_every_view_says_such_a_layer_was_selected_and_ran_without_a_quantizer():
    """The layer's caption (TUI, `show --layers`) says the recipe asked FP8 and it did not run so, not that the recipe
    kept it out; the recipe's summaries count it apart; the real engine's variant repeats the note."""
    built, _ = _padded_first_variant()
    recipe = built.recipe
    assert recipe is not None
    variant = Variant(name="fp8-all", backend="torch", precision="fp8", device="cpu", simulated=True, recipe=recipe,
                      layers=[Layer(name="2", kind="Conv2d", op="conv", precision="fp32")])
    caption = precision_of(variant, variant.layers[0])
    assert caption.asked == "fp8 (recipe)" and not caption.honoured and "no fp8 quantizer" in caption.why
    assert "kept out" not in caption.why
    assert "2 selected without a quantizer" in jobs_recipe_section([variant])
    assert "2 selected without a quantizer" in cpu_measured(variant, variant)
    table = recipe_section(SimpleNamespace(variants=[variant])).splitlines()  # type: ignore[arg-type]
    header = next(line for line in table if line.startswith("| variant"))
    cells = [cell.strip() for cell in header.split("|")]
    row = [cell.strip() for cell in next(line for line in table if "fp8-all" in line).split("|")]
    assert row[cells.index("selected, no quantizer")] == "2" and row[cells.index("excluded")] == "1"
    twin = SimpleNamespace(recipe=recipe, cached=False)
    notes = twin_notes(twin, built.module)  # type: ignore[arg-type]
    assert len(notes) == 1 and "PaddedFirst" in notes[0] and "no FP8 quantizer" in notes[0]


def test_the_pytorch_backends_variants_say_how_many_they_made_plain():
    plan = StudyPlan(model="standardized", backend="torch", device="cpu", batch=1, tracer="none",
                     variants=parse_variants("fp32,fp8", ["all"], []), timing=TimingPlan(0.0, 1, 1))
    x = torch.randn(2, 3, 16, 16)
    model = SimpleNamespace(name="standardized", module=_standardized_then_batchnorm())
    backend = TorchBackend(BackendContext(plan, model, x[:1]))  # type: ignore[arg-type]
    for variant in plan.variants:
        built = backend.build(variant, x).variant
        said = [note for note in built.notes if "weight standardization" in note]
        assert built.batchnorm_folded == 1 and len(said) == 1
        assert said[0].startswith("2 convolution(s)") and "; 0 first" in said[0]


def test_a_model_on_the_meta_device_is_left_as_it_is():
    with torch.device("meta"):
        model = torch.nn.Sequential(UnitNorm(3, 8, 3))
    standardized = model[0]
    assert plain_layers(model) == [] and model[0] is standardized


def test_a_model_that_is_itself_such_a_convolution_is_left_as_it_is():
    model = UnitNorm(3, 8, 3)
    assert plain_layers(model) == []


class LinearAsLinear(torch.nn.Linear):
    """Runs linear on its own weight and bias, as Linear does (timm's `Linear` does so outside TorchScript)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.linear(x, self.weight, self.bias)


class LinearActivated(torch.nn.Linear):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(torch.nn.functional.linear(x, self.weight, self.bias))


class LinearOfScaledInput(torch.nn.Linear):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.linear(x * 2.0, self.weight, self.bias)


class LinearWeightFromInput(torch.nn.Linear):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.linear(x, self.weight * x.mean(), self.bias)


@pytest.mark.parametrize("kind", [AsConv2d, StrideFromWeight, LinearAsLinear, "timm"])
def test_a_subclass_that_runs_its_base_operation_on_its_own_weight_becomes_the_base_sharing_its_parameters(kind):
    """ModelOpt gives no quantizer to a derived class with a forward of its own: made the base class, it gets one."""
    torch.manual_seed(0)
    if kind == "timm":
        layer, base, x = timm.layers.Linear(12, 5), torch.nn.Linear, torch.randn(4, 12)
    elif issubclass(kind, torch.nn.Linear):
        layer, base, x = kind(12, 5), torch.nn.Linear, torch.randn(4, 12)
    else:
        layer, base, x = kind(4, 8, 3, padding=1), torch.nn.Conv2d, torch.randn(2, 4, 9, 9)
    model = torch.nn.Sequential(torch.nn.Identity(), layer)
    with torch.no_grad():
        expected = model(x)
    assert plain_layers(model) == [("1", type(layer).__name__, False)]
    plain = model[1]
    assert type(plain) is base and plain.weight is layer.weight and plain.bias is layer.bias
    with torch.no_grad():
        torch.testing.assert_close(model(x), expected)


class LinearWithoutBias(torch.nn.Linear):
    """Leaves out the bias it holds: the plain form is a linear of its own weight alone."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.linear(x, self.weight)


def test_a_bias_held_and_left_out_makes_a_plain_layer_without_one_that_computes_nothing():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Identity(), LinearWithoutBias(12, 5))
    x = torch.randn(4, 12)
    with torch.no_grad():
        expected = model(x)
    assert plain_layers(model) == [("1", "LinearWithoutBias", False)]
    assert type(model[1]) is torch.nn.Linear and model[1].bias is None
    with torch.no_grad():
        torch.testing.assert_close(model(x), expected)


@pytest.mark.parametrize("kind", [LinearActivated, LinearOfScaledInput, LinearWeightFromInput])
def test_a_linear_forward_that_is_more_than_linear_of_its_input_is_left_as_it_is(kind):
    model = torch.nn.Sequential(torch.nn.Linear(6, 12), kind(12, 5))
    first, second = model[0], model[1]
    assert plain_layers(model) == []
    assert model[0] is first and model[1] is second


def test_an_fp8_recipe_quantizes_a_timm_linear_it_selects_and_says_it_was_made_plain():
    """timm's `Linear` (its class read here, from timm) gets no quantizer from ModelOpt: `all` ran one it selects
    (a token MLP's first linear) unquantized and counted it excluded. Made plain, every selected layer is quantized;
    the classifier, timm's `Linear` too, is the head, which `all` keeps out."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.ReLU(), torch.nn.Conv2d(8, 8, 3),
                                torch.nn.Flatten(2), timm.layers.Linear(16, 16), torch.nn.ReLU(),
                                torch.nn.Linear(16, 16), torch.nn.Flatten(), timm.layers.Linear(128, 10)).eval()
    x = torch.randn(4, 3, 8, 8)
    body = [path for path, module in model.named_modules() if isinstance(module, timm.layers.Linear)][:1]
    selected = select(model_structure(model, x[:1]), "all", []).quantized
    assert body == ["4"] and "4" in selected and "8" not in selected
    built = variant_module(model, VariantPlan("fp8", "all"), x, torch.float32)
    assert built.quantized == set(selected) and dict(built.module.named_modules())["4"].weight_quantizer.is_enabled
    assert built.recipe is not None and "4" not in built.recipe.excluded
    assert not [note for note in built.notes if "no FP8 quantizer" in note]
    assert [note for note in built.notes if note.startswith("2 layer(s) of derived classes (Linear; 4 first)")]
