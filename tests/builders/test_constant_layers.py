"""Layers whose output does not depend on their input, and the note a quantized variant carries for them."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from torch import nn

from builders.models.constant_layers import constant_output_layers
from inspector.study import constant_layers_note
from sessions.documents.model import Layer, Recipe, Variant


class Branchy(nn.Module):
    """A stem, then a residual branch whose last BatchNorm is zero-initialised, beside a layer with zero weights."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, padding=1)
        self.branch = nn.Conv2d(8, 8, 1, bias=False)
        self.branch_bn = nn.BatchNorm2d(8)
        self.dead = nn.Conv2d(8, 8, 1)
        self.head = nn.Linear(8, 4)
        nn.init.zeros_(self.branch_bn.weight)
        nn.init.zeros_(self.dead.weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stem(x)
        x = x + self.branch_bn(self.branch(x)) + self.dead(x)
        return self.head(x.mean((2, 3)))


def _recipe(quantized: list[str]) -> Recipe:
    return Recipe(method="m", number_format="fp8 e4m3", layout="all", exclude_patterns=[], quantized=quantized,
                  excluded=[], scales="max", calibration_source="images", calibration_count=2)


def _inputs(module: nn.Module) -> SimpleNamespace:
    return SimpleNamespace(model=SimpleNamespace(module=module.eval()), static_input=torch.randn(2, 3, 16, 16))


def test_zero_weights_and_a_zero_scaled_batchnorm_make_constant_layers_in_the_order_asked():
    model = Branchy()
    pairs = [("branch", "branch_bn")]
    assert constant_output_layers(model, pairs, ["head", "dead", "branch", "stem", "missing"]) == ["dead", "branch"]
    assert constant_output_layers(model, [], ["branch"]) == []  # without the pair its BatchNorm is not known


def test_a_batchnorm_with_one_live_channel_or_no_affine_weight_leaves_its_layer_alone():
    model = Branchy()
    with torch.no_grad():
        model.branch_bn.weight[3] = 0.5
    assert constant_output_layers(model, [("branch", "branch_bn")], ["branch"]) == []
    model.branch_bn = nn.BatchNorm2d(8, affine=False)
    assert constant_output_layers(model, [("branch", "branch_bn")], ["branch"]) == []


def test_the_note_counts_the_constant_layers_the_structure_pass_finds_and_says_why_for_random_weights():
    variant = Variant(name="fp8-all", backend="torch", precision="fp8", device="cpu",
                      recipe=_recipe(["stem", "branch", "dead", "head"]))
    note = constant_layers_note(variant, _inputs(Branchy()), "random (pretrained=False, seed 0)")
    assert note is not None and note.startswith("2 of the 4 layers its recipe quantizes have all-zero weights")
    assert "random initialisation" in note
    trained = constant_layers_note(variant, _inputs(Branchy()), "model.safetensors")
    assert trained is not None and trained.startswith("2 of the 4") and "random initialisation" not in trained


def test_where_every_layer_that_runs_fp8_is_constant_the_note_says_the_figures_hold_no_fp8_error():
    """An engine that kept the live layers fp16 by timing and ran only the zero-weight ones in FP8 (senet154's four
    conv3 layers at batch 32): its quality is fp16's by construction. One live layer in FP8, or every quantized layer
    in FP8, keeps the count of constant layers."""
    variant = Variant(name="cudnn-fp8-all", backend="cudnn", precision="fp8", device="cuda",
                      recipe=_recipe(["stem", "branch", "dead", "head"]))
    ran = {"stem": "fp16", "branch": "fp8", "dead": "fp8", "head": "fp16"}
    why = {"stem": "FP8 asked; fp16 chosen by timing: best FP8 tactic 3.1x slower", "head": "cuDNN refused FP8"}
    built = [Layer(name=name, kind="conv", precision=precision, attrs={"asked": "fp8", "fallback": why.get(name)})
             for name, precision in ran.items()]
    note = constant_layers_note(variant, _inputs(Branchy()), "random (pretrained=False, seed 0)", lambda: built)
    assert note is not None and note.startswith("every one of the 2 layers that run in FP8 (of the 4 its recipe "
                                                "quantizes; 1 fp16 by timing, 1 fp16 refused)")
    assert "hold no FP8 error at all" in note
    built[0].precision = "fp8"  # the stem, live, runs FP8 too
    note = constant_layers_note(variant, _inputs(Branchy()), "random", lambda: built)
    assert note is not None and note.startswith("2 of the 4 layers its recipe quantizes")
    everything = [Layer(name=name, kind="conv", precision="fp8") for name in ran]
    note = constant_layers_note(variant, _inputs(Branchy()), "random", lambda: everything)
    assert note is not None and note.startswith("2 of the 4 layers its recipe quantizes")


class NormAndGate(nn.BatchNorm2d):
    """A BatchNorm subclass holding a module of its own beyond dropout and activation: the engines do not fold it."""

    def __init__(self, channels: int) -> None:
        super().__init__(channels)
        self.gate = nn.Sigmoid()


def test_a_batchnorm_the_engines_do_not_fold_leaves_its_layer_out_and_names_count_once():
    model = Branchy()
    model.branch_bn = NormAndGate(8)
    nn.init.zeros_(model.branch_bn.weight)
    variant = Variant(name="fp8-all", backend="torch", precision="fp8", device="cpu",
                      recipe=_recipe(["stem", "branch", "dead", "dead", "head"]))
    note = constant_layers_note(variant, _inputs(model), "random (pretrained=False, seed 0)")
    assert note is not None and note.startswith("1 of the 4 layers its recipe quantizes")  # "dead" alone, once


def test_no_note_without_constant_layers_a_recipe_or_a_module():
    live = Branchy()
    with torch.no_grad():
        live.branch_bn.weight.fill_(1.0)
        live.dead.weight.fill_(0.1)
    variant = Variant(name="fp8-all", backend="torch", precision="fp8", device="cpu",
                      recipe=_recipe(["stem", "branch", "dead", "head"]))
    assert constant_layers_note(variant, _inputs(live), "random") is None
    assert constant_layers_note(Variant(name="fp16", backend="torch", precision="fp16", device="cpu"),
                                _inputs(Branchy()), "random") is None
    onnx = SimpleNamespace(model=SimpleNamespace(module=None), static_input=torch.zeros(1, 3, 16, 16))
    assert constant_layers_note(variant, onnx, "random") is None


def test_timm_zero_initialises_each_residual_branch_and_every_such_conv_is_found():
    timm = pytest.importorskip("timm")
    model = timm.create_model("resnet18", pretrained=False).eval()
    # independently of the code under test: the conv a BasicBlock's zero-initialised bn2 reads is that block's conv2
    expected = [f"layer{stage}.{block}.conv2" for stage in range(1, 5) for block in range(2)]
    convs = [name for name, m in model.named_modules() if isinstance(m, nn.Conv2d)]
    variant = Variant(name="fp8-all", backend="torch", precision="fp8", device="cpu", recipe=_recipe(convs))
    note = constant_layers_note(variant, _inputs(model), "random (pretrained=False, seed 0)")
    assert note is not None and note.startswith(f"{len(expected)} of the {len(convs)} layers")
    from builders.models.structure import model_structure

    pairs = model_structure(model, torch.zeros(1, 3, 64, 64)).conv_bn
    assert constant_output_layers(model, pairs, convs) == expected


def test_a_weight_the_forward_computes_as_zero_is_found_by_the_output_and_only_with_an_input():
    """timm's NF-Nets standardise each convolution's weight in its forward and scale it by a gain, zero-initialised in
    the last convolution of every residual branch: the stored weight is live, the weight used is zero."""
    timm = pytest.importorskip("timm")
    model = timm.create_model("nf_regnet_b0", pretrained=False).eval()
    # independently of the code under test: the layers whose gain parameter holds only zeros
    expected = [name for name, m in model.named_modules()
                if isinstance(getattr(m, "gain", None), torch.Tensor) and not m.gain.any()]
    convs = [name for name, m in model.named_modules() if isinstance(m, (nn.Conv2d, nn.Linear))]
    assert expected and all(model.get_submodule(name).weight.any() for name in expected)  # the premise
    example = torch.randn(1, 3, 64, 64)
    assert constant_output_layers(model, [], convs, example) == expected
    assert constant_output_layers(model, [], convs) == []  # without an input, the stored weights alone
    variant = Variant(name="fp8-all", backend="torch", precision="fp8", device="cpu", recipe=_recipe(convs))
    note = constant_layers_note(variant, _inputs(model), "random (pretrained=False, seed 0)")
    assert note is not None and note.startswith(f"{len(expected)} of the {len(convs)} layers")


def test_a_live_layer_is_not_taken_for_a_constant_one_by_its_second_call():
    model = Branchy().eval()
    convs = ["stem", "branch", "dead", "head"]
    assert constant_output_layers(model, [], convs, torch.randn(2, 3, 16, 16)) == ["dead"]


class Gained(nn.Linear):
    """A linear layer whose weight its forward scales by a gain (zero: the weight used is zero), and a keyword its
    caller must give."""

    def __init__(self, features: int, gain: float) -> None:
        super().__init__(features, features)
        self.gain = nn.Parameter(torch.full((), gain))

    def forward(self, x: torch.Tensor, *, scale: float = 1.0) -> torch.Tensor:  # type: ignore[override]
        return nn.functional.linear(x, self.weight * self.gain, self.bias) * scale


class Keyed(Gained):
    def forward(self, x: torch.Tensor, *, scale: float) -> torch.Tensor:  # type: ignore[override]
        return super().forward(x, scale=scale)


class SharedAndKeyed(nn.Module):
    """A zero-gain layer called twice in a forward (its first call decides), a zero-gain one called with a keyword
    it requires, and a live one with that keyword."""

    def __init__(self) -> None:
        super().__init__()
        self.shared, self.keyed, self.live = Gained(4, 0.0), Keyed(4, 0.0), Keyed(4, 1.0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.shared(x) + self.shared(x * 3) + x
        return self.live(self.keyed(x, scale=0.5) + x, scale=2.0)


def test_layers_called_twice_or_with_keywords_are_judged_by_their_first_call_with_their_keywords():
    model = SharedAndKeyed().eval()
    names = ["shared", "keyed", "live"]
    assert all(model.get_submodule(name).weight.any() for name in names)  # the premise: no stored weight is zero
    assert constant_output_layers(model, [], names, torch.randn(2, 4)) == ["shared", "keyed"]
