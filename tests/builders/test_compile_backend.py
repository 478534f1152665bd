"""The torch.compile backend: found by its file name alone, one layer for the compiled graph, FP8 refused.

The compiled module's outputs are checked against eager PyTorch on the same weights and input.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from builders.backend import BackendContext, backend_class, backend_names
from profilers.attribution import ROOT
from sessions.documents.errors import InputError
from sessions.documents.plan import VariantPlan


def tiny_context() -> BackendContext:
    torch.manual_seed(0)
    module = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1),
                                 torch.nn.Flatten(), torch.nn.Linear(8, 5)).eval()
    plan = SimpleNamespace(device="cpu", variants=())
    return BackendContext(plan=plan, model=SimpleNamespace(module=module, name="tiny"),  # type: ignore[arg-type]
                          static_input=torch.randn(2, 3, 16, 16))


def test_the_backend_is_registered_by_its_module_alone():
    assert "compile" in backend_names()
    assert backend_class("compile").name == "compile"
    assert backend_class("compile").auto_rank is None  # opt-in, never the default study


def test_fp8_is_refused_with_one_line():
    backend = backend_class("compile")(tiny_context())
    with pytest.raises(InputError, match="fp32, fp16 and bf16"):
        backend.build(VariantPlan("fp8", "all"), torch.randn(2, 3, 16, 16))


@pytest.mark.slow
def test_the_compiled_graph_is_one_layer_and_computes_what_eager_pytorch_does():
    context = tiny_context()
    backend = backend_class("compile")(context)
    result = backend.build(VariantPlan("fp32"), context.static_input)
    assert [layer.name for layer in result.engine.layers()] == [ROOT]
    assert result.variant.backend == "compile" and result.variant.build_s > 0
    batch = torch.randn(2, 3, 16, 16)
    with torch.no_grad():
        expected = context.model.module(batch)
    assert torch.allclose(result.engine.infer(batch), expected, atol=1e-4)
