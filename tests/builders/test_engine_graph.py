"""The engine's graph capture (builders.engine.graph, builders.engine.shaped_tracer) on small models: shapes read while
tracing are values, and a module whose forward branches on tensor data runs as one PyTorch call, with the reason."""

from __future__ import annotations

import torch

from builders.engine.graph import trace
from builders.engine.lowering import lower
from tests.engine_stand_in import stand_in_engine


class ShapeReading(torch.nn.Module):
    """Unpacks a shape into a star-built view shape and iterates a tuple: what torch.fx alone cannot trace."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(16, 32)
        self.heads = 4

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, _, height, width = x.shape
        tokens = x.flatten(2).transpose(1, 2)
        projected = self.proj(tokens)
        split = projected.view(*projected.shape[:-1], self.heads, -1)
        parts = [part for part in split.unbind(2)]
        return torch.stack(parts, 1).sum(1).transpose(1, 2).reshape(batch, -1, height, width)


class DataBranch(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inner = torch.nn.Linear(32, 32)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y: torch.Tensor = self.inner(x)
        return y if x.sum() > 0 else -y  # control flow on values: no tracer follows it


class WithBranch(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.first = torch.nn.Linear(16, 32)
        self.branch = DataBranch()
        self.last = torch.nn.Linear(32, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y: torch.Tensor = self.last(self.branch(self.first(x.flatten(1))))
        return y


def test_shapes_read_while_tracing_are_values_and_the_linear_stays_a_module_call() -> None:
    model = ShapeReading().eval()
    x = torch.randn(2, 16, 4, 4)
    traced = trace(model, x)
    assert traced.leaves == {}
    assert [n.path for n in traced.nodes if n.kind == "linear"] == ["proj"]
    with torch.no_grad():
        torch.testing.assert_close(traced.module(x), model(x))


def test_a_module_branching_on_data_is_one_pytorch_call_with_the_reason() -> None:
    model = WithBranch().eval()
    torch.manual_seed(0)
    x = torch.randn(3, 1, 4, 4)  # images: the engine takes N x C x H x W
    traced = trace(model, x)
    assert list(traced.leaves) == ["branch"] and "branch" not in traced.leaves["branch"]
    assert traced.leaves["branch"]  # torch.fx's own words
    program = lower(traced.nodes, {"first", "branch.inner", "last"}, {}, {})
    steps = {step.name: step for step in program.steps}
    assert [s.name for s in program.steps if s.kind == "linear"] == ["first", "last"]  # branch.inner is not lowered
    assert steps["branch"].kind == "torch" and steps["branch"].fallback == traced.leaves["branch"]
    with torch.no_grad():
        torch.testing.assert_close(stand_in_engine(program, traced, x).infer(x), model(x))
