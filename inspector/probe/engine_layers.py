"""Each probed layer as the cuDNN / cuBLASLt engine runs it, alone, with the engine's scales.

- A convolution is the engine's graph of that layer: its `ConvSignature` with the epilogue the engine's lowering fuses
  into it (`engine_epilogues`: its activation, the residual it adds, in the spec) and an fp16 output (`signature`),
  built and its plans timed by the engine (`build_graph`: the plan limit of the default
  `--opt-level`, the engine's timing cache and plan workers), run by the library whose tactic the engine picks for
  it (`conv_library`: cuDNN's plan of that graph, of the same graph scaled by ones or, for a 1x1 convolution, of its
  graph as a matmul, a cuBLASLt GEMM for a 1x1 convolution, ATen's depthwise dispatch in fp16). A
  graph cuDNN refuses leaves the layer to PyTorch in fp16 and without an FP8 kernel, with cuDNN's reason, as the
  engine does; so does what the engine refuses before building (`static_refusals`).
- A linear runs in fp16 as PyTorch's op (as the engine runs an fp16 linear) and in FP8 through the engine's
  `Fp8Linear` (cuBLASLt).
- The activation quantize in front of an FP8 layer is the engine's quantize kernel, channels-last for a convolution.

The scales are the engine's rule (`builders.fp8.format.calibrated_scale`) on the calibration the engine's runs:
the largest |x| of a layer's input over the study's calibration images (max calibration), weights per output channel
or per tensor as the study's default recipe has them, on the model as the engine builds it (`plain_model`: its
BatchNorm folded as the engine folds it, in fp16).

`ask` (what the probe asks for) and the scales are pure and tested on the CPU against the engine's own lowering and
calibration; `choose` runs the engine's choices; `bind` binds the chosen kernels to one layer's weights.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import torch

from builders.engine.build import BuildContext, conv_library, library_graph, make_graphs
from builders.engine.compiler import PlanCompiler
from builders.engine.conv_tactics import library_conv
from builders.engine.graph import TracedModel
from builders.engine.kernels import ConvGraph, ConvLayer, ConvSignature, Fp8Linear, engine_timing_cache
from builders.engine.lowering import Step, lower
from builders.engine.plans import PLANS_PER_OPT_LEVEL
from builders.engine.tactics import GRAPH_LIBRARIES
from builders.engine.weight_residency import gpu_l2_bytes, weights_cold
from builders.fp8.format import calibrated_scale
from builders.fp8.quantizer import make_quantizer
from builders.models.layer_spec import LayerSpec
from builders.pytorch.variant_modules import fold_into_weights
from builders.recipes.fp8 import FP8Recipe, get_recipe
from sessions.documents.options import FP8_LAYERS_KEPT, default
from sessions.documents.plan import DEFAULT_FP8_RECIPES

CONV, GEMM, TORCH = "conv graph", "FP8 GEMM", "PyTorch"  # what runs a layer: Kernel.kind
PRECISIONS = ("fp16", "fp8")


def probe_recipe() -> FP8Recipe:
    """The recipe whose weight scales the probe takes: the study's first default one."""
    return get_recipe(DEFAULT_FP8_RECIPES[0])


@dataclass(frozen=True)
class Kernel:
    """What runs one layer spec in one precision, as the engine would run that layer alone: `kind` CONV (the engine's
    graph of `signature`, run by `library`'s tactic once chosen), GEMM (`Fp8Linear`) or TORCH (the module in fp16).
    `refusal`: why the engine has no kernel of this precision for the layer (an FP8 layer then stays fp16; an fp16
    convolution then runs as PyTorch's op, and `kind` is TORCH)."""

    precision: str
    kind: str
    signature: ConvSignature | None = None
    library: str | None = None
    refusal: str | None = None


def _pair(values: tuple[int, ...]) -> tuple[int, int]:
    height, width = values
    return height, width


def signature(spec: LayerSpec, precision: str, cold_weights: bool) -> ConvSignature:
    """The engine's `ConvSignature` of the convolution `spec`: in `precision`, with the spec's epilogue (what the
    engine fuses after it), an fp16 output, its tactics timed with the weights where the engine's are
    (`cold_weights`: `BuildContext.cold_weights`)."""
    n, c, h, w = spec.input_shape
    return ConvSignature(precision, (n, c, h, w), spec.out_channels, _pair(spec.kernel), _pair(spec.stride),
                         _pair(spec.padding), _pair(spec.dilation), spec.groups, spec.epilogue, False,
                         cold_weights=cold_weights)


