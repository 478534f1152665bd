"""The cuDNN / cuBLASLt engine's interpreter on the CPU, with PyTorch standing in for its kernels: a conv graph is
the convolution and its fused epilogue, an FP8 GEMM the linear, a quantize layer passes its input on (the stand-in
computes in the input's precision, so a lowering that reads the right operands gives the model's outputs)."""

from __future__ import annotations

from typing import Any

import torch

from builders.cudnn_engine import CudnnEngine
from builders.engine_build import _frees, _torch_runner, constants
from builders.engine_graph import TracedModel
from builders.engine_lowering import Program

STAND_IN_ACTIVATIONS = {"relu": torch.relu, "sigmoid": torch.sigmoid, "swish": torch.nn.functional.silu,
                        "gelu": torch.nn.functional.gelu}


class StandInConvGraph:
    """What a cuDNN conv graph computes, in PyTorch on the CPU: the convolution with its bias, then the fused
    epilogue in order (activations, the residual add)."""

    def __init__(self, conv: torch.nn.Conv2d, epilogue: tuple[str, ...]) -> None:
        self.conv, self.epilogue = conv, epilogue

    def __call__(self, x: torch.Tensor, residual: torch.Tensor | None = None) -> torch.Tensor:
        y = self.conv(x)
        for word in self.epilogue:
            y = y + residual if word == "add" else STAND_IN_ACTIVATIONS[word](y)
        return y


def stand_in_engine(program: Program, traced: TracedModel, static_input: torch.Tensor) -> CudnnEngine:
    """The engine for `program` on the CPU in fp32, each step run by its stand-in."""
    nodes = {node.name: node for node in traced.module.graph.nodes}
    alias = {n.name: n.args[0] for n in traced.nodes if n.kind == "noop" and n.args}
    runners: list[tuple[Any, Any]] = []
    for step in program.steps:
        if step.kind == "conv":
            graph = StandInConvGraph(traced.module.get_submodule(step.name), step.epilogue)
            runners.append((step, lambda env, g=graph, i=step.inputs: g(*(env[n] for n in i))))
        elif step.kind == "linear" and step.precision == "fp8":
            linear = traced.module.get_submodule(step.name)
            runners.append((step, lambda env, m=linear, i=step.inputs[0]: m(env[i])))
        elif step.kind == "quantize":
            runners.append((step, lambda env, i=step.inputs[0]: env[i]))
        else:
            runners.append((step, _torch_runner(traced.module, nodes.get(step.node), step, alias)))
    # a copy: on the CPU in fp32 the engine would keep (and zero between calls) the caller's own tensor
    return CudnnEngine(runners, program, constants(traced, program), _frees(program, traced), static_input.clone(), [],
                       None, "cpu", torch.float32)
