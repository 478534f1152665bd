"""The cuDNN / cuBLASLt engine at run time: a lowered program's steps run in order on the static input, each
in a range of its own while traced, eagerly or as one CUDA graph."""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import torch

from builders.backend import Engine, TimingStep
from builders.engine.lowering import Program, Step
from builders.pytorch.graph_capture import GraphTimed
from profilers.module_ranges import named_range
from sessions.documents.model import Layer

if TYPE_CHECKING:
    from builders.engine.twin import Twin


class CudnnEngine(GraphTimed, Engine):
    """A lowered program bound to the study's static input; other batch sizes are padded to it."""

    def __init__(self, runners: list[tuple[Step, Callable[[dict[str, Any]], Any]]], program: Program,
                 consts: dict[str, Any], frees: list[list[str]], static_input: torch.Tensor, layers: list[Layer],
                 simulated: Twin | None, device: str = "cuda", dtype: torch.dtype = torch.float16) -> None:
        self.runners, self.program, self.consts, self.frees = runners, program, consts, frees
        self.device, self.dtype = device, dtype  # the CPU and fp32 only where tests run a lowering with stand-ins
        self.static_input = static_input.to(device=device, dtype=dtype).contiguous(memory_format=torch.channels_last)
        self._layers, self.simulated = layers, simulated
        self._range_kind: str | None = None
        self._step: TimingStep | None = None
        self._graph: torch.cuda.CUDAGraph | None = None
        self._graph_output: torch.Tensor | None = None

    def _forward(self, x: torch.Tensor, seen: Callable[[str, Any], None] | None = None) -> torch.Tensor:
        env: dict[str, Any] = dict(self.consts)
        env[self.program.input] = x
        if seen is not None:
            for name, value in env.items():
                seen(name, value)
        for (step, run), free in zip(self.runners, self.frees, strict=False):
            if self._range_kind:
                with named_range(self._range_kind, step.name):
                    env[step.node] = run(env)
            else:
                env[step.node] = run(env)
            if seen is not None:
                seen(step.node, env[step.node])
            for name in free:
                env.pop(name, None)
        return env[self.program.output]

    @torch.no_grad()
    def observe(self, seen: Callable[[str, Any], None]) -> None:
        """One eager forward on the static input that shows `seen` every value by name as it is made (the input and
        the constants first); values are freed as in any forward, so `seen` keeps what it needs of them."""
        self._forward(self.static_input, seen)

    def rebind(self, program: Program, runners: list[tuple[Step, Callable[[dict[str, Any]], Any]]],
               frees: list[list[str]], layers: list[Layer]) -> None:
        """Runs `program` (its steps bound to `runners`, `frees` after each) in place of the one built, before the
        engine is first timed or captured (a fused tactic chosen by timing replaces several steps)."""
        if self._step is not None:
            raise RuntimeError("an engine's steps are replaced before it is timed, never after")
        self.program, self.runners, self.frees, self._layers = program, runners, frees, layers

    @torch.no_grad()
    def infer(self, batch: torch.Tensor) -> torch.Tensor:
        count = batch.shape[0]
        size = self.static_input.shape[0]
        outputs = []
        for chunk in batch.split(size):
            timed_input = self.static_input.clone()
            self.static_input.zero_()
            self.static_input[: chunk.shape[0]].copy_(chunk.to(device=self.device, dtype=self.dtype))
            if self.timing_step().graphed:
                self.timing_step().run()
                assert self._graph_output is not None
                output = self._graph_output
            else:
                output = self._forward(self.static_input)
            outputs.append(output[: chunk.shape[0]].float().cpu())
            self.static_input.copy_(timed_input)
        return torch.cat(outputs)[:count]

    @torch.no_grad()
    def run_once(self) -> None:
        self._forward(self.static_input)

    def _graph_forward(self) -> Callable[[], Any]:
        return lambda: self._forward(self.static_input)

    @contextlib.contextmanager
    def _ranges(self, kind: str) -> Iterator[None]:
        self._range_kind = kind
        try:
            yield
        finally:
            self._range_kind = None

    def layer_ranges(self, kind: str) -> contextlib.AbstractContextManager[None]:
        return self._ranges(kind)

    def layers(self) -> list[Layer]:
        return [copy.deepcopy(layer) for layer in self._layers]

    def simulated_infer(self, batches: list[torch.Tensor]) -> torch.Tensor | None:
        """The simulated (ModelOpt) variant of the same recipe on `batches`, for the agreement check (Twin.infer)."""
        return self.simulated.infer(batches, self.static_input.device) if self.simulated is not None else None

    def release(self) -> None:
        self._step = self._graph = self._graph_output = None
        self.runners, self.consts, self.simulated = [], {}, None
        torch.cuda.empty_cache()