@dataclass(frozen=True)
class Epilogue:
    """What the engine fuses into a convolution's graph after the convolution: `words` (activations and "add", in
    order, as `ConvSignature.epilogue`) and, for an add, `residual`: the graph node whose value it adds."""

    words: tuple[str, ...]
    residual: str | None


def engine_epilogues(traced: TracedModel, refused: dict[str, str],
                     value_shapes: dict[str, tuple[int, ...]]) -> dict[str, Epilogue]:
    """Each convolution's epilogue as the engine's lowering fuses it, by module path (a module called twice: its
    first call's, in graph order, as the probe takes its first call's input); none where nothing is fused. What
    follows a convolution does not depend on its precision, so one lowering (`refused`: `static_refusals`, whose
    `@fp16` entries leave a convolution to PyTorch, unfused; `value_shapes`: `graph.record_run`'s, as the engine
    lowers) serves fp16 and FP8."""
    program = lower(traced.nodes, set(), {}, refused, value_shapes=value_shapes)
    order = {node.name: index for index, node in enumerate(traced.nodes)}
    paths = {node.name: node.path for node in traced.nodes}
    first: dict[str, Step] = {}
    for step in sorted((s for s in program.steps if s.kind == "conv"), key=lambda s: order[s.source]):
        first.setdefault(paths[step.source], step)
    return {path: Epilogue(step.epilogue, step.residual) for path, step in first.items() if step.epilogue}


def ask(spec: LayerSpec, precision: str, refused: dict[str, str], name: str, cold_weights: bool) -> Kernel:
    """The kernel the probe asks the engine for, for layer `name` of `spec` in `precision`; `refused` holds what the
    engine refuses before building (`static_refusals`: `name` for FP8, `name@fp16` for fp16); `cold_weights` as the
    engine's context says (`signature`)."""
    reason = refused.get(name if precision == "fp8" else f"{name}@fp16")
    if spec.op == "linear":
        return Kernel(precision, GEMM, refusal=reason) if precision == "fp8" else Kernel(precision, TORCH)
    if reason is None:
        return Kernel(precision, CONV, signature(spec, precision, cold_weights))
    return Kernel(precision, CONV if precision == "fp8" else TORCH, refusal=reason)


def build_graphs(context: BuildContext, kernels: Iterable[Kernel]) -> None:
    """The engine's graph of every convolution kernel not refused, in `context.graphs` (or cuDNN's reason it has
    none), built as the engine builds its own (`make_graphs`); nothing left compiling once they are made (the
    probe times its layers next)."""
    make_graphs(context, [k.signature for k in kernels if k.signature is not None and k.refusal is None])
    context.compiler.withdraw_ahead()


def choose(context: BuildContext, kernel: Kernel) -> Kernel:
    """`kernel` with the engine's choice: a convolution's library (`conv_library`: the fastest of its graph's chosen
    plan, its companion graphs' (scaled, matmul) and the other libraries' tactics the engine offers), or cuDNN's
    refusal of its graph (fp16: PyTorch's op)."""
    if kernel.kind != CONV or kernel.refusal is not None or kernel.signature is None:
        return kernel
    graph = context.graphs[kernel.signature]
    if isinstance(graph, str):
        kind = CONV if kernel.precision == "fp8" else TORCH
        return dataclasses.replace(kernel, kind=kind, signature=None, refusal=graph)
    return dataclasses.replace(kernel, library=conv_library(context, kernel.signature))


def weight_scales(weight: torch.Tensor, per_channel: bool) -> torch.Tensor:
    """A layer's weight scales, one per output channel (dimension 0) or one, as the engine's calibration gives them."""
    w = weight.detach().abs()
    amax = w.amax(dim=tuple(range(1, w.dim()))) if per_channel else w.amax().reshape(1)
    return calibrated_scale(amax.float())


@dataclass
class Bound:
    """One layer's kernel bound to its weights and scales: `run` takes the layer's input (fp16, or FP8 for an FP8
    kernel), then the residual where its epilogue adds one, and returns its fp16 output; `path` says what runs."""

    run: Callable[..., torch.Tensor]
    path: str


