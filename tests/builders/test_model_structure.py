"""Stages and roles from structure, on the models where names misled: dpn68 (timm names the last block of a
stage), dla34 (tree levels; a head of pooling, dropout and a 1 x 1 convolution) and mixnet_s (containers
that split, convolve and concatenate, or add a residual).

Expectations come from the module tree and module attributes (strides, groups, child counts) or shapes
seen by hooks on the top-level children, never from builders.models.structure.
"""

from __future__ import annotations

import pytest
import timm
import torch

from builders.models.structure import ModelStructure, model_structure
from builders.pytorch.torch_backend import module_layer
from builders.recipes.fp8 import select
from sessions.analyses.groups import builtin_rules, role_of


def _meta(name: str) -> torch.nn.Module:
    with torch.device("meta"):
        return timm.create_model(name, pretrained=False).eval()


def _convs(module: torch.nn.Module, prefix: str) -> list[str]:
    return [f"{prefix}.{p}" if p else prefix for p, m in module.named_modules() if isinstance(m, torch.nn.Conv2d)]


def _child_outputs(model: torch.nn.Module, side: int) -> dict[str, tuple[int, ...]]:
    """Output shape of each top-level child on a side x side input (hooks only)."""
    shapes: dict[str, tuple[int, ...]] = {}

    def keep(name: str, output: torch.Tensor) -> None:
        shapes.setdefault(name, tuple(output.shape))

    handles = [child.register_forward_hook(lambda _m, _a, out, name=name: keep(name, out))
               for name, child in model.named_children()]
    with torch.no_grad():
        model(torch.zeros(1, 3, side, side, device="meta"))
    for handle in handles:
        handle.remove()
    return shapes


def _meta_with_structure(name: str) -> tuple[torch.nn.Module, ModelStructure]:
    """A timm model on the meta device and its structure at 224 x 224."""
    model = _meta(name)
    return model, model_structure(model, torch.zeros(1, 3, 224, 224))


@pytest.fixture(scope="module")
def dpn68():
    return _meta_with_structure("dpn68")


def test_dpn68_first_stage_is_the_blocks_before_the_first_downsampling_one(dpn68):
    model, found = dpn68
    blocks = list(model.features.named_children())
    convs = [(name, _convs(block, f"features.{name}")) for name, block in blocks]
    with_convs = [(name, paths) for name, paths in convs if paths]
    stem = with_convs[0][1]  # the input block: one convolution, then pooling
    strided = [name for name, block in blocks
               if any(m.stride != (1, 1) for m in block.modules() if isinstance(m, torch.nn.Conv2d))]
    after_stem = [name for name, _ in with_convs[1:]]
    first_stage = [p for name, paths in with_convs[1:after_stem.index(strided[1]) + 1] for p in paths]
    head = _convs(model.classifier, "classifier")
    total = len(_convs(model, ""))

    assert found.paths(role="stem") == stem
    assert found.paths(role="first-stage") == first_stage
    assert found.paths(role="head") == head
    assert len(select(found, "all", []).quantized) == total - len(stem) - len(head) == 70
    no_first = select(found, "no-se-no-first-stage", [])
    assert set(no_first.by_role["first-stage"]) == set(first_stage)
    assert len(no_first.quantized) == total - len(stem) - len(head) - len(first_stage)


def test_dla34_stages_follow_the_tree_levels_and_the_head_follows_pooling():
    model = _meta("dla34")
    found = model_structure(model, torch.zeros(1, 3, 224, 224))
    shapes = _child_outputs(model, 64)
    children = [name for name, _ in model.named_children()]
    counts = {name: len(_convs(getattr(model, name), name)) for name in children}
    first_block = next(name for name in children if counts[name] > 1)
    spatial = [name for name in children if len(shapes[name]) == 4 and shapes[name][2] > 1]
    head = children[children.index(spatial[-1]) + 1:]
    stem = children[:children.index(first_block)]
    levels = children[children.index(first_block):children.index(spatial[-1]) + 1]
    sides = sorted({shapes[name][2] for name in levels}, reverse=True)

    labels = {name: module_layer(name, module, found).attrs.get("stage") for name, module in model.named_modules()}
    for name in stem:
        assert labels[name] == "stem"
    for name in levels:
        expected = f"stage {sides.index(shapes[name][2]) + 1}"
        inside = [path for path in labels if path == name or path.startswith(name + ".")]
        assert {labels[path] for path in inside} == {expected}, name
    for name in head:
        assert labels[name] == "head", name
    assert found.paths(role="head") == ["fc"] and "fc" in head and "head_drop" in head


