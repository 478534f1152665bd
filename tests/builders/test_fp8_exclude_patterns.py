"""An `--fp8-exclude` pattern that matches no convolution or linear of the model is refused before any work, with one
line naming it, whether the recipes were named or are the defaults; one that matches a layer (even one its recipe
keeps out by role) is taken."""

from __future__ import annotations

import pytest
import torch

from builders.pytorch.variant_modules import variant_module
from builders.recipes import fp8 as fp8_recipes
from inspector import cli
from sessions.documents.errors import InputError
from sessions.documents.plan import VariantPlan, parse_variants

# torchvision's and timm's ResNet-18 names its first convolution conv1
UNMATCHED = ("--fp8-exclude 'zzz*' matches no layer of resnet18: patterns match the module paths of its convolutions "
             "and linears, such as 'conv1'")


@pytest.mark.parametrize("named", [{"fp8-all"}, set()])
def test_a_pattern_matching_no_layer_is_refused_whoever_named_the_recipes(named):
    variants = parse_variants("fp32,fp8", ["all"], ["layer1.*", "zzz*"])
    with pytest.raises(InputError) as raised:
        fp8_recipes.preflight("resnet18", None, variants, named)
    assert raised.value.message == UNMATCHED


def test_patterns_that_match_a_layer_are_taken_even_one_the_recipe_keeps_out_by_role():
    variants = parse_variants("fp32,fp8", ["all"], ["layer1.*", "conv1"])  # conv1: the stem, kept out by `all`
    kept, _ = fp8_recipes.preflight("resnet18", None, variants, {"fp8-all"})
    assert [v.name for v in kept] == ["fp32", "fp8-all"]


def test_run_refuses_it_on_one_line_before_any_work(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("TRT_INSPECT_HOME", str(tmp_path))
    out = tmp_path / "s.json"
    code = cli.main(["run", "resnet18", "--device", "cpu", "--fp8-exclude", "zzz*", "--variants", "fp32,fp8-all",
                     "--out", str(out)])
    assert code == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == f"trt-inspect: error: {UNMATCHED}"
    assert not out.exists()


def test_a_variant_module_refuses_it_too():
    pytest.importorskip("modelopt")
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.Conv2d(4, 4, 3), torch.nn.Flatten(),
                                torch.nn.LazyLinear(2))
    model(torch.zeros(1, 3, 8, 8))
    with pytest.raises(InputError, match=r"^--fp8-exclude 'head\*' matches no layer of this model: patterns match the "
                                         r"module paths of its convolutions and linears, such as '0'$"):
        variant_module(model.eval(), VariantPlan("fp8", "all", ("head*",)), torch.zeros(2, 3, 8, 8), torch.float32)
