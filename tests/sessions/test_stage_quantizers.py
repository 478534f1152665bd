"""Stage rows hold their quantizers: a layer the model's structure gave no stage, inside a module
that has one (ModelOpt's `input_quantizer` inside a convolution), is in that module's stage, never in a row named
after its path (`layer1`) beside the structure's `stage 1`."""

from __future__ import annotations

from sessions.analyses.groups import builtin_rules, stages_of
from sessions.documents.model import Layer


def _layer(name: str, stage: str | None = None) -> Layer:
    layer = Layer(name=name, kind="TensorQuantizer" if name.endswith("quantizer") else "Conv2d")
    if stage is not None:
        layer.attrs["stage"] = stage
    return layer


def test_quantizers_take_the_stage_of_the_module_they_sit_in():
    layers = [_layer("conv1", "stem"), _layer("layer1.0.conv1", "stage 1"), _layer("layer1.0.conv1.input_quantizer"),
              _layer("layer1.0.conv1.weight_quantizer"), _layer("layer2.0", "stage 2"),
              _layer("layer2.0.downsample.0.input_quantizer"), _layer("fc", "head"), _layer("fc.input_quantizer")]
    expected = ["stem", "stage 1", "stage 1", "stage 1", "stage 2", "stage 2", "head", "head"]
    assert stages_of(layers, builtin_rules()) == expected


def test_a_layer_a_variant_added_takes_the_stage_its_neighbours_in_the_module_share():
    """`blocks.0.0.bn1.1`: the activation left where BatchNorm was folded; its parent `blocks.0.0.bn1` ran no kernel of
    its own (no layer), its sibling convolutions in `blocks.0.0` are in stage 1. `(model)`'s own time spans stages."""
    layers = [_layer("conv_stem", "stem"), _layer("blocks.0.0.conv_dw", "stage 1"), _layer("blocks.0.0.bn1.1"),
              _layer("blocks.0.0.conv_pw", "stage 1"), _layer("blocks.1.0.conv_pw", "stage 2"),
              _layer("blocks.1.0.conv_pw.input_quantizer"), _layer("blocks"), _layer("conv_head", "head")]
    stages = stages_of(layers, builtin_rules())
    assert stages[:6] == ["stem", "stage 1", "stage 1", "stage 1", "stage 2", "stage 2"]
    assert stages[6] not in ("stage 1", "stage 2") and stages[7] == "head"


def test_without_any_structural_stage_the_names_still_say_it():
    layers = [_layer("conv1"), _layer("layer1.0.conv1"), _layer("layer1.0.conv1.input_quantizer")]
    assert stages_of(layers, builtin_rules()) == ["stem", "layer1", "layer1"]
