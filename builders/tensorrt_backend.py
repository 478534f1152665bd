"""The TensorRT backend: ONNX from the PyTorch variants, strongly typed engines, cached by content.

It has not run here (TensorRT cannot be installed on these machines): it is written against the
documented 10.x / 11.x Python API, with every version difference in `builders.trt_compat`. Its layer
information goes through the same reader as imported trtexec files (`profilers.trt_files`).
"""

from __future__ import annotations

import contextlib
import hashlib
import time

import numpy as np
import torch

from builders import trt_compat
from builders.backend import Backend, BackendContext, BuildResult, Capabilities, Engine, TimingStep, register_backend
from builders.onnx_export import file_hash
from builders.onnx_source import variant_onnx
from profilers.trt_files import normalize_name, parse_layer_info
from sessions.errors import MissingEnvironment
from sessions.model import Layer, Variant
from sessions.paths import cache_dir
from sessions.plan import VariantPlan

NP_TO_TORCH = {
    "float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16, "int32": torch.int32, "int64": torch.int64,
}


class TensorRTEngine(Engine):
    def __init__(self, trt, plan: bytes, static_input: torch.Tensor):
        self.trt = trt
        self.plan = plan
        runtime = trt.Runtime(trt.Logger(trt.Logger.WARNING))
        self.engine = runtime.deserialize_cuda_engine(plan)
        self.context = self.engine.create_execution_context()
        self.buffers: dict[str, torch.Tensor] = {}
        for name in trt_compat.io_tensor_names(self.engine):
            shape = tuple(self.engine.get_tensor_shape(name))
            dtype = NP_TO_TORCH[np.dtype(trt.nptype(self.engine.get_tensor_dtype(name))).name]
            self.buffers[name] = torch.empty(shape, dtype=dtype, device="cuda")
            self.context.set_tensor_address(name, self.buffers[name].data_ptr())
        self.input_name = next(n for n in self.buffers if trt_compat.is_input(trt, self.engine, n))
        self.output_name = next(n for n in self.buffers if n != self.input_name)
        self.batch = self.buffers[self.input_name].shape[0]
        self.buffers[self.input_name].copy_(static_input.to(self.buffers[self.input_name].dtype))
        self._step: TimingStep | None = None

    def run_once(self) -> None:
        self.context.execute_async_v3(torch.cuda.current_stream().cuda_stream)

    @torch.no_grad()
    def infer(self, batch: torch.Tensor) -> torch.Tensor:
        outputs = []
        for chunk in batch.split(self.batch):
            padded = torch.cat([chunk, chunk[-1:].expand(self.batch - len(chunk), *chunk.shape[1:])]) if len(chunk) < self.batch else chunk
            saved = self.buffers[self.input_name].clone()
            self.buffers[self.input_name].copy_(padded.to(self.buffers[self.input_name].dtype))
            self.run_once()
            torch.cuda.synchronize()
            outputs.append(self.buffers[self.output_name][: len(chunk)].float().cpu())
            self.buffers[self.input_name].copy_(saved)
        return torch.cat(outputs)

    def timing_step(self) -> TimingStep:
        if self._step is None:
            self.run_once()  # TensorRT needs one enqueue before capture
            torch.cuda.synchronize()
            try:
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph):
                    self.run_once()
                self._graph = graph
                self._step = TimingStep(graph.replay, True)
            except RuntimeError as exc:
                self._step = TimingStep(self.run_once, False, f"CUDA graph capture failed, timed eagerly: {str(exc).splitlines()[0]}")
        return self._step

    def layer_ranges(self, kind: str):
        if kind != "nvtx":
            raise MissingEnvironment("TensorRT marks layers with NVTX only: use --tracer cupti")
        return contextlib.nullcontext()  # TensorRT opens one NVTX range per layer itself

    def range_to_layer(self, name: str) -> str:
        return normalize_name(trt_compat.range_to_layer(name))

    def layers(self) -> list[Layer]:
        info = parse_layer_info(trt_compat.layer_information(self.trt, self.engine, self.context), "engine inspector")
        return info.layers

    def layer_times(self, calls: int) -> dict[str, float]:
        """Mean IProfiler time per layer over `calls` enqueues, in a pass of its own."""
        times: dict[str, list[float]] = {}
        self.context.profiler = trt_compat.make_layer_profiler(self.trt, times)
        for _ in range(calls):
            self.run_once()
        torch.cuda.synchronize()
        self.context.profiler = None
        return {name: sum(values) / len(values) for name, values in times.items()}

    def release(self) -> None:
        self._step = None
        self._graph = None
        self.buffers.clear()
        self.context = None
        self.engine = None


@register_backend
class TensorRTBackend(Backend):
    name = "tensorrt"
    capabilities = Capabilities(
        layer_times=(
            "TensorRT IProfiler time per layer, mean over a pass of its own after tracing (includes profiling "
            "overhead; does not add up to the latency)"
        ),
        range_kinds=frozenset({"nvtx"}),
        devices=frozenset({"cuda"}),
    )

    def __init__(self, context: BackendContext):
        self.trt = trt_compat.import_tensorrt()
        self.model = context.model
        self.batch = context.plan.batch
        self.static_input = context.static_input
        self.opt_level = context.plan.opt_level
        self.report = context.report
        self._reference: torch.nn.Module | None = (
            None if self.model.module is None else self.model.module.to("cuda", torch.float32).eval()
        )

    @torch.no_grad()
    def reference(self, batch: torch.Tensor) -> torch.Tensor:
        if self._reference is None:
            raise MissingEnvironment("an .onnx model has no PyTorch reference for quality; use --variants fp32,...")
        output: torch.Tensor = self._reference(batch.cuda())
        return output.float().cpu()

    def describe(self) -> dict[str, str]:
        return {"tensorrt": str(self.trt.__version__)}

    def build(self, spec: VariantPlan, calibration: torch.Tensor) -> BuildResult:
        start = time.perf_counter()
        source = variant_onnx(self.model, spec, calibration, self.static_input, self.batch, cache_dir())
        onnx_path = source.path
        gpu = torch.cuda.get_device_name()
        key = hashlib.sha256(
            f"{file_hash(onnx_path)}|{self.trt.__version__}|{gpu}|{self.opt_level}|{tuple(self.static_input.shape)}".encode()
        ).hexdigest()[:20]
        plan_path = cache_dir() / f"{key}.plan"
        cached = plan_path.is_file()
        if cached:
            plan = plan_path.read_bytes()
        else:
            plan = trt_compat.build_plan(
                self.trt, onnx_path, self.opt_level, cache_dir() / "timing.cache",
                lambda phase, step, steps: self.report(phase, step, steps),
            )
            plan_path.write_bytes(plan)
        engine = TensorRTEngine(self.trt, plan, self.static_input.cuda())
        variant = Variant(
            name=spec.name,
            backend=self.name,
            precision=spec.precision,
            device="cuda",
            recipe=source.recipe,
            build_s=time.perf_counter() - start,
            artifact_bytes=len(plan),
            notes=[f"engine cache {'hit' if cached else 'miss'}: {plan_path.name}", f"TensorRT {self.trt.__version__}, optimization level {self.opt_level}"],
        )
        return BuildResult(engine, variant)
