"""Stages, squeeze-excitation, head, attention output and normalization by data flow, on the models where a shape or
an op stopped the rule: ECA (a Conv1d over a (N, 1, C) row of pooled channels), a global context block (pooled
features added, not gating), VOLO (a classifier applied to every token, then a max), MViTv2 (attention's product plus
its query, then the projection) and ConvNeXt-V2's GlobalResponseNorm (`x.norm` over positions).

Expected layers come from timm's own classes, attributes and feature_info (which the code under test never names), from
how each test module is written, and from tests/structure_reference.py (no code of the tool's).
"""

from __future__ import annotations

import pytest
import torch

from benchmarks.recipe_zoo import load_meta
from builders.models.structure import model_structure
from builders.recipes.fp8 import select
from tests.structure_reference import read, read_at_input_size

timm = pytest.importorskip("timm")
LAYERS = (torch.nn.Conv1d, torch.nn.Conv2d, torch.nn.Linear)
SE = "squeeze-excitation"


def test_eca_reads_pooled_channels_as_a_row_and_changes_no_resolution():
    """ecaresnet26t at 256 px: timm's feature_info puts stages at layer1..layer4 (reductions 4, 8, 16, 32); ECA's
    Conv1d writes (N, 1, C), C long, which is channels pooled from positions, not C positions."""
    model, size = load_meta("ecaresnet26t")
    stages = [f["module"] for f in model.feature_info if f["reduction"] > 2]
    expected = {f"stage {i}": sorted(p for p, m in model.named_modules()
                                     if isinstance(m, LAYERS) and p.startswith(stage + "."))
                for i, stage in enumerate(stages, 1)}
    found = model_structure(model, torch.zeros(1, *size)).stage_layers()
    reading = read_at_input_size(model, size, None).stages
    for stages_found in (found, reading):
        assert {k: sorted(v) for k, v in stages_found.items() if k.startswith("stage")} == expected


def _layers_in(model: torch.nn.Module, classes: tuple[type, ...], child: str = "") -> set[str]:
    """Convolutions and linears inside the instances of `classes` (inside their child `child`, where given)."""
    blocks = [f"{p}.{child}" if child else p for p, m in model.named_modules() if isinstance(m, classes)]
    return {p for p, m in model.named_modules() if isinstance(m, LAYERS) and any(p.startswith(b + ".") for b in blocks)}


def _se_layers(model: torch.nn.Module, size: tuple[int, ...]) -> tuple[set[str], set[str]]:
    """Squeeze-excitation layers as the tool finds them and as the independent reading does."""
    found = model_structure(model, torch.zeros(1, *size)).paths(role=SE)
    return set(found), set(read_at_input_size(model, size, None).squeeze_excitation)


def test_eca_channel_attention_is_squeeze_excitation():
    """ecaresnet26t's EcaModule: mean over positions, a Conv1d across the channels, a sigmoid gating those channels."""
    model, size = load_meta("ecaresnet26t")
    expected = _layers_in(model, (timm.layers.EcaModule,))
    assert expected and _se_layers(model, size) == (expected, expected)


class _Context(torch.nn.Module):
    """timm's GlobalContext with both fusions: `mlp_scale` gates the channels (x * sigmoid), `mlp_add` is added."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = torch.nn.Conv2d(3, 32, 3, padding=1)
        self.context = timm.layers.GlobalContext(32, fuse_add=True, fuse_scale=True)
        self.fc = torch.nn.Linear(32, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.context(self.stem(x)).mean((2, 3)))


@pytest.mark.parametrize("use_attn", [True, False])
def test_pooled_features_added_to_the_map_are_not_squeeze_excitation(use_attn):
    """Pooled (by a mean or by attention over positions) features that gate the map's channels are squeeze-excitation;
    the same features added to the map are not: no multiplicative gate."""
    model = _Context().to("meta").eval()
    if not use_attn:
        model.context.conv_attn = None
    expected = _layers_in(model, (timm.layers.GlobalContext,), "mlp_scale")
    assert expected and _se_layers(model, (3, 16, 16)) == (expected, expected)


def test_a_global_context_block_that_only_adds_is_not_squeeze_excitation():
    """gcresnext26ts: every GlobalContext block fuses by addition only (timm: mlp_scale is None)."""
    model, size = load_meta("gcresnext26ts")
    blocks = [m for m in model.modules() if isinstance(m, timm.layers.GlobalContext)]
    assert blocks and all(b.mlp_scale is None and b.mlp_add is not None for b in blocks)
    assert _se_layers(model, size) == (set(), set())


class _CrossGate(torch.nn.Module):
    """Features pooled from one branch gate another branch, not computed from the first: no squeeze-excitation."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.Conv2d(3, 8, 3, padding=1)
        self.excite, self.after = torch.nn.Conv2d(8, 8, 1), torch.nn.Conv2d(8, 8, 3, padding=1)
        self.fc = torch.nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gated = self.a(x) * torch.sigmoid(self.excite(self.b(x).mean((2, 3), keepdim=True)))
        return self.fc(self.after(gated).mean((2, 3)))


