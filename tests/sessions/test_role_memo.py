"""`role_of` remembers roles by layer object, by the fields its rules read, and per kind / op / origin / shape:
none of these memories may give a layer another layer's role."""

from sessions.analyses.groups import load_rules, role_of
from sessions.documents.model import Layer, Tensor


def conv(name: str, groups: int, channels: int) -> Layer:
    return Layer(name=name, kind="CaskConvolution", op="conv", groups=groups, kernel_shape=[3, 3],
                 inputs=[Tensor(name="x", shape=[1, channels, 8, 8])])


def test_layers_of_one_name_and_kind_differ_by_their_convolution_shape():
    rules = load_rules()
    assert role_of(conv("block/conv", 1, 64), rules) == "other convolution"
    assert role_of(conv("block/conv", 64, 64), rules) == "depthwise convolution"  # same name, kind, op and nodes
    assert role_of(conv("block/conv", 4, 64), rules) == "grouped convolution"


def test_a_name_pattern_decides_between_layers_of_one_kind():
    rules = load_rules()
    plain = Layer(name="/layer1/relu/Relu", kind="PointWiseV2", op="elementwise")
    se = Layer(name="/layer1/se/Relu", kind="PointWiseV2", op="elementwise")
    assert role_of(plain, rules) == "pooling / elementwise / activation"
    assert role_of(se, rules) == "squeeze-excitation"  # an earlier rule, by name, ahead of the kind's own role
    assert role_of(plain, rules) == "pooling / elementwise / activation"


def test_a_layer_changed_into_another_object_is_classified_anew():
    rules = load_rules()
    first = Layer(name="a", kind="Reformat", op="reformat")
    assert role_of(first, rules) == "reformat"
    second = Layer(name="a", kind="Reformat", op="reformat", origin="QDQ")
    assert role_of(second, rules) == "quantize / dequantize"  # the origin is one of the fields remembered
