"""The PyTorch backend: each variant's module (builders.pytorch.variant_modules) run eagerly or as a CUDA graph.

Every variant of a study is made from one source module, BatchNorm folded into the convolutions it reads
(`folded_reference`) whatever the variants beside it, and FP8 weights quantized once at build, not on every call.
Each variant records how many BatchNorm layers its graph folded, and its simulated layers run in the base precision,
marked as simulating FP8.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from typing import Any, ClassVar

import torch

from builders.backend import (
    Backend,
    BackendContext,
    BuildResult,
    Capabilities,
    Engine,
    TimingStep,
    backend_class,
    register_backend,
)
from builders.models.catalog import torch_module
from builders.models.plain_layers import plain_layers_notes
from builders.models.structure import ModelStructure, model_structure
from builders.pytorch.graph_capture import GraphTimed
from builders.pytorch.variant_modules import (
    Calibrations,
    bake_fp8_weights,
    folded_reference,
    precision_name,
    state_bytes,
    variant_module,
)
from profilers.device import study_device
from profilers.module_ranges import module_name, module_ranges
from sessions.analyses.captions import SIMULATES
from sessions.documents.errors import MissingEnvironment
from sessions.documents.model import Layer, Variant
from sessions.documents.plan import VariantPlan
from sessions.documents.vocab import STRUCTURE_ROLE, Device


def module_layer(path: str, module: torch.nn.Module, structure: ModelStructure | None = None) -> Layer:
    """The session's layer for one module: a convolution or linear by its type; any other module's op is the
    one its own forward runs (`structure.ops`: a container that splits and concatenates is a concatenation,
    not a convolution); its stage (stem, stage N, head) from `structure.stages` in `attrs["stage"]` and its
    structural role in `attrs[STRUCTURE_ROLE]`."""
    layer = Layer(name=module_name(path), kind=type(module).__name__)
    if structure is not None and path in structure.stages:
        layer.attrs["stage"] = structure.stages[path]
        layer.attrs[STRUCTURE_ROLE] = structure.structure_role(path) or ""
    if isinstance(module, torch.nn.modules.conv._ConvNd):
        layer.op = "conv"
        layer.groups = module.groups
        layer.kernel_shape = list(module.kernel_size)
        layer.in_channels, layer.out_channels = module.in_channels, module.out_channels
        layer.stride = list(module.stride)
    elif isinstance(module, torch.nn.Linear):
        layer.op = "linear"
        layer.in_channels, layer.out_channels = module.in_features, module.out_features
    elif structure is not None:
        layer.op = structure.ops.get(path)
    return layer


class TorchEngine(GraphTimed, Engine):
    def __init__(self, module: torch.nn.Module, device: str, dtype: torch.dtype, static_input: torch.Tensor,
                 quantized: set[str] | None = None, structure: ModelStructure | None = None):
        self.module: torch.nn.Module | None = module
        self.structure = structure  # of the reference model, whose module paths the variant keeps
        self.device = device
        self.dtype = dtype
        self.static_input = static_input.to(device=device, dtype=dtype)
        self.quantized = quantized or set()
        self._step: TimingStep | None = None
        self._graph: torch.cuda.CUDAGraph | None = None
        self._graph_output: torch.Tensor | None = None  # what the captured graph writes into

    @property
    def gpu(self) -> bool:
        """Whether the engine runs on a CUDA GPU (its device object's answer)."""
        return study_device(self.device).gpu

    @torch.no_grad()
    def infer(self, batch: torch.Tensor) -> torch.Tensor:
        """Outputs for `batch`: by a replay of the timed CUDA graph where the shape allows (the same kernels,
        without the host cost of launching them one by one), else eagerly."""
        batch = batch.to(device=self.static_input.device, dtype=self.dtype)
        if self.gpu and batch.shape == self.static_input.shape and self.timing_step().graphed:
            timed_input = self.static_input.clone()
            self.static_input.copy_(batch)
            self.timing_step().run()
            assert self._graph_output is not None
            output = self._graph_output.float().cpu()
            self.static_input.copy_(timed_input)  # timing and tracing keep their own input
            return output
        return self._module()(batch).float().cpu()

    @torch.no_grad()
    def run_once(self) -> None:
        self._module()(self.static_input)

    def _module(self) -> torch.nn.Module:
        if self.module is None:
            raise RuntimeError("engine used after release()")
        return self.module

    def _graph_forward(self) -> Callable[[], Any]:
        module = self._module()
        return lambda: module(self.static_input)

    def layer_ranges(self, kind: str) -> contextlib.AbstractContextManager[None]:
        return module_ranges(self._module(), kind)

    @contextlib.contextmanager
    def layer_outputs(self, visit: Callable[[Any], None]) -> Iterator[None]:
        """Forward hooks on every leaf module: each output tensor (or each of a tuple's) goes to `visit`."""
        def hook(module: torch.nn.Module, inputs: Any, output: Any) -> None:
            for tensor in output if isinstance(output, (tuple, list)) else (output,):
                visit(tensor)

        leaves = [m for m in self._module().modules() if next(m.children(), None) is None]
        handles = [m.register_forward_hook(hook) for m in leaves]
        try:
            yield
        finally:
            for handle in handles:
                handle.remove()

    def layers(self) -> list[Layer]:
        layers = []
        for path, module in self._module().named_modules():
            layer = module_layer(path, module, self.structure)
            layer.precision = precision_name(self.dtype)  # type: ignore[assignment]
            if path in self.quantized:
                layer.quantized = True
                layer.attrs[SIMULATES] = "fp8"
            layers.append(layer)
        return layers

    def release(self) -> None:
        self._step = None
        self._graph = None
        self.module = None
        if self.gpu:
            torch.cuda.empty_cache()


@register_backend
class TorchBackend(Backend):
    name = "torch"
    label = "PyTorch"
    auto_rank = 1  # where TensorRT cannot run
    auto_devices = frozenset({"cuda", "cpu"})
    capabilities = Capabilities(range_kinds=frozenset({"nvtx", "annotation"}))
    sizes_cpu_plan = True
    # the backend whose fp16 and real FP8 variants a default CUDA study adds beside PyTorch's where it runs
    engine_beside: ClassVar[str | None] = "cudnn"

    @classmethod
    def default_variants(cls, device: str) -> str:
        """Where the real engine runs on `device` (its own `unavailable`, the one rule): PyTorch's fp16 beside the
        engine's fp16 and FP8, the question a study answers there (does FP8 pay against fp16); fp32 is the quality
        reference every variant is compared with, not a timed row (`--variants fp32,...` times it). Elsewhere fp32,
        fp16 (bf16 on the CPU) and simulated FP8."""
        beside = cls._engine_beside_here(device)
        if beside is not None:
            prefix = beside.variant_prefix()
            return f"fp16,{prefix}fp16,{prefix}fp8"
        return super().default_variants(device)

    @classmethod
    def _engine_beside_here(cls, device: str) -> type[Backend] | None:
        """The class of the backend named `engine_beside` where it runs on `device` (a GPU), else None."""
        if cls.engine_beside is None or not study_device(device).gpu:
            return None
        try:
            beside = backend_class(cls.engine_beside)
        except MissingEnvironment:  # its module cannot be imported here
            return None
        return beside if beside.unavailable(device) is None else None

    def __init__(self, context: BackendContext):
        model = context.model
        self.device: Device = context.plan.device
        self.static_input = context.static_input
        self._reference = torch_module(model).to(device=self.device, dtype=torch.float32).eval()
        # what every variant is made from, BatchNorm folded, and how many BatchNorm layers it folded: made here,
        # before any variant, so that no variant's build time or peak memory (profilers.memory) holds it
        self._source = folded_reference(self._reference, self.static_input[:1])
        self._calibrations = Calibrations()

    @torch.no_grad()
    def reference(self, batch: torch.Tensor) -> torch.Tensor:
        return self._reference(batch.to(self.device)).float().cpu()

    def engine(self) -> str:
        return f"{self.label} {torch.__version__}"

    def build(self, variant: VariantPlan, calibration: torch.Tensor) -> BuildResult:
        start = time.perf_counter()
        # FP8 runs on an fp16 model on the GPU (as a TensorRT FP8 engine keeps fp16 elsewhere),
        # on an fp32 model on the CPU, where fp16 convolutions are slow.
        fp8_base = torch.float16 if study_device(self.device).gpu else torch.float32
        built = variant_module(self._source.module, variant, calibration, fp8_base, self._calibrations)
        bake_fp8_weights(built)
        structure = model_structure(self._reference, self.static_input)
        engine = TorchEngine(built.module, self.device, built.dtype, self.static_input, built.quantized, structure)
        study_device(self.device).synchronize()
        result = Variant(
            name=variant.name, backend=self.name, precision=variant.precision, device=self.device,
            simulated=built.recipe is not None, recipe=built.recipe, build_s=time.perf_counter() - start,
            artifact_bytes=state_bytes(built.module), batchnorm_folded=self._source.batchnorm_folded,
            notes=[*built.notes, *plain_layers_notes(self._source.made_plain)],
        )
        return BuildResult(engine, result)