def test_pooled_features_gating_another_tensor_are_not_squeeze_excitation():
    model = _CrossGate().to("meta").eval()
    assert model_structure(model, torch.zeros(1, 3, 16, 16)).stages["excite"] == "stage 1"  # not the head's
    assert _se_layers(model, (3, 16, 16)) == (set(), set())


def test_volo_classifiers_are_its_head_though_a_max_over_tokens_follows_one():
    """volo_d1_224: timm names its classifiers (`pretrained_cfg["classifier"]`: head, aux_head); aux_head reads every
    token and a max over them follows it, after `head` ran. Recipe `all` keeps both out."""
    model, size = load_meta("volo_d1_224")
    expected = set(model.pretrained_cfg["classifier"])
    structure = model_structure(model, torch.zeros(1, *size))
    assert set(structure.paths(role="head")) == expected
    assert set(read_at_input_size(model, size, None).stages["head"]) == expected
    assert not expected & set(select(structure, "all", []).quantized)


class _ClassifyThenPool(torch.nn.Module):
    """A 1 x 1 convolution classifies every position, then a global max pools the logits."""

    def __init__(self) -> None:
        super().__init__()
        self.body = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.Conv2d(8, 8, 3, padding=1))
        self.classify = torch.nn.Conv2d(8, 5, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classify(torch.relu(self.body(x))).amax((2, 3))


def test_a_classifier_before_the_global_pooling_is_the_head():
    model = _ClassifyThenPool().to("meta").eval()
    assert model_structure(model, torch.zeros(1, 3, 16, 16)).paths(role="head") == ["classify"]
    assert read(model, torch.zeros(1, 3, 16, 16, device="meta")).stages["head"] == ["classify"]


def test_mvitv2_attention_output_is_found_through_its_residual_pooling():
    """mvitv2_tiny's MultiScaleAttention adds its query to attn @ v (residual pooling), then projects: `proj`."""
    model, size = load_meta("mvitv2_tiny")
    expected = {f"{p}.proj" for p, m in model.named_modules() if isinstance(m, timm.models.mvitv2.MultiScaleAttention)}
    assert expected and set(model_structure(model, torch.zeros(1, *size)).paths(role="attention-output")) == expected
    assert set(read_at_input_size(model, size, None).attention_output) == expected


class _RawAttention(torch.nn.Module):
    """Attention without an output projection: softmax(Q K^T) V."""

    def __init__(self) -> None:
        super().__init__()
        self.qkv = torch.nn.Linear(16, 48)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.qkv(x).chunk(3, -1)
        return (q @ k.transpose(-2, -1)).softmax(-1) @ v


class _ResidualBlock(torch.nn.Module):
    """The residual stream plus raw attention, then an MLP: fc1 reads the residual stream, not attention's output."""

    def __init__(self) -> None:
        super().__init__()
        self.attn, self.fc1, self.fc2 = _RawAttention(), torch.nn.Linear(16, 32), torch.nn.Linear(32, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(x)
        return x + self.fc2(torch.relu(self.fc1(x)))


class _Tokens(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed, self.blocks = torch.nn.Conv2d(3, 16, 4, 4), torch.nn.Sequential(_ResidualBlock(), _ResidualBlock())
        self.head = torch.nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.blocks(self.embed(x).flatten(2).transpose(1, 2)).mean(1))


def test_an_add_of_the_residual_stream_and_attention_is_not_attention_output():
    model = _Tokens().to("meta").eval()
    assert model_structure(model, torch.zeros(1, 3, 16, 16)).paths(role="attention-output") == []
    assert read(model, torch.zeros(1, 3, 16, 16, device="meta")).attention_output == []


@pytest.mark.parametrize("name, size", [("test_resnet", (3, 64, 64)), ("resnet18", (3, 64, 64))])
def test_a_shortcut_called_after_the_main_path_and_added_in_place_is_trunk_not_head(name, size):
    """timm's ResNet blocks run their shortcut's convolution after the main path, then add it and apply the ReLU in
    place: the features the pooled classifier reads are finished by those in-place ops, so only timm's classifier
    (`pretrained_cfg["classifier"]`) and the pooling are head."""
    model = timm.create_model(name, pretrained=False).eval()
    head = set(model_structure(model, torch.zeros(1, *size)).paths(role="head"))
    assert head == {model.pretrained_cfg["classifier"]}
    assert set(read(model, torch.zeros(1, *size)).stages["head"]) == head  # the reference, from autograd


@pytest.mark.parametrize("name", ["resnet18", "vit_tiny_patch16_224", "efficientnet_b0"])
def test_a_model_without_a_classifier_has_no_head_layer(name):
    """Built with num_classes=0, timm's models return their pooled features: no layer classifies (timm's classifier is
    an Identity), so no layer is head, and every layer keeps its trunk stage."""
    model = timm.create_model(name, pretrained=False, num_classes=0).eval()
    assert isinstance(model.get_classifier(), torch.nn.Identity)  # the premise, from timm
    size = model.pretrained_cfg["input_size"]
    layers = {path for path, module in model.named_modules() if isinstance(module, (torch.nn.Conv2d, torch.nn.Linear))}
    head = set(model_structure(model, torch.zeros(1, *size)).paths(role="head"))
    assert not head & layers


class _Headless(torch.nn.Module):
    """Pooled features, no classifier, in the ways the review found fooling the head rule: the last layer's output
    meets a residual add (no final norm), a normalization written by hand (x * rsqrt(mean(x^2))), a reshape_as
    whose second argument is the layer's output, or a gather whose index it makes."""

    def __init__(self, ending: str) -> None:
        super().__init__()
        self.ending = ending
        self.stem, self.mix = torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.Conv2d(8, 8, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.stem(x)
        z = self.mix(y)
        if self.ending == "residual":
            y = y + z
        elif self.ending == "rms":
            y = z * torch.rsqrt(z.pow(2).mean(1, keepdim=True) + 1e-6)
        elif self.ending == "reshape_as":
            y = torch.relu(y).reshape_as(z)
        else:  # the layer's output only picks which position each channel's value is gathered from
            where = z.flatten(2)[..., :1].to(torch.int64)  # |z| < 1 on the zero input: position 0
            return torch.gather(torch.relu(y).flatten(2), 2, where).squeeze(-1)
        return y.mean((2, 3))


@pytest.mark.parametrize("ending", ["residual", "rms", "reshape_as", "gather"])
def test_pooled_features_with_no_classifier_have_no_head_layer(ending):
    model = _Headless(ending).eval()
    assert model_structure(model, torch.zeros(1, 3, 8, 8)).paths(role="head") == []


def test_coat_factorized_attention_output_and_its_stages_despite_the_class_token():
    """coat_lite_tiny: `FactorAttnConvRelPosEnc` computes `scale * (q @ (softmax(k)^T @ v)) + crpe`, then `proj`:
    attention's output, scaled and added to before the projection. Its blocks read 3,137 tokens (a class token and
    56 x 56 positions) and its shared convolutional position encodings 3,136 positions: the same resolution, so
    timm's four feature levels (`feature_info`: serial_blocks1..4) are the four stages."""
    model, size = load_meta("coat_lite_tiny")
    attention = {f"{p}.proj" for p, m in model.named_modules()
                 if type(m).__name__ == "FactorAttnConvRelPosEnc"}
    found = model_structure(model, torch.zeros(1, *size))
    assert len(attention) == 8 and set(found.paths(role="attention-output")) == attention
    stages = [f["module"] for f in model.feature_info]
    found_stages = found.stage_layers()
    assert sorted(k for k in found_stages if k.startswith("stage")) == [f"stage {i}" for i in range(1, 5)]
    for i, stage in enumerate(stages, 1):
        assert {p for p in found_stages[f"stage {i}"] if p.startswith("serial_blocks")} == {
            p for p, m in model.named_modules() if isinstance(m, LAYERS) and p.startswith(stage + ".")}


class _ScaledAttentionOutput(torch.nn.Module):
    """Attention whose output is scaled by a constant before its projection (no residual add between)."""

    def __init__(self) -> None:
        super().__init__()
        self.embed, self.qkv, self.proj = torch.nn.Linear(8, 16), torch.nn.Linear(16, 48), torch.nn.Linear(16, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.qkv(self.embed(x)).chunk(3, dim=-1)
        attention = (q @ k.transpose(-1, -2)).softmax(-1)
        return self.proj((attention @ v) / 4.0)


def test_attention_scaled_by_a_constant_before_its_projection_is_attention_output():
    model = _ScaledAttentionOutput().to("meta").eval()
    assert model_structure(model, torch.zeros(1, 5, 8)).paths(role="attention-output") == ["proj"]
    assert read(model, torch.zeros(1, 5, 8, device="meta")).attention_output == ["proj"]  # the reference, too


def test_a_plain_chain_that_steps_down_twice_after_the_blocks_is_two_stages():
    """selecsls42b's `head`: four convolutions after its blocks, the first and the third of stride 2 (timm's
    feature_info: head.1 at /32, head.3 at /64): two stages, as timm's five feature levels after the stem say."""
    model, size = load_meta("selecsls42b")
    levels = [f["module"] for f in model.feature_info if f["reduction"] > 2]
    containers = ("features.", "head.")

    def level_of(path: str) -> int:  # the first feature level at or after the layer's block, in the same container
        container, index = path.split(".")[0] + ".", int(path.split(".")[1])
        return next(i for i, level in enumerate(levels, 1)
                    if level.startswith(container) and int(level.split(".")[1]) >= index)

    expected: dict[str, set[str]] = {}
    for path, module in model.named_modules():
        if isinstance(module, LAYERS) and path.startswith(containers):
            expected.setdefault(f"stage {level_of(path)}", set()).add(path)
    found = model_structure(model, torch.zeros(1, *size)).stage_layers()
    assert {k: set(v) for k, v in found.items() if k.startswith("stage")} == expected
    assert len(expected) == 5


def test_a_pointwise_convolution_projecting_attention_is_attention_output_and_a_head_fed_a_cut_of_the_input_is_not():
    """visformer_tiny's `Attention` projects `attn @ v` with a 1 x 1 convolution (`proj`): attention output, as a
    linear there would be. efficientvit_m0's cascaded heads feed each head's qkv convolution the head before's output
    plus a chunk of the block's input (made before the block): that sum is no attention output."""
    model, size = load_meta("visformer_tiny")
    expected = {f"{p}.proj" for p, m in model.named_modules() if type(m).__name__ == "Attention"}
    assert len(expected) == 8
    assert set(model_structure(model, torch.zeros(1, *size)).paths(role="attention-output")) == expected
    assert set(read_at_input_size(model, size, None).attention_output) == expected  # the reference, too
    cascaded, size = load_meta("efficientvit_m0")
    heads = {p for p, m in cascaded.named_modules() if ".qkvs." in p and isinstance(m, torch.nn.Conv2d)}
    found = set(model_structure(cascaded, torch.zeros(1, *size)).paths(role="attention-output"))
    assert heads and not heads & found
    assert not heads & set(read_at_input_size(cascaded, size, None).attention_output)


class _ReciprocalOfAttention(_ScaledAttentionOutput):
    """A constant divided by attention's output: a reciprocal, not attention's output scaled."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("one", torch.ones(16))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.qkv(self.embed(x)).chunk(3, dim=-1)
        attention = (q @ k.transpose(-1, -2)).softmax(-1)
        return self.proj(torch.div(self.one, attention @ v))


def test_a_constant_divided_by_attention_output_is_not_attention_output():
    model = _ReciprocalOfAttention().to("meta").eval()
    assert model_structure(model, torch.zeros(1, 5, 8)).paths(role="attention-output") == []
