"""FP8 recipes: roles found from the model's structure, counts of the seeds' studies, per-channel folded scales."""

import pytest
import timm
import torch

from builders.models.structure import model_structure
from builders.recipes.fp8 import check_selections, get_recipe, recipe_names, select
from sessions.documents.errors import InputError
from sessions.documents.plan import VariantPlan, parse_variants


def structure(name: str):
    model = timm.create_model(name, pretrained=False).eval()
    return model, model_structure(model, torch.zeros(1, *model.pretrained_cfg["input_size"]))


@pytest.fixture(scope="module")
def resnet18():
    return structure("resnet18")


@pytest.fixture(scope="module")
def seresnext():
    return structure("seresnext26d_32x4d")


@pytest.mark.slow
@pytest.mark.parametrize("recipe, quantized", [("all", 254), ("no-se", 154), ("no-se-no-layer1", 144),
                                               ("no-se-no-first-stage", 144)])
def test_senet154_recipes_match_the_original_study(recipe, quantized):
    _, found = senet154()
    selection = select(found, recipe, [])
    assert len(selection.quantized) == quantized
    assert len(found.paths(op="conv")) == 257
    assert found.paths(role="stem") == ["conv1.0", "conv1.3", "conv1.6"]
    assert found.paths(role="head") == ["fc"]


_SENET: list = []


def senet154():
    if not _SENET:
        _SENET.append(structure("senet154"))
    return _SENET[0]


def test_roles_come_from_structure_not_names(seresnext):
    _, found = seresnext
    assert found.paths(role="first-stage")[0] == "layer1.0.conv1" and found.stages["layer1"] == "stage 1"
    assert found.paths(role="stem") == ["conv1.0", "conv1.3", "conv1.6"]
    assert len(found.paths(role="squeeze-excitation")) == 16  # fc1 and fc2 of 8 blocks, fed 1 x 1 maps
    assert all(".se." in p for p in found.paths(role="squeeze-excitation"))
    counts = [len(select(found, r, []).quantized) for r in ("all", "no-se", "no-se-no-layer1")]
    assert counts == [44, 28, 21]


def test_regnet_stages_found_without_layer_names():
    _, found = structure("regnety_002")  # stages s1..s4: the failing model
    assert found.stages["s1"] == "stage 1" and found.stages["s4"] == "stage 4"
    assert found.paths(role="stem") == ["stem.conv"]
    assert len(select(found, "all", []).quantized) == 69


def test_vit_attention_output_projection_is_found():
    _, found = structure("vit_tiny_patch16_224")
    assert found.paths(role="attention-output") == [f"blocks.{i}.attn.proj" for i in range(12)]
    assert len(select(found, "encoder-linears", []).quantized) == 36  # qkv, fc1, fc2 of 12 blocks


def test_exclusion_patterns_apply_on_top_of_the_recipe(seresnext):
    _, found = seresnext
    selection = select(found, "all", ["layer4.*"])
    assert not any(path.startswith("layer4.") for path in selection.quantized)
    assert selection.by_pattern and all(p.startswith("layer4.") for p in selection.by_pattern)
    assert len(selection.quantized) == 44 - len(selection.by_pattern)


def test_no_se_on_a_model_without_se_says_so(resnet18):
    _, found = resnet18
    named = {"fp8-all": select(found, "all", []), "fp8-no-se": select(found, "no-se", [])}
    with pytest.raises(InputError, match="fp8-no-se: resnet18 has no squeeze-excitation layers"):
        check_selections("resnet18", found, named)


def test_same_selection_twice_and_empty_selection_are_refused(resnet18):
    _, found = resnet18
    same = {"fp8-all": select(found, "all", []), "fp8-x": select(found, "all", [])}
    with pytest.raises(InputError, match="fp8-x quantizes the same 19 layers of resnet18 as fp8-all"):
        check_selections("resnet18", found, same)
    with pytest.raises(InputError, match="fp8-encoder-linears quantizes no layer of resnet18"):
        check_selections("resnet18", found, {"fp8-encoder-linears": select(found, "encoder-linears", [])})


