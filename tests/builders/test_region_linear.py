"""A fused region's linear (builders.engine.region_graph.folded_linear): the values of `F.linear`, and one GEMM where
eager PyTorch folds the input's leading dimensions, also where Inductor compiles it. The views and strides come from
SegFormer's decode head at batch 1 (`flatten(2).transpose(1, 2)` of a contiguous NCHW map) and from cases that must
not fold; which ones merge is computed here from the strides, apart from the code under test."""

from __future__ import annotations

import pickle

import pytest
import torch
import torch.fx
import torch.nn.functional as F
from torch._inductor.utils import run_and_get_code

from builders.engine.region_graph import _merge_without_copy, folded_linear


def _transposed(batch: int, channels: int = 24, side: int = 4) -> torch.Tensor:
    return torch.randn(batch, channels, side, side).flatten(2).transpose(1, 2)


CASES = {
    "batch 1, transposed": _transposed(1),
    "batch 3, transposed": _transposed(3),  # no view merges (HW, C) strides (1, HW) with the batch: not folded
    "contiguous 3-d": torch.randn(2, 5, 24),
    "4-d": torch.randn(2, 3, 5, 24),
    "2-d": torch.randn(7, 24),
    "sliced": torch.randn(2, 10, 24)[:, ::2],
}


@pytest.mark.parametrize("name", CASES)
@pytest.mark.parametrize("bias", [True, False])
def test_the_folded_linear_computes_what_f_linear_computes(name, bias):
    x = CASES[name]
    weight, b = torch.randn(8, 24), torch.randn(8) if bias else None
    expected = F.linear(x, weight, b)
    got = folded_linear(x, weight, b)
    assert got.shape == expected.shape
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)


def _eager_folds(x: torch.Tensor) -> bool:
    """Whether eager PyTorch can view `x`'s leading dimensions as one: asked of `view` itself."""
    try:
        x.view(-1, x.shape[-1])
    except RuntimeError:
        return False
    return True


def _compiled_matmuls(x: torch.Tensor) -> tuple[bool, bool]:
    """(a batched matmul, one GEMM) in the code Inductor writes for the folded linear on `x` with weights that do not
    require grad, as a fused region passes them."""
    weight, bias = torch.randn(8, x.shape[-1]), torch.randn(8)
    torch._dynamo.reset()
    with torch.no_grad():
        _, code = run_and_get_code(torch.compile(folded_linear, dynamic=False, fullgraph=True), x, weight, bias)
    text = "\n".join(code)
    return "bmm" in text, ("addmm" in text or "extern_kernels.mm" in text)


@pytest.mark.parametrize("name", CASES)
def test_the_leading_dimensions_merge_exactly_where_eager_views_them_as_a_matrix(name):
    x = CASES[name]
    assert _merge_without_copy(tuple(x.shape[:-1]), tuple(x.stride()[:-1])) == _eager_folds(x)


@pytest.mark.slow
@pytest.mark.parametrize("name", [name for name, x in CASES.items() if x.dim() > 2 and _eager_folds(x)])
def test_inductor_calls_one_gemm_wherever_eager_would_fold(name):
    batched, gemm = _compiled_matmuls(CASES[name])
    assert gemm and not batched


def test_a_function_calling_the_folded_linear_unpickles_and_computes_what_f_linear_computes():
    """A compile worker receives a region's function pickled, and unpickling a GraphModule traces its code again with
    proxies, on which the linear's shape test cannot run: the linear must trace as one call."""
    graph = torch.fx.Graph()
    x, weight, bias = (graph.placeholder(name) for name in ("x", "weight", "bias"))
    graph.output(graph.call_function(folded_linear, (x, weight, bias)))
    rebuilt = pickle.loads(pickle.dumps(torch.fx.GraphModule(torch.nn.Module(), graph)))
    assert [node.target for node in rebuilt.graph.nodes if node.op == "call_function"] == [folded_linear]
    args = CASES["batch 1, transposed"], torch.randn(8, 24), torch.randn(8)
    torch.testing.assert_close(rebuilt(*args), F.linear(*args), rtol=1e-5, atol=1e-5)