@pytest.fixture(scope="module")
def mixnet():
    return _meta_with_structure("mixnet_s")


def test_mixnet_containers_are_not_convolutions(mixnet):
    model, found = mixnet
    rules = builtin_rules()
    roles = {path: role_of(module_layer(path, module, found), rules) for path, module in model.named_modules()}
    convs = {path: m for path, m in model.named_modules() if isinstance(m, torch.nn.Conv2d)}
    conv_roles = {"grouped convolution", "depthwise convolution", "pointwise (1x1) convolution", "other convolution"}

    as_conv = {path for path, role in roles.items() if role in conv_roles}
    assert as_conv <= set(convs)  # no container in a convolution role
    depthwise = [p for p, m in convs.items() if m.groups > 1 and m.groups == m.in_channels]
    assert sorted(p for p, r in roles.items() if r == "depthwise convolution") == sorted(
        p for p in depthwise if roles[p] != "squeeze-excitation")


def test_a_container_takes_the_op_it_runs_itself(mixnet):
    model, found = mixnet
    mixed = [p for p, m in model.named_modules() if type(m).__name__ == "MixedConv2d"]
    residual = [p for p, m in model.named_modules() if getattr(m, "has_skip", False)]
    assert mixed and residual
    assert {found.ops[p] for p in mixed} == {"concat"}  # split, then concatenate
    assert {found.ops[p] for p in residual} == {"elementwise"}  # the residual add
    assert all(module_layer(p, model.get_submodule(p), found).op == "concat" for p in mixed)


class _Wrapped(torch.nn.Module):
    """A module that only calls one child: the trunk below it must be read as if it were not there."""

    def __init__(self, inner: torch.nn.Module) -> None:
        super().__init__()
        self.inner = inner

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.inner(x)


def test_a_wrapper_around_the_trunk_changes_no_stage():
    from tests.structure_reference import read

    net = _meta("resnet18")
    trunk = torch.nn.Sequential(*(getattr(net, n) for n in ("conv1", "bn1", "act1", "maxpool", "layer1", "layer2",
                                                            "layer3", "layer4")))
    head = torch.nn.Sequential(torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), net.fc)
    model = torch.nn.Sequential(_Wrapped(trunk), head).eval()
    found = model_structure(model, torch.zeros(1, 3, 224, 224))
    reading = read(model, torch.zeros(1, 3, 64, 64, device="meta"))
    assert found.stage_layers() == reading.stages
    per_layer = [len(_convs(getattr(net, f"layer{i}"), f"layer{i}")) for i in range(1, 5)]
    assert [len(v) for v in reading.stages.values()] == [1, *per_layer, 1]  # conv1; layer1..layer4; fc


class _InPlaceResidual(torch.nn.Module):
    def __init__(self, channels: int, stride: int) -> None:
        super().__init__()
        self.conv1 = torch.nn.Conv2d(channels, channels, 3, stride, 1)
        self.conv2 = torch.nn.Conv2d(channels, channels, 3, 1, 1)
        self.pool = torch.nn.AvgPool2d(stride) if stride > 1 else torch.nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.conv2(torch.relu(self.conv1(x)))
        out += self.pool(x)  # the merge, in place
        return out


