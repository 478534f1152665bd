"""One inference captured in a CUDA graph, as every engine's timer replays it (eager where capture fails)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from builders.backend import TimingStep
from profilers.device import study_device
from sessions.documents.errors import first_line


@dataclass
class Captured:
    step: TimingStep  # what the timer repeats
    graph: torch.cuda.CUDAGraph | None  # kept alive while the engine replays it; None where capture failed
    output: Any  # what the graph's replays write into


def capture_graph(forward: Callable[[], Any], eager: Callable[[], None]) -> Captured:
    """`forward` (one inference on the engine's static input) captured on CUDA after one eager call on a side
    stream (the lazy set-up capture must not see); where capture fails, `eager` is timed instead, with the reason."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    try:
        with torch.cuda.stream(side):
            forward()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            output = forward()
    except RuntimeError as exc:
        torch.cuda.synchronize()
        return Captured(TimingStep(eager, False, f"CUDA graph capture failed, timed eagerly: {first_line(exc)}"),
                        None, None)
    return Captured(TimingStep(graph.replay, True), graph, output)


class GraphTimed:
    """An engine's `timing_step`: its forward (`_graph_forward`) captured as one CUDA graph on CUDA, made at the first
    ask and kept (`_graph`, and `_graph_output`, what the replays write into), its eager `run_once` elsewhere.
    The engine sets `device`, and `_step`, `_graph`, `_graph_output` to None before the first ask."""

    device: str
    _step: TimingStep | None
    _graph: torch.cuda.CUDAGraph | None
    _graph_output: Any

    def run_once(self) -> None:
        raise NotImplementedError

    def _graph_forward(self) -> Callable[[], Any]:
        """One inference on the engine's static input, as the graph captures it."""
        raise NotImplementedError

    def timing_step(self) -> TimingStep:
        if self._step is None:
            self._step = self._capture() if study_device(self.device).gpu else TimingStep(self.run_once, False)
        return self._step

    @torch.no_grad()
    def _capture(self) -> TimingStep:
        captured = capture_graph(self._graph_forward(), self.run_once)
        self._graph, self._graph_output = captured.graph, captured.output
        return captured.step
