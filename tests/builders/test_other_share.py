"""The engine column of benchmarks/other_share.py reads a convolution's role from the same geometry the PyTorch
column's layers hold (groups, kernel shape, channels): a depthwise, a pointwise and a grouped convolution are named
so, not "other convolution". The model is built here with one convolution of each shape."""

from __future__ import annotations

import torch

from benchmarks.other_share import lowered_roles


def test_the_engine_column_names_each_convolution_by_its_shape():
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1),  # spatial
        torch.nn.Conv2d(8, 8, 3, padding=1, groups=8),  # depthwise
        torch.nn.Conv2d(8, 16, 1),  # pointwise
        torch.nn.Conv2d(16, 16, 3, padding=1, groups=4),  # grouped
    ).eval()
    total, roles = lowered_roles(model, torch.randn(1, 3, 16, 16))
    assert {"depthwise convolution", "pointwise (1x1) convolution", "grouped convolution",
            "other convolution"} <= set(roles)
    assert total == sum(roles.values()) > 0
