import pytest
import timm

from sessions.plan import VariantPlan, parse_variants
from builders.fp8_layouts import select_convolutions
from sessions.errors import InputError


@pytest.fixture(scope="module")
def senet154():
    return timm.create_model("senet154", pretrained=False)


@pytest.mark.parametrize("layout, quantized", [("all", 254), ("no-se", 154), ("no-se-no-layer1", 144)])
def test_senet154_layouts_match_the_original_study(senet154, layout, quantized):
    selection = select_convolutions(senet154, layout, [])
    assert len(selection.quantized) == quantized
    assert len(selection.quantized) + len(selection.excluded) == 257
    assert selection.stem == ["conv1.0", "conv1.3", "conv1.6"]


def test_exclusion_patterns_apply_on_top_of_the_layout(senet154):
    selection = select_convolutions(senet154, "all", ["layer4.*"])
    assert not any(path.startswith("layer4.") for path in selection.quantized)
    assert len(selection.quantized) < 254


def test_unknown_layout_is_a_user_error(senet154):
    with pytest.raises(InputError, match="unknown FP8 layout 'some'"):
        select_convolutions(senet154, "some", [])


def test_variant_names_expand_layouts():
    specs = parse_variants("fp16,fp8", ["all", "no-se"], ["*.se.*"])
    assert [s.name for s in specs] == ["fp16", "fp8-all", "fp8-no-se"]
    assert specs[1].exclude == ("*.se.*",)
    assert parse_variants("fp8-no-se-no-layer1,fp16,fp16", [], []) == (VariantPlan("fp8", "no-se-no-layer1"), VariantPlan("fp16"))
    with pytest.raises(InputError, match="unknown variant 'int3'"):
        parse_variants("fp16,int3", ["all"], [])
