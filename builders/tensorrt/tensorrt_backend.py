"""The TensorRT backend: one ONNX file per variant, strongly typed engines, cached by content.

Written against the real 10.x / 11.x Python API, with every version difference and careful call in
`builders.tensorrt.compat`; its layer information goes through the same reader as imported trtexec files
(`profilers.trt_import.layer_info`). Engines run on a dedicated CUDA stream (`builders.tensorrt.device`). Tests run
this module against a stand-in that executes on the CPU (tests/fake_tensorrt); sessions made with
it say so in every variant and in the environment.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

from builders.backend import Backend, BackendContext, BuildResult, Capabilities, Engine, TimingStep, register_backend
from builders.cache_files import MAX_ENGINE_BYTES, read_cache_bytes
from builders.fp8.format import FP8
from builders.tensorrt import compat as trt_compat
from builders.tensorrt.device import EngineDevice, engine_device
from builders.tensorrt.onnx_export import file_hash
from builders.tensorrt.onnx_source import variant_onnx
from profilers.device import study_device
from profilers.trt_import.layer_info import normalize_name, parse_layer_info
from sessions.analyses.captions import STAND_IN, STAND_IN_LAYER_TIMES
from sessions.documents.errors import InputError, InspectError, MissingEnvironment
from sessions.documents.model import Layer, Variant
from sessions.documents.paths import cache_dir
from sessions.documents.plan import VariantPlan
from sessions.documents.storage import write_atomically

# by the enum member's name: trt.nptype has no numpy type for BF16 or FP8 and raises TypeError
TORCH_DTYPES = {
    "FLOAT": torch.float32, "HALF": torch.float16, "BF16": torch.bfloat16, "FP8": FP8,
    "INT8": torch.int8, "UINT8": torch.uint8, "INT32": torch.int32, "INT64": torch.int64, "BOOL": torch.bool,
}
NEEDS_GPU = "--backend tensorrt needs a CUDA GPU"
NOT_INSTALLED = "TensorRT is not installed (pip install 'trt-inspect[tensorrt]' where NVIDIA's index is reachable)"


def torch_dtype(trt_dtype) -> torch.dtype:
    name = trt_dtype.name
    if name not in TORCH_DTYPES:
        raise InputError(f"the engine has an input or output of type {name}, which trt-inspect cannot feed or read")
    return TORCH_DTYPES[name]


class TensorRTEngine(Engine):
    def __init__(self, trt, errors: list[str], engine, device: EngineDevice, static_input: torch.Tensor):
        self.trt = trt
        self.errors = errors
        self.engine = engine
        self.device = device
        self.context = engine.create_execution_context()
        if self.context is None:
            raise InspectError(f"TensorRT could not create an execution context{trt_compat.said(errors)}")
        # NVTX markers only while traced (see layer_ranges): DETAILED records cost time in eager runs
        self.context.nvtx_verbosity = trt.ProfilingVerbosity.NONE
        self.buffers: dict[str, torch.Tensor] = {}
        input_name, output_name = self._bind(tuple(static_input.shape))
        self.input_name: str = input_name
        self.output_name: str = output_name
        with device.use():
            self.buffers[self.input_name].copy_(static_input.to(self.buffers[self.input_name].dtype))
        device.synchronize()
        self.batch = static_input.shape[0]
        self._step: TimingStep | None = None

    def _bind(self, shape: tuple[int, ...]) -> tuple[str, str]:
        """Buffers for every I/O tensor, the input at the study's shape; (input, first output)."""
        names = trt_compat.io_tensor_names(self.engine)
        inputs = [name for name in names if trt_compat.is_input(self.trt, self.engine, name)]
        outputs = [name for name in names if name not in inputs]
        if len(inputs) != 1 or not outputs:
            raise InputError(f"the engine has {len(inputs)} inputs and {len(outputs)} outputs; "
                             "trt-inspect feeds one image input")
        (input_name,) = inputs
        dynamic = any(d < 0 for d in tuple(self.engine.get_tensor_shape(input_name)))
        if dynamic and not self.context.set_input_shape(input_name, shape):
            raise InputError(f"the engine does not accept input {input_name} of shape {list(shape)}")
        bound = tuple(self.context.get_tensor_shape(input_name))
        if bound != shape:
            raise InputError(f"the engine's input {input_name} is fixed at {list(bound)}; "
                             f"the study feeds {list(shape)} (use --batch {bound[0]})")
        with self.device.use():
            for name in names:
                dtype = torch_dtype(self.engine.get_tensor_dtype(name))
                self.buffers[name] = self.device.empty(tuple(self.context.get_tensor_shape(name)), dtype)
                if not self.context.set_tensor_address(name, self.buffers[name].data_ptr()):
                    raise InspectError(f"TensorRT refused the buffer of {name}{trt_compat.said(self.errors)}")
        return input_name, outputs[0]

    def run_once(self) -> None:
        logged = len(self.errors)
        if not self.context.execute_async_v3(self.device.stream_handle):
            said = trt_compat.said(self.errors[logged:])
            raise InspectError(f"TensorRT could not run the engine (execute_async_v3 failed){said}")

    @torch.no_grad()
    def infer(self, batch: torch.Tensor) -> torch.Tensor:
        source, result = self.buffers[self.input_name], self.buffers[self.output_name]
        outputs = []
        with self.device.use():
            saved = source.clone()
            for chunk in batch.split(self.batch):
                padded = torch.cat([chunk, chunk[-1:].expand(self.batch - len(chunk), *chunk.shape[1:])])
                source.copy_(padded.to(source.dtype))
                self.run_once()
                outputs.append(result[: len(chunk)].to("cpu", torch.float32, copy=True))
            source.copy_(saved)
        self.device.synchronize()
        return torch.cat(outputs)

    def timing_step(self) -> TimingStep:
        if self._step is None:
            run, why_eager = self.device.capture(self.run_once)
            self._step = TimingStep(run, why_eager is None, why_eager)
        return self._step

    def layer_ranges(self, kind: str) -> contextlib.AbstractContextManager[None]:
        if kind != "nvtx":
            raise MissingEnvironment("TensorRT marks layers with NVTX only: use --tracer cupti")
        return self._layer_names()  # TensorRT opens one NVTX range per layer itself

    @contextlib.contextmanager
    def _layer_names(self) -> Iterator[None]:
        """NVTX messages that are layer names, not the DETAILED JSON records the engine was built with."""
        self.context.nvtx_verbosity = self.trt.ProfilingVerbosity.LAYER_NAMES_ONLY
        try:
            yield
        finally:
            self.context.nvtx_verbosity = self.trt.ProfilingVerbosity.NONE

    def range_to_layer(self, name: str) -> str:
        return normalize_name(trt_compat.range_to_layer(name))

    def layers(self) -> list[Layer]:
        info = parse_layer_info(trt_compat.layer_information(self.trt, self.engine, self.context), "engine inspector")
        return info.layers

    def layer_times(self, calls: int) -> dict[str, list[float]]:
        """IProfiler times per layer over `calls` enqueues, in a pass of its own, one per report."""
        times: dict[str, list[float]] = {}
        self.context.profiler = trt_compat.make_layer_profiler(self.trt, times)
        try:
            with self._layer_names():
                for _ in range(calls):
                    self.run_once()
                self.device.synchronize()
        finally:
            self.context.profiler = None
        return {normalize_name(name): values for name, values in times.items()}

    def release(self) -> None:
        self.device.synchronize()
        self._step = None
        self.buffers.clear()
        self.context = None
        self.engine = None


