"""The cuDNN / cuBLASLt engine's interpreter on the CPU, with PyTorch standing in for its kernels: a conv graph is
the convolution and its fused epilogue, an FP8 GEMM the linear, a quantize layer passes its input on (the stand-in
computes in the input's precision, so a lowering that reads the right operands gives the model's outputs). With
the FP8 layers' scales, FP8 GEMMs and quantize layers run the engine's own kernels instead (torch._scaled_mm with
per-tensor scales runs on the CPU), in fp16 as the engine does."""

from __future__ import annotations

from typing import Any, cast

import torch

from builders.engine.build import _frees, _torch_runner, constants
from builders.engine.graph import TracedModel
from builders.engine.kernels import Fp8Linear
from builders.engine.lowering import Program
from builders.engine.runtime import CudnnEngine
from builders.fp8.quantizer import quantize

STAND_IN_ACTIVATIONS = {"relu": torch.relu, "sigmoid": torch.sigmoid, "swish": torch.nn.functional.silu,
                        "gelu": torch.nn.functional.gelu}


class StandInConvGraph:
    """What a cuDNN conv graph computes, in PyTorch on the CPU: the convolution with its bias, then the fused
    epilogue in order (activations, the residual add)."""

    def __init__(self, conv: torch.nn.Conv2d, epilogue: tuple[str, ...]) -> None:
        self.conv, self.epilogue = conv, epilogue

    def __call__(self, x: torch.Tensor, residual: torch.Tensor | None = None) -> torch.Tensor:
        y: torch.Tensor = self.conv(x)
        for word in self.epilogue:
            if word == "add":
                assert residual is not None, "an add epilogue reads a residual"
                y = y + residual
            else:
                y = STAND_IN_ACTIVATIONS[word](y)
        return y


def stand_in_engine(program: Program, traced: TracedModel, static_input: torch.Tensor,
                    scales: dict[str, tuple[float, torch.Tensor]] | None = None) -> CudnnEngine:
    """The engine for `program` on the CPU in fp32, each step run by its stand-in; with `scales` (builders.engine.twin's
    scales_of) in fp16, FP8 GEMMs and quantize layers real."""
    nodes = {node.name: node for node in traced.module.graph.nodes}
    alias = {n.name: n.args[0] for n in traced.nodes if n.kind == "noop" and n.args}
    runners: list[tuple[Any, Any]] = []
    for step in program.steps:
        if step.kind == "conv":
            graph = StandInConvGraph(cast(torch.nn.Conv2d, traced.module.get_submodule(step.name)), step.epilogue)
            runners.append((step, lambda env, g=graph, i=step.inputs: g(*(env[n] for n in i))))
        elif step.kind == "linear" and step.precision == "fp8":
            linear = cast(torch.nn.Linear, traced.module.get_submodule(step.name))
            gemm = Fp8Linear(linear.weight, linear.bias, *scales[step.name]) if scales else linear
            runners.append((step, lambda env, m=gemm, i=step.inputs[0]: m(env[i])))
        elif step.kind == "quantize" and scales:
            assert step.scale_of is not None
            inverse = torch.tensor(1.0 / scales[step.scale_of][0])
            runners.append((step, lambda env, v=inverse, i=step.inputs[0]: quantize(env[i], v, False)))
        elif step.kind == "quantize":
            runners.append((step, lambda env, i=step.inputs[0]: env[i]))
        else:
            runners.append((step, _torch_runner(traced.module, nodes.get(step.node), step, alias)))
    # a copy: on the CPU in fp32 the engine would keep (and zero between calls) the caller's own tensor
    return CudnnEngine(runners, program, constants(traced, program), _frees(program, traced), static_input.clone(), [],
                       None, "cpu", torch.float16 if scales else torch.float32)
