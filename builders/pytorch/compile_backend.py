"""The torch.compile backend: what a PyTorch user would pick instead of TensorRT.

Each base-precision variant's module (BatchNorm folded, as in every variant of a study) is compiled by Inductor
(fused Triton kernels on CUDA, C++ on the CPU) when it is built, then timed like every PyTorch engine: replays of
one CUDA graph on CUDA, eager calls on the CPU. Opt-in (`--backend compile`), never in the default study.

Inductor fuses across module boundaries, so its kernels belong to no module of the model: the engine
is one layer, the compiled graph, and every kernel is attributed to it. FP8 is refused: ModelOpt's
fake quantization does not compile into FP8 kernels, and a simulated row would say nothing new.
"""

from __future__ import annotations

import contextlib
import time

import torch

from builders.backend import BuildResult, register_backend
from builders.models.plain_layers import plain_layers_notes
from builders.pytorch.inductor_workers import end_compile_workers
from builders.pytorch.torch_backend import TorchBackend, TorchEngine
from builders.pytorch.variant_modules import precision_name, state_bytes, variant_module
from profilers.attribution import ROOT
from profilers.device import study_device
from profilers.module_ranges import named_range
from sessions.documents.errors import InputError
from sessions.documents.model import Layer, Variant
from sessions.documents.plan import VariantPlan

GRAPH_KIND = "torch.compile graph (Inductor)"


class CompiledEngine(TorchEngine):
    """A TorchEngine whose module is Inductor's compiled graph: one layer, one range."""

    def layer_ranges(self, kind: str) -> contextlib.AbstractContextManager[None]:
        return named_range(kind, ROOT)

    def layers(self) -> list[Layer]:
        return [Layer(name=ROOT, kind=GRAPH_KIND, precision=precision_name(self.dtype))]  # type: ignore[arg-type]


@register_backend
class CompileBackend(TorchBackend):
    name = "compile"
    label = "torch.compile (Inductor)"
    auto_rank = None  # opt-in: never chosen by `--backend auto`
    auto_devices = frozenset()
    variant_precisions = ("fp32", "fp16", "bf16")  # compile-fp16 beside PyTorch's fp16 in a torch study
    sizes_cpu_plan = False  # Inductor's build and forwards are not the eager ones the CPU plan times
    engine_beside = None

    def builds_done(self) -> None:
        """Inductor's compile workers end once every variant is built: none is alive while the rows are timed."""
        end_compile_workers()

    def build(self, variant: VariantPlan, calibration: torch.Tensor) -> BuildResult:
        if variant.precision == "fp8":
            raise InputError("the compile backend builds fp32, fp16 and bf16 variants; FP8 runs on the torch "
                             "(simulated) and cudnn (real kernels) backends")
        start = time.perf_counter()
        built = variant_module(self._source.module, variant, calibration, torch.float32)  # as every variant's
        compiled = torch.compile(built.module, dynamic=False)
        engine = CompiledEngine(compiled, self.device, built.dtype, self.static_input)
        engine.run_once()  # Inductor compiles on the first call: part of the build, as an engine build is
        study_device(self.device).synchronize()
        result = Variant(
            name=variant.name, backend=self.name, precision=variant.precision, device=self.device,
            build_s=time.perf_counter() - start, artifact_bytes=state_bytes(built.module),
            batchnorm_folded=self._source.batchnorm_folded,
            notes=[(f"compiled by torch.compile (Inductor, torch {torch.__version__}); kernels attributed to the "
                    "whole graph, since Inductor fuses across modules"),
                   *plain_layers_notes(self._source.made_plain)],
        )
        return BuildResult(engine, result)