@register_backend
class TensorRTBackend(Backend):
    name = "tensorrt"
    label = "TensorRT"
    auto_rank = 0  # `--backend auto` takes TensorRT first where it is installed with a GPU
    auto_devices = frozenset({"cuda"})
    plan_options = ("opt_level",)
    capabilities = Capabilities(
        layer_times=(
            "TensorRT IProfiler time per layer, mean over a pass of its own after tracing (includes profiling "
            "overhead; does not add up to the latency)"
        ),
        range_kinds=frozenset({"nvtx"}),
        devices=frozenset({"cuda", "cpu"}),  # cpu: the stand-in for tests only (see unavailable)
        torch_memory=False,  # TensorRT allocates its engine and activation memory itself
    )

    @classmethod
    def unavailable(cls, device: str) -> str | None:
        if importlib.util.find_spec("tensorrt") is None:
            return NOT_INSTALLED
        if study_device(device).gpu:  # TensorRT loads later: CUPTI's NVTX injection must be set first
            return None
        try:
            trt = trt_compat.import_tensorrt()
        except MissingEnvironment as exc:
            return exc.message
        return None if trt_compat.is_stand_in(trt) else NEEDS_GPU

    def __init__(self, context: BackendContext):
        self.trt = trt_compat.import_tensorrt()
        plan = context.plan
        self.stand_in = trt_compat.is_stand_in(self.trt)
        gpu = study_device(plan.device).gpu
        if not gpu and not self.stand_in:
            raise MissingEnvironment(NEEDS_GPU)
        if gpu and self.stand_in:
            raise MissingEnvironment("the TensorRT stand-in for tests runs on the host only: use --device cpu")
        if self.stand_in:
            self.capabilities = replace(self.capabilities, layer_times=STAND_IN_LAYER_TIMES)
        self.device = engine_device(plan.device)
        self.errors: list[str] = []  # TensorRT's logged errors, for the messages of failures
        self.logger = trt_compat.make_logger(self.trt, self.errors)
        self.model = context.model
        self.static_input = context.static_input
        self.opt_level = plan.opt_level
        self.report = context.report
        module = self.model.module
        self._reference: torch.nn.Module | None = (
            None if module is None else module.to(plan.device, torch.float32).eval()
        )

    @torch.no_grad()
    def reference(self, batch: torch.Tensor) -> torch.Tensor | None:
        module = self._reference
        if module is None:
            return None  # an .onnx model: no PyTorch module to compare with
        return module(batch.to(self.device.name)).float().cpu()

    @classmethod
    def choice_label(cls, device: str) -> str:
        return cls.label if study_device(device).gpu else "the TensorRT stand-in for tests"

    def describe(self) -> dict[str, str]:
        version = str(self.trt.__version__)
        return {"tensorrt": f"{version} (a stand-in for tests, not TensorRT)" if self.stand_in else version}

    def engine(self) -> str:
        return f"{self.label} {self.describe()['tensorrt']}"

    def build(self, spec: VariantPlan, calibration: torch.Tensor) -> BuildResult:
        start = time.perf_counter()
        source = variant_onnx(self.model, spec, calibration, self.static_input, cache_dir())
        if self.model.source == "onnx":
            check_file_precision(source.path, spec)
        engine, plan_bytes, notes = self._engine(source.path)
        variant = Variant(
            name=spec.name,
            backend=self.name,
            precision=spec.precision,
            device=self.device.name,
            recipe=source.recipe,
            build_s=time.perf_counter() - start,
            artifact_bytes=plan_bytes,
            notes=([STAND_IN] if self.stand_in else []) + [
                *notes, f"TensorRT {self.trt.__version__}, optimization level {self.opt_level}",
            ],
        )
        return BuildResult(TensorRTEngine(self.trt, self.errors, engine, self.device, self.static_input), variant)

    def timing_cache_path(self) -> Path:
        """One timing cache per GPU (name and compute capability) and TensorRT version."""
        key = hashlib.sha256(f"{self.device.key()}|{self.trt.__version__}".encode()).hexdigest()[:16]
        return cache_dir() / f"timing-{key}.cache"

    def _engine(self, onnx_path: Path) -> tuple[Any, int, list[str]]:
        """The engine for `onnx_path` from the plan cache where it holds a loadable plan, else built.

        A plan is only valid for its ONNX file, TensorRT version, GPU, optimization level and input
        shape: all are in its key. A plan TensorRT cannot load (truncated, damaged) is rebuilt.
        """
        device_key = self.device.key()
        shape = tuple(self.static_input.shape)
        key = hashlib.sha256(
            f"{file_hash(onnx_path)}|{self.trt.__version__}|{device_key}|{self.opt_level}|{shape}".encode()
        ).hexdigest()[:20]
        plan_path = cache_dir() / f"{key}.plan"
        runtime = self.trt.Runtime(self.logger)
        notes = []
        plan = read_cache_bytes(plan_path, "TensorRT engine cache", MAX_ENGINE_BYTES)
        if plan is not None:
            self.errors.clear()
            engine = runtime.deserialize_cuda_engine(plan)
            if engine is not None:
                return engine, len(plan), [f"engine cache hit: {plan_path.name}"]
            notes.append(f"engine cache {plan_path.name} could not be loaded{trt_compat.said(self.errors)}: rebuilt")
        self.errors.clear()
        plan, cache_notes = trt_compat.build_plan(self.trt, self.logger, self.errors, onnx_path, self.opt_level, shape,
                                                  self.timing_cache_path(), self.report)
        engine = runtime.deserialize_cuda_engine(plan)
        if engine is None:
            raise InspectError(f"TensorRT could not load the engine it built{trt_compat.said(self.errors)}")
        try:
            write_atomically(plan_path, plan, "engine")
        except InspectError as exc:
            notes.append(f"engine not cached: {exc.message}")
        return engine, len(plan), notes + cache_notes + [f"engine cache miss: {plan_path.name}"]


def check_file_precision(path: Path, spec: VariantPlan) -> None:
    """An `.onnx` model is built as it is (strongly typed): only the precision of its weights is honest."""
    import onnx

    names = {onnx.TensorProto.FLOAT: "fp32", onnx.TensorProto.FLOAT16: "fp16", onnx.TensorProto.BFLOAT16: "bf16"}
    graph = onnx.load(str(path), load_external_data=False).graph
    counts = Counter(names[t.data_type] for t in graph.initializer if t.data_type in names)
    held = counts.most_common(1)[0][0] if counts else None
    if held is not None and held != spec.precision:
        raise InputError(f"{spec.name}: {path.name} holds {held} weights and is built as it is; "
                         f"ask for --variants {held}")