class _RootBlocks(torch.nn.Module):
    """Blocks called one by one from the root (no container of blocks), each merging in place."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = torch.nn.Conv2d(3, 8, 3, 2, 1)
        self.stem2 = torch.nn.Conv2d(8, 8, 3, 1, 1)  # a plain layer before the first block: stem too
        self.block1 = _InPlaceResidual(8, 1)
        self.block2 = _InPlaceResidual(8, 2)
        self.fc = torch.nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.block2(self.block1(self.stem2(self.stem(x))))
        return self.fc(x.mean((2, 3)))


def test_an_in_place_residual_add_makes_a_block():
    from tests.structure_reference import read

    model = _RootBlocks().to("meta").eval()
    found = model_structure(model, torch.zeros(1, 3, 64, 64))
    assert found.stage_layers() == read(model, torch.zeros(1, 3, 64, 64, device="meta")).stages
    assert found.paths(role="stem") == ["stem", "stem2"]
    assert found.paths(role="first-stage") == ["block1.conv1", "block1.conv2"]


class _Residual(torch.nn.Module):
    def __init__(self, channels: int, stride: int = 1, inputs: int | None = None) -> None:
        super().__init__()
        inputs = inputs or channels
        self.conv1 = torch.nn.Conv2d(inputs, channels, 3, stride, 1)
        self.conv2 = torch.nn.Conv2d(channels, channels, 3, 1, 1)
        self.down = torch.nn.Conv2d(inputs, channels, 1, stride) if stride != 1 or inputs != channels else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv2(torch.relu(self.conv1(x)))
        return torch.relu(y + (self.down(x) if self.down is not None else x))


class _FeatureNet(torch.nn.Module):
    """Reads a 16-channel feature map; its stem and first stage keep that shape: only the stem reads the input."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = torch.nn.Conv2d(16, 16, 3, 1, 1)
        self.layer1 = torch.nn.Sequential(_Residual(16), _Residual(16))
        self.layer2 = torch.nn.Sequential(_Residual(32, 2, 16), _Residual(32))
        self.fc = torch.nn.Linear(32, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.layer2(self.layer1(torch.relu(self.stem(x)))).mean((2, 3)))


class _TokensFolded(torch.nn.Module):
    """A token MLP that folds the tokens into the batch before its linears: flat features, not pooled ones."""

    def __init__(self) -> None:
        super().__init__()
        self.patch = torch.nn.Conv2d(3, 32, 4, 4)
        self.fc1, self.fc2 = torch.nn.Linear(32, 64), torch.nn.Linear(64, 32)
        self.head = torch.nn.Linear(32, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.patch(x).flatten(2).transpose(1, 2)
        batch, tokens, channels = x.shape
        y = self.fc2(torch.relu(self.fc1(x.reshape(batch * tokens, channels)))).reshape(batch, tokens, channels)
        return self.head((x + y).mean(1))


def test_a_layer_of_the_inputs_shape_does_not_read_the_input():
    from tests.structure_reference import read

    model = _FeatureNet().to("meta").eval()
    found = model_structure(model, torch.zeros(1, 16, 32, 32))
    assert found.stage_layers() == read(model, torch.zeros(1, 16, 32, 32, device="meta")).stages
    assert found.paths(role="stem") == ["stem"]
    assert found.paths(role="first-stage") == [f"layer1.{b}.conv{c}" for b in (0, 1) for c in (1, 2)]


def test_tokens_folded_into_the_batch_are_not_pooled_features():
    from tests.structure_reference import read

    model = _TokensFolded().to("meta").eval()
    found = model_structure(model, torch.zeros(1, 3, 32, 32))
    assert found.paths(role="squeeze-excitation") == []
    assert read(model, torch.zeros(1, 3, 32, 32, device="meta")).squeeze_excitation == []


class _LocalPool(torch.nn.Module):
    """A 4 x 4 pooling between two convolutions: global on a 4 x 4 map, local on an 8 x 8 one."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1, self.conv2 = torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.Conv2d(8, 8, 1)
        self.fc = torch.nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv2(torch.nn.functional.avg_pool2d(torch.relu(self.conv1(x)), 4))
        return self.fc(y.mean((2, 3)))


def test_a_structure_read_at_one_input_size_is_not_used_for_another():
    """On a 4 x 4 input the pooling is global and `conv2` runs after it, in the head; on 8 x 8 it runs on 2 x 2 maps."""
    model = _LocalPool().eval()
    assert model_structure(model, torch.zeros(1, 3, 4, 4)).paths(role="head") == ["conv2", "fc"]
    assert model_structure(model, torch.zeros(1, 3, 8, 8)).paths(role="head") == ["fc"]