def bind(context: BuildContext, kernel: Kernel, module: torch.nn.Module, x_scale: float | None,
         w_scale: torch.Tensor | None) -> Bound | None:
    """`kernel` (chosen) bound to `module`'s weights, with the input and weight scales in FP8; None where it was
    refused in FP8."""
    if kernel.refusal is not None and kernel.kind != TORCH:
        return None
    if kernel.kind == TORCH:  # the module alone: the engine runs what it would have fused as PyTorch ops after it
        words = f"PyTorch {type(module).__name__} (fp16)"
        return Bound(lambda x, *_epilogue_args: module(x), f"{words}: {kernel.refusal}" if kernel.refusal else words)
    weight, bias = module.weight, module.bias
    if kernel.kind == GEMM:
        assert x_scale is not None and w_scale is not None
        gemm = Fp8Linear(weight, bias, x_scale, w_scale)
        return Bound(gemm, gemm.path)
    sig = kernel.signature
    assert sig is not None and kernel.library is not None
    if w_scale is not None and w_scale.numel() == 1:
        w_scale = w_scale.expand(sig.out_channels)
    if kernel.library in GRAPH_LIBRARIES:
        graph = library_graph(context, sig, kernel.library)
        return Bound(bind_graph(context, graph, module, x_scale, w_scale),
                     f"{graph.sig.graph_words()}, plan {graph.choice.name}")
    run = library_conv(kernel.library, sig, weight, bias, x_scale, w_scale, None, context.quantizer)
    return Bound(run, run.path)


def bind_graph(context: BuildContext, graph: ConvGraph, module: torch.nn.Module, x_scale: float | None,
               w_scale: torch.Tensor | None) -> Callable[[torch.Tensor], torch.Tensor]:
    """The engine's `ConvLayer` of `module` on `graph`, on the context's one workspace (`reserve_workspace`)."""
    _grow_workspace(context, graph)
    return ConvLayer(graph, module.weight, module.bias, x_scale, w_scale, None, context.workspace)


def reserve_workspace(context: BuildContext, kernels: Iterable[Kernel]) -> None:
    """The context's workspace grown to what every chosen cuDNN kernel's graph needs, before any is bound: the layers
    share it (as the engine's do), so no CUDA graph captured around one layer holds a workspace freed later."""
    for kernel in kernels:
        if kernel.library in GRAPH_LIBRARIES and kernel.signature is not None:
            _grow_workspace(context, library_graph(context, kernel.signature, kernel.library))


def _grow_workspace(context: BuildContext, graph: ConvGraph) -> None:
    workspace = context.workspace
    if not workspace or graph.workspace_bytes > workspace[0].numel():
        workspace[:1] = [torch.empty(max(graph.workspace_bytes, 1), dtype=torch.uint8, device="cuda")]


def plain_model(reference: torch.nn.Module, conv_bn: list[tuple[str, str]], dtype: torch.dtype) -> torch.nn.Module:
    """A copy of `reference` (fp32) as the engine builds it, whatever the recipe: its layers of derived classes that
    compute their base class's operation made plain, then the `conv_bn` pairs folded (`fold_into_weights`: the
    engine folds every BatchNorm that reads a convolution), in `dtype` (fp16; fp32 where the engine's calibration
    falls back to it)."""
    module = copy.deepcopy(reference)
    fold_into_weights(module, conv_bn)
    return module.to(dtype=dtype).eval()


def engine_context(cudnn: Any, static_input: torch.Tensor, model: torch.nn.Module) -> BuildContext:
    """The engine's build context for the probe's layers of `model`, on the GPU: a cuDNN handle, the plan limit of
    the default `--opt-level`, the engine's timing cache and plan workers (the caller closes them), its quantize
    kernel, where the weights are timed as the engine's build of `model` says (`weights_cold`); the layers' FP8 kept
    (the probe times FP8 wherever the engine has a kernel for it)."""
    quantizer = make_quantizer()
    return BuildContext(cudnn=cudnn, handle=cudnn.create_handle(), static_input=static_input,
                        plan_limit=PLANS_PER_OPT_LEVEL[default("opt_level")], cache=engine_timing_cache(cudnn),
                        compiler=PlanCompiler(torch.cuda.current_device()), quantizer=lambda: quantizer,
                        fp8_layers=FP8_LAYERS_KEPT, cold_weights=weights_cold(model, gpu_l2_bytes()))