def test_shipped_weight_scales_and_the_other_choice_by_suffix(resnet18):
    """Per-channel weights by default (the SENet study's), per-tensor for the SegFormer study's linears."""
    assert {name: get_recipe(name).weights for name in recipe_names()} == {
        "all": "per-channel", "no-se": "per-channel", "no-se-no-first-stage": "per-channel",
        "pointwise": "per-channel", "encoder-linears": "per-tensor"}
    per_tensor = get_recipe("no-se-no-layer1-per-tensor")
    assert (per_tensor.name, per_tensor.weights) == ("no-se-no-first-stage-per-tensor", "per-tensor")
    assert per_tensor.exclude_roles == get_recipe("no-se-no-first-stage").exclude_roles
    assert get_recipe("encoder-linears-per-channel").weights == "per-channel"
    with pytest.raises(InputError, match="unknown FP8 recipe 'all-per-block'"):
        get_recipe("all-per-block")
    _, found = resnet18  # the same layers with other scales is a variant of its own
    check_selections("resnet18", found, {"fp8-all": select(found, "all", []),
                                         "fp8-all-per-tensor": select(found, "all-per-tensor", [])})


def test_unknown_recipe_is_a_user_error():
    with pytest.raises(InputError, match="unknown FP8 recipe 'some'"):
        get_recipe("some")
    assert get_recipe("no-se-no-layer1").name == "no-se-no-first-stage"
    assert recipe_names() == ["all", "no-se", "no-se-no-first-stage", "pointwise", "encoder-linears"]


def test_variant_names_expand_recipes():
    specs = parse_variants("fp16,fp8", ["all", "no-se"], ["*.se.*"])
    assert [s.name for s in specs] == ["fp16", "fp8-all", "fp8-no-se"]
    assert specs[1].exclude == ("*.se.*",)
    assert parse_variants("fp8-no-se-no-layer1,fp16,fp16", [], []) == (VariantPlan("fp8", "no-se-no-layer1"),
                                                                        VariantPlan("fp16"))
    with pytest.raises(InputError, match="unknown variant 'int3'"):
        parse_variants("fp16,int3", ["all"], [])


def test_resolve_refuses_a_named_recipe_and_drops_a_default_one_with_a_note():
    from inspector.request import StudyRequest
    from inspector.resolve import resolve

    base = {"model": "resnet18", "device": "cpu", "tracer": "none"}
    with pytest.raises(InputError, match="fp8-no-se: resnet18 has no squeeze-excitation layers"):
        resolve(StudyRequest(**base, variants="fp32,fp8", fp8_recipes=("all", "no-se")))
    run = resolve(StudyRequest(**base, variants="fp32,fp8"))  # defaults: all and no-se
    assert [v.name for v in run.plan.variants] == ["fp32", "fp8-all"]
    assert any(note.startswith("left out: fp8-no-se: resnet18 has no squeeze-excitation") for note in run.notes)
    # another recipe named beside the bare `fp8` leaves the defaults defaults; naming no-se itself is refused
    beside = resolve(StudyRequest(**base, variants="fp32,fp8,fp8-pointwise"))
    assert [v.name for v in beside.plan.variants] == ["fp32", "fp8-all", "fp8-pointwise"]
    with pytest.raises(InputError, match="fp8-no-se: resnet18 has no squeeze-excitation layers"):
        resolve(StudyRequest(**base, variants="fp32,fp8,fp8-no-se"))
    with pytest.raises(InputError, match="fp8-no-se: resnet18 has no squeeze-excitation layers"):
        resolve(StudyRequest(**base, fp8_recipes=("no-se",)))


def test_pointwise_takes_the_1x1_convolutions_by_their_kernel_not_their_names(seresnext):
    model, found = seresnext
    pointwise = {path for path, m in model.named_modules()
                 if isinstance(m, torch.nn.Conv2d) and m.kernel_size == (1, 1)} - set(found.paths(role="stem"))
    selection = select(found, "pointwise", [])
    assert set(selection.quantized) == pointwise and len(pointwise) > 30
    assert not [p for p in selection.quantized if isinstance(model.get_submodule(p), torch.nn.Linear)]
