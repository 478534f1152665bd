"""Models built on the meta device give the structure the real model gives; in-place value ops are skipped there."""

from __future__ import annotations

import pytest
import torch

from builders.models.catalog import load_model
from builders.models.meta_build import meta_device
from builders.models.structure import ModelStructure, model_structure


def canonical(structure: ModelStructure) -> tuple:
    """The structure with each shared-input key replaced by its order of first appearance (keys are tensor ids)."""
    keys: dict[int, int] = {}
    layers = [(n.path, n.op, n.input_shape, keys.setdefault(n.input_key, len(keys)), sorted(n.roles), n.kernel)
              for n in structure.layers]
    return layers, structure.conv_bn, structure.stages, structure.ops, structure.never_ran


@pytest.mark.parametrize("name", ["test_resnet", "test_vit", "test_efficientnet", "test_convnext", "test_byobnet",
                                  "test_nfnet", "hf:segformer-b0", "hf:resnet"])
def test_the_structure_on_the_meta_device_is_the_real_models(name):
    meta = load_model(name, construct=meta_device)
    assert all(p.is_meta for p in meta.module.parameters())
    with meta_device():
        on_meta = model_structure(meta.module, torch.zeros(1, *meta.input_size))
    real = load_model(name)
    assert not any(p.is_meta for p in real.module.parameters())
    assert canonical(on_meta) == canonical(model_structure(real.module, torch.zeros(1, *real.input_size)))


def test_only_value_ops_on_meta_tensors_are_skipped():
    real = torch.zeros(3)
    with meta_device():
        made = torch.empty(2, 3)
        made.t_()
        made.unsqueeze_(0)
        made.normal_()
        real.add_(1)
        normalised = torch.nn.functional.batch_norm(torch.empty(1, 4, 5, 5), torch.zeros(4), torch.ones(4))
    assert made.is_meta and made.shape == (1, 3, 2)
    assert torch.equal(real, torch.ones(3))
    assert normalised.is_meta and normalised.shape == (1, 4, 5, 5)
    assert torch.get_default_device().type == "cpu"
