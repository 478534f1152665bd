"""TorchEngine's inference for quality: by replaying the timed CUDA graph where the shape allows.

No GPU here: a stand-in replay does what a CUDA graph does (reads the static input buffer, writes the
captured output buffer), and the engine is told it runs on CUDA.
"""

import torch

from builders.backend import TimingStep
from builders.pytorch.torch_backend import TorchEngine


def _graphed_engine() -> tuple[TorchEngine, torch.nn.Module, list[int]]:
    torch.manual_seed(0)
    module = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.Flatten(), torch.nn.LazyLinear(5)).eval()
    engine = TorchEngine(module, "cpu", torch.float32, torch.randn(1, 3, 8, 8))
    replays: list[int] = []

    def replay() -> None:
        replays.append(1)
        with torch.no_grad():
            engine._graph_output.copy_(module(engine.static_input))

    with torch.no_grad():
        engine._graph_output = module(engine.static_input).clone()
    engine._step = TimingStep(replay, True)
    engine.device = "cuda"
    return engine, module, replays


def test_quality_outputs_come_from_the_graph_for_the_given_batch_and_keep_the_timed_input():
    engine, module, replays = _graphed_engine()
    timed = engine.static_input.clone()
    batch = torch.randn(1, 3, 8, 8)
    with torch.no_grad():
        expected = module(batch)
    assert torch.equal(engine.infer(batch), expected)
    assert replays == [1]
    assert torch.equal(engine.static_input, timed)


def test_another_batch_shape_runs_eagerly():
    engine, module, replays = _graphed_engine()
    batch = torch.randn(2, 3, 8, 8)
    with torch.no_grad():
        expected = module(batch)
    assert torch.equal(engine.infer(batch), expected)
    assert replays == []
