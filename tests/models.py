"""Small models the tests build (no weights downloaded)."""

from __future__ import annotations

import timm
import torch


def resnet_with_random_batchnorm() -> torch.nn.Module:
    """timm's test_resnet (eval) with random BatchNorm statistics and affine terms, so folding changes the kernels."""
    torch.manual_seed(0)
    model = timm.create_model("test_resnet", pretrained=False).eval()
    for module in model.modules():
        if isinstance(module, torch.nn.BatchNorm2d):
            module.running_mean.uniform_(-1, 1)
            module.running_var.uniform_(0.5, 4)
            module.weight.data.uniform_(-2, 2)
            module.bias.data.uniform_(-1, 1)
    return model
