"""The squeeze-excitation role of PyTorch layers and modules in `groups` comes from the model's structure, never from
names or class names: a block class named SE..., or a module named `se` that is not one, is not squeeze-excitation;
a squeeze-excitation block under another name is. Expected modules are read from timm's own classes (which the code
under test never names) or from how each test model is written."""

from __future__ import annotations

import pytest
import torch

from benchmarks.recipe_zoo import load_meta
from builders.models.structure import model_structure
from builders.pytorch.torch_backend import module_layer
from sessions.analyses.groups import builtin_rules, role_of
from sessions.documents.model import Layer

timm = pytest.importorskip("timm")
SE = "squeeze-excitation"


def _se_roles(model: torch.nn.Module, example: torch.Tensor) -> set[str]:
    structure = model_structure(model, example)
    rules = builtin_rules()
    return {path for path, module in model.named_modules()
            if path in structure.stages and role_of(module_layer(path, module, structure), rules) == SE}


def _inside(model: torch.nn.Module, classes: tuple[type, ...]) -> set[str]:
    """Every module that is, or is inside, an instance of `classes`."""
    blocks = [path for path, module in model.named_modules() if isinstance(module, classes)]
    return {path for path, _ in model.named_modules() if any(path == b or path.startswith(b + ".") for b in blocks)}


def test_an_se_block_class_is_not_squeeze_excitation_only_its_se_module_is():
    """legacy_seresnet18: `SEResNetBlock` and the root `SENet` start with SE; only `SEModule` and what it holds are."""
    model, size = load_meta("legacy_seresnet18")
    roles = _se_roles(model, torch.zeros(1, *size))
    expected = _inside(model, (timm.models.senet.SEModule,))
    assert expected and roles == expected


def test_selective_kernel_attention_is_squeeze_excitation_under_another_name():
    """skresnet18's `attn` modules pool the branches, then excite them through two 1x1 convolutions: no `se` name."""
    model, size = load_meta("skresnet18")
    roles = _se_roles(model, torch.zeros(1, *size))
    attention = {path for path, m in model.named_modules() if type(m).__name__ == "SelectiveKernelAttn"}
    assert attention and attention <= roles
    assert not any("se" in path.split(".") for path in roles)


class _NamedSe(torch.nn.Module):
    """A convolution block named `se` that reads the full map: not squeeze-excitation, whatever its name."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.se = torch.nn.Sequential(torch.nn.Conv2d(8, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.Conv2d(8, 8, 1))
        self.head = torch.nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.se(self.stem(x)).mean((2, 3)))


def test_a_module_named_se_that_is_not_one_is_not_squeeze_excitation():
    model = _NamedSe().eval()
    assert _se_roles(model, torch.zeros(1, 3, 16, 16)) == set()


def test_without_a_structure_names_still_decide():
    """An engine from files has only its names: `layer1.0.se.fc1` is squeeze-excitation there."""
    layer = Layer(name="layer1.0.se.fc1", kind="CaskConvolution", op="conv", kernel_shape=[1, 1])
    assert role_of(layer, builtin_rules()) == SE


def test_the_engines_layers_named_by_modules_take_the_structures_role_and_function_nodes_none():
    """The cuDNN engine names a layer by the module it runs, a fused region by its modules joined by " + ", and a
    function's step by its graph node: only the first two are the structure's to name."""
    from builders.engine.cudnn_backend import _structure_roles

    model, size = load_meta("legacy_seresnet18")
    structure = model_structure(model, torch.zeros(1, *size))
    se = sorted(_inside(model, (timm.models.senet.SEModule,)) & set(structure.stages))
    other = next(path for path in structure.stages if path.endswith("conv1"))
    layers = [Layer(name=name, kind="step") for name in (" + ".join(se[:3]), other, f"{se[0]} + {other}",
                                                         "layer1_0_se_mean")]
    _structure_roles(layers, structure)
    assert [layer.attrs.get("structure_role") for layer in layers] == [SE, "", "", None]


def test_a_layer_asked_for_in_fp8_that_a_fused_region_covers_takes_the_structures_role_too():
    """skresnet18's attention convolutions are squeeze-excitation by its structure alone (no name says so)."""
    from builders.engine.cudnn_backend import _structure_roles
    from sessions.documents.covers import cover, covered_layers

    model, size = load_meta("skresnet18")
    structure = model_structure(model, torch.zeros(1, *size))
    attention = sorted(path for path, m in model.named_modules() if isinstance(m, torch.nn.Conv2d)
                       and type(model.get_submodule(path.rsplit(".", 1)[0])).__name__ == "SelectiveKernelAttn")
    asked = [Layer(name=path, kind="conv", op="conv", precision="fp16", kernel_shape=[1, 1],
                   attrs={"asked": "fp8", "fallback": "FP8 asked; fp16 chosen by timing"}) for path in attention[:2]]
    region = Layer(name=" + ".join(layer.name for layer in asked), kind="fused",
                   attrs={"covers": [cover(layer, "Inductor") for layer in asked]})
    _structure_roles([region], structure)
    assert len(asked) == 2 and [role_of(layer, builtin_rules()) for layer in covered_layers(region)] == [SE, SE]


def test_the_users_rules_come_before_the_structures_role_and_no_rule_gives_a_role_the_structure_denies(tmp_path):
    from sessions.analyses.groups import load_rules

    rules_file = tmp_path / "rules.toml"
    rules_file.write_text("[[roles]]\nname = \"mine\"\nnames = ['^layer1[.]']\n\n"
                          "[[roles]]\nname = \"squeeze-excitation\"\nkinds = ['Conv2d']\n")
    rules = load_rules(rules_file)
    excited = Layer(name="layer1.0.se.fc1", kind="Conv2d", op="conv", attrs={"structure_role": SE})
    assert role_of(excited, rules) == "mine"
    assert role_of(Layer(name="layer2.0.se.fc1", kind="Linear", op="linear", attrs={"structure_role": SE}),
                   rules) == SE
    denied = Layer(name="layer2.0.conv1", kind="Conv2d", op="conv", kernel_shape=[3, 3], attrs={"structure_role": ""})
    assert role_of(denied, rules) != SE
    assert role_of(Layer(name="layer2.0.conv1", kind="Conv2d", op="conv", kernel_shape=[3, 3]), rules) == SE
