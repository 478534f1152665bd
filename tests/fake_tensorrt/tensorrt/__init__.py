"""A stand-in for TensorRT's Python API, for tests only: engines run with onnxruntime on the CPU.

Put on sys.path only by the tests that use it (tests/fake_tensorrt). It implements what
builders/tensorrt/tensorrt_backend.py and builders/tensorrt/compat.py call, with TensorRT's behaviour where it
matters: NVTX marker text per verbosity (a DETAILED layer record as JSON, or the name),
`execute_async_v3` returning a bool, `deserialize_cuda_engine` returning None on a damaged plan, a
timing cache refused on another device, IProfiler and IProgressMonitor callbacks, engine-inspector
JSON shaped like the real files, positive Q/DQ scales required by the parser. Layers, tactics,
kernels and times are synthetic; its version ends in "-fake" and the backend labels its sessions.

`CONTROLS` lets a test change the device the stand-in claims to be or make enqueues fail.
"""

from __future__ import annotations

import ctypes
import enum
import hashlib
import json
import struct
import threading
from dataclasses import dataclass, field

import ml_dtypes
import numpy as np
import onnx

from tensorrt import _graph
from tensorrt._markers import RECORDER

__version__ = "0.0-fake"

PLAN_MAGIC = b"TRT-STAND-IN-PLAN\x00"
CACHE_MAGIC = b"TRT-STAND-IN-TIMING-CACHE\x00"


@dataclass
class Controls:
    device: str = "stand-in host"  # the device a timing cache is made for
    failing_enqueues: int = 0  # the next N execute_async_v3 calls return False
    streams: list[int] = field(default_factory=list)  # the stream handle of every enqueue


CONTROLS = Controls()


class DataType(enum.IntEnum):
    FLOAT = 0
    HALF = 1
    INT8 = 2
    INT32 = 3
    BOOL = 4
    UINT8 = 5
    FP8 = 6
    BF16 = 7
    INT64 = 8
    INT4 = 9
    FP4 = 10


class ProfilingVerbosity(enum.IntEnum):
    LAYER_NAMES_ONLY = 0
    NONE = 1
    DETAILED = 2


DETAIL = {ProfilingVerbosity.NONE: 0, ProfilingVerbosity.LAYER_NAMES_ONLY: 1, ProfilingVerbosity.DETAILED: 2}


class LayerInformationFormat(enum.IntEnum):
    ONELINE = 0
    JSON = 1


class TensorIOMode(enum.IntEnum):
    NONE = 0
    INPUT = 1
    OUTPUT = 2


class NetworkDefinitionCreationFlag(enum.IntEnum):
    EXPLICIT_BATCH = 0
    STRONGLY_TYPED = 1


class MemoryPoolType(enum.IntEnum):
    WORKSPACE = 0


ONNX_TYPES = {
    onnx.TensorProto.FLOAT: DataType.FLOAT, onnx.TensorProto.FLOAT16: DataType.HALF,
    onnx.TensorProto.BFLOAT16: DataType.BF16, onnx.TensorProto.INT8: DataType.INT8,
    onnx.TensorProto.INT32: DataType.INT32, onnx.TensorProto.INT64: DataType.INT64,
    onnx.TensorProto.BOOL: DataType.BOOL, onnx.TensorProto.UINT8: DataType.UINT8,
    onnx.TensorProto.FLOAT8E4M3FN: DataType.FP8,
}
NUMPY_TYPES = {  # what nptype answers: no numpy type for BF16 or FP8, as in TensorRT
    DataType.FLOAT: np.float32, DataType.HALF: np.float16, DataType.INT8: np.int8, DataType.INT32: np.int32,
    DataType.BOOL: np.bool_, DataType.UINT8: np.uint8, DataType.INT64: np.int64,
}
MEMORY_TYPES = {**NUMPY_TYPES, DataType.BF16: ml_dtypes.bfloat16, DataType.FP8: ml_dtypes.float8_e4m3fn}


def nptype(trt_type: DataType):
    if trt_type not in NUMPY_TYPES:
        raise TypeError("Could not resolve TensorRT datatype to an equivalent numpy datatype.")
    return NUMPY_TYPES[trt_type]


class ILogger:
    class Severity(enum.IntEnum):
        INTERNAL_ERROR = 0
        ERROR = 1
        WARNING = 2
        INFO = 3
        VERBOSE = 4

    def __init__(self) -> None:
        pass

    def log(self, severity, msg) -> None:
        raise NotImplementedError


class Logger(ILogger):
    INTERNAL_ERROR, ERROR, WARNING, INFO, VERBOSE = ILogger.Severity

    def __init__(self, min_severity=ILogger.Severity.WARNING) -> None:
        super().__init__()
        self.min_severity = min_severity

    def log(self, severity, msg) -> None:
        pass


class IProfiler:
    def __init__(self) -> None:
        pass


class IProgressMonitor:
    def __init__(self) -> None:
        pass


# -- building


class ITensor:
    def __init__(self, name: str, dtype: DataType, shape: tuple[int, ...]):
        self.name, self.dtype, self.shape = name, dtype, shape


class INetworkDefinition:
    def __init__(self, flags: int):
        self.flags = flags
        self.model: onnx.ModelProto | None = None
        self.inputs: list[ITensor] = []

    @property
    def num_inputs(self) -> int:
        return len(self.inputs)

    def get_input(self, index: int) -> ITensor:
        return self.inputs[index]


class ParserError:
    def __init__(self, text: str):
        self.text = text

    def __str__(self) -> str:
        return self.text


class OnnxParser:
    def __init__(self, network: INetworkDefinition, logger: ILogger):
        self.network, self.logger, self.errors = network, logger, []

    @property
    def num_errors(self) -> int:
        return len(self.errors)

    def get_error(self, index: int) -> ParserError:
        return self.errors[index]

    def parse_from_file(self, path: str) -> bool:
        try:
            model = _graph.standardize(onnx.load(path))
        except Exception as exc:  # noqa: BLE001  (onnx raises several types for bad files)
            self.errors.append(ParserError(f"stand-in parser: cannot read {path}: {exc}"))
            return False
        problem = _graph.check_scales(model)
        if problem:
            self.errors.append(ParserError(f"stand-in parser: {problem}"))
            return False
        weights = {t.name for t in model.graph.initializer}
        for value in model.graph.input:
            if value.name not in weights:
                dims = tuple(d.dim_value if d.HasField("dim_value") else -1 for d in value.type.tensor_type.shape.dim)
                self.network.inputs.append(ITensor(value.name, ONNX_TYPES[value.type.tensor_type.elem_type], dims))
        self.network.model = model
        return True


class IOptimizationProfile:
    def __init__(self) -> None:
        self.shapes: dict[str, list[int]] = {}

    def set_shape(self, input: str, min, opt, max) -> None:
        if not (tuple(min) == tuple(opt) == tuple(max)):
            raise ValueError("the stand-in supports min = opt = max only")
        self.shapes[input] = list(opt)


class IHostMemory(bytes):
    @property
    def nbytes(self) -> int:
        return len(self)


class ITimingCache:
    def __init__(self, device: str, entries: dict[str, str] | None = None):
        self.device, self.entries = device, dict(entries or {})

    def serialize(self) -> IHostMemory:
        return IHostMemory(CACHE_MAGIC + json.dumps({"device": self.device, "entries": self.entries}).encode())

    def combine(self, input_cache: ITimingCache, ignore_mismatch: bool) -> bool:
        if input_cache.device != self.device and not ignore_mismatch:
            return False
        self.entries.update(input_cache.entries)
        return True

    def reset(self) -> bool:
        self.entries.clear()
        return True


class IBuilderConfig:
    def __init__(self, logger: ILogger):
        self.logger = logger
        self.profiling_verbosity = ProfilingVerbosity.LAYER_NAMES_ONLY
        self.builder_optimization_level = 3
        self.progress_monitor: IProgressMonitor | None = None
        self.profiles: list[IOptimizationProfile] = []
        self.memory_pools: dict[MemoryPoolType, int] = {}
        self._timing_cache: ITimingCache | None = None

    def set_memory_pool_limit(self, pool: MemoryPoolType, pool_size: int) -> None:
        self.memory_pools[pool] = pool_size

    def add_optimization_profile(self, profile: IOptimizationProfile) -> int:
        self.profiles.append(profile)
        return len(self.profiles) - 1

    def create_timing_cache(self, serialized_timing_cache: bytes) -> ITimingCache | None:
        data = bytes(serialized_timing_cache)
        if not data:
            return ITimingCache(CONTROLS.device)
        try:
            if not data.startswith(CACHE_MAGIC):
                raise ValueError("no header")
            content = json.loads(data[len(CACHE_MAGIC):])
            return ITimingCache(str(content["device"]), dict(content["entries"]))
        except (ValueError, KeyError, TypeError):
            self.logger.log(ILogger.Severity.ERROR, "stand-in: the timing cache is damaged")
            return None

    def set_timing_cache(self, cache: ITimingCache, ignore_mismatch: bool) -> bool:
        if cache.device != CONTROLS.device and not ignore_mismatch:
            self.logger.log(ILogger.Severity.ERROR,
                            f"stand-in: timing cache made on {cache.device}, not {CONTROLS.device}")
            return False
        self._timing_cache = cache
        return True

    def get_timing_cache(self) -> ITimingCache | None:
        return self._timing_cache


class Builder:
    def __init__(self, logger: ILogger):
        self.logger = logger

    def create_network(self, flags: int = 0) -> INetworkDefinition:
        return INetworkDefinition(flags)

    def create_builder_config(self) -> IBuilderConfig:
        return IBuilderConfig(self.logger)

    def create_optimization_profile(self) -> IOptimizationProfile:
        return IOptimizationProfile()

    def build_serialized_network(self, network: INetworkDefinition, config: IBuilderConfig) -> IHostMemory | None:
        shapes = {name: shape for profile in config.profiles for name, shape in profile.shapes.items()}
        free = [t.name for t in network.inputs if -1 in t.shape and t.name not in shapes]
        if free:
            self.logger.log(ILogger.Severity.ERROR,
                            "Network has dynamic or shape inputs, but no optimization profile has been defined.")
            return None
        model = _graph.fixed(network.model, shapes)
        layers = _graph.build_layers(model)
        if not self._report_progress(config.progress_monitor, layers):
            self.logger.log(ILogger.Severity.ERROR, "stand-in: the build was cancelled by the progress monitor")
            return None
        if config._timing_cache is not None:
            config._timing_cache.entries.update({layer.name: layer.record.get("TacticName", "") for layer in layers})
        header = {
            "verbosity": ProfilingVerbosity(config.profiling_verbosity).name,
            "layers": [{"record": layer.record, "kernel": layer.kernel, "time_ms": layer.time_ms} for layer in layers],
            "io": _io_tensors(network.model, model),
        }
        return IHostMemory(_pack(header, model.SerializeToString()))

    @staticmethod
    def _report_progress(monitor: IProgressMonitor | None, layers) -> bool:
        if monitor is None:
            return True
        phase = "Building the stand-in engine"
        monitor.phase_start(phase, None, len(layers))
        for step in range(len(layers)):
            if not monitor.step_complete(phase, step):
                return False
        monitor.phase_finish(phase)
        return True


def _io_tensors(declared: onnx.ModelProto, fixed: onnx.ModelProto) -> list[dict]:
    weights = {t.name for t in declared.graph.initializer}
    resolved = _graph.value_types(fixed)
    tensors = []
    for mode, values in (("INPUT", declared.graph.input), ("OUTPUT", declared.graph.output)):
        for value in values:
            if value.name in weights:
                continue
            dims = [d.dim_value if d.HasField("dim_value") else -1 for d in value.type.tensor_type.shape.dim]
            tensors.append({"name": value.name, "mode": mode,
                            "dtype": ONNX_TYPES[value.type.tensor_type.elem_type].name,
                            "shape": dims, "resolved": resolved[value.name][1]})
    return tensors


def _pack(header: dict, model: bytes) -> bytes:
    head = json.dumps(header).encode()
    digest = hashlib.sha256(head + model).digest()
    return PLAN_MAGIC + struct.pack("<QQ", len(head), len(model)) + digest + head + model


def _unpack(plan: bytes) -> tuple[dict, bytes] | None:
    start = len(PLAN_MAGIC) + 16 + 32
    if not plan.startswith(PLAN_MAGIC) or len(plan) < start:
        return None
    head_len, model_len = struct.unpack("<QQ", plan[len(PLAN_MAGIC):len(PLAN_MAGIC) + 16])
    digest, body = plan[start - 32:start], plan[start:]
    if len(body) != head_len + model_len or hashlib.sha256(body).digest() != digest:
        return None
    return json.loads(body[:head_len]), body[head_len:]


# -- running


class Runtime:
    def __init__(self, logger: ILogger):
        self.logger = logger

    def deserialize_cuda_engine(self, serialized_engine: bytes) -> ICudaEngine | None:
        unpacked = _unpack(bytes(serialized_engine))
        if unpacked is None:
            self.logger.log(ILogger.Severity.ERROR, "stand-in: the serialized engine is truncated or damaged")
            return None
        header, model = unpacked
        return ICudaEngine(header, onnx.ModelProto.FromString(model), self.logger)


class ICudaEngine:
    def __init__(self, header: dict, model: onnx.ModelProto, logger: ILogger):
        import onnxruntime

        self.verbosity = ProfilingVerbosity[header["verbosity"]]
        self.layers = [_graph.Layer(item["record"], item["kernel"], item["time_ms"]) for item in header["layers"]]
        self.io = {item["name"]: item for item in header["io"]}
        self.logger = logger
        options = onnxruntime.SessionOptions()
        options.log_severity_level = 3
        self.session = onnxruntime.InferenceSession(
            _graph.for_execution(model).SerializeToString(), options, providers=["CPUExecutionProvider"]
        )

    @property
    def num_io_tensors(self) -> int:
        return len(self.io)

    @property
    def num_layers(self) -> int:
        return len(self.layers)

    def get_tensor_name(self, index: int) -> str:
        return list(self.io)[index]

    def get_tensor_mode(self, name: str) -> TensorIOMode:
        return TensorIOMode[self.io[name]["mode"]] if name in self.io else TensorIOMode.NONE

    def get_tensor_shape(self, name: str) -> tuple[int, ...]:
        return tuple(self.io[name]["shape"])

    def get_tensor_dtype(self, name: str) -> DataType:
        return DataType[self.io[name]["dtype"]]

    def create_execution_context(self) -> IExecutionContext:
        return IExecutionContext(self)

    def create_engine_inspector(self) -> IEngineInspector:
        return IEngineInspector(self)


class IEngineInspector:
    def __init__(self, engine: ICudaEngine):
        self.engine = engine
        self.execution_context: IExecutionContext | None = None

    def get_layer_information(self, layer: int, format: LayerInformationFormat) -> str:
        item = self.engine.layers[layer]
        if self.engine.verbosity != ProfilingVerbosity.DETAILED:
            return item.name
        return json.dumps(item.record) if format == LayerInformationFormat.JSON else item.name

    def get_engine_information(self, format: LayerInformationFormat) -> str:
        detailed = self.engine.verbosity == ProfilingVerbosity.DETAILED
        layers = [item.record if detailed else item.name for item in self.engine.layers]
        return json.dumps({"Layers": layers, "Bindings": list(self.engine.io)})


class IExecutionContext:
    def __init__(self, engine: ICudaEngine):
        self.engine = engine
        self.profiler: IProfiler | None = None
        self.enqueue_emits_profile = True
        self._verbosity = engine.verbosity
        self._addresses: dict[str, int] = {}
        self._shapes = {name: tuple(item["shape"]) for name, item in engine.io.items()}
        self._pending: list[tuple[str, float]] = []
        self._lock = threading.Lock()

    @property
    def nvtx_verbosity(self) -> ProfilingVerbosity:
        return self._verbosity

    @nvtx_verbosity.setter
    def nvtx_verbosity(self, level: ProfilingVerbosity) -> None:
        if DETAIL[ProfilingVerbosity(level)] <= DETAIL[self.engine.verbosity]:  # it can only be lowered
            self._verbosity = ProfilingVerbosity(level)

    def set_input_shape(self, name: str, shape) -> bool:
        declared = self.engine.io[name]
        if tuple(shape) != tuple(declared["resolved"]):
            self.engine.logger.log(ILogger.Severity.ERROR, f"stand-in: {name} accepts {declared['resolved']} only")
            return False
        for item in self.engine.io.values():
            self._shapes[item["name"]] = tuple(item["resolved"])
        return True

    def get_tensor_shape(self, name: str) -> tuple[int, ...]:
        return self._shapes[name]

    def set_tensor_address(self, name: str, memory: int) -> bool:
        if name not in self.engine.io:
            return False
        self._addresses[name] = int(memory)
        return True

    def execute_async_v3(self, stream_handle: int) -> bool:
        CONTROLS.streams.append(stream_handle)
        if CONTROLS.failing_enqueues > 0:
            CONTROLS.failing_enqueues -= 1
            self.engine.logger.log(ILogger.Severity.ERROR, "stand-in: the enqueue failed (as a test asked)")
            return False
        missing = [name for name in self.engine.io if name not in self._addresses]
        if missing or any(d < 0 for shape in self._shapes.values() for d in shape):
            self.engine.logger.log(ILogger.Severity.ERROR, f"stand-in: tensor addresses or shapes not set ({missing})")
            return False
        with self._lock:
            self._run()
        self._emit()
        return True

    def _memory(self, name: str) -> np.ndarray:
        dtype = np.dtype(MEMORY_TYPES[DataType[self.engine.io[name]["dtype"]]])
        shape = self._shapes[name]
        size = int(np.prod(shape)) * dtype.itemsize
        raw = (ctypes.c_uint8 * size).from_address(self._addresses[name])
        return np.frombuffer(raw, dtype=dtype).reshape(shape)

    def _run(self) -> None:
        feeds = {}
        for item in self.engine.session.get_inputs():
            data = self._memory(item.name)
            feeds[item.name] = data.astype(np.float32) if item.type == "tensor(float)" else data
        results = self.engine.session.run(None, feeds)
        for item, result in zip(self.engine.session.get_outputs(), results, strict=False):
            target = self._memory(item.name)
            target[...] = result.astype(target.dtype)

    def _emit(self) -> None:
        """NVTX-like markers and kernels (while recorded), then the profiler's per-layer times."""
        if RECORDER.active and self._verbosity != ProfilingVerbosity.NONE:
            with RECORDER.range("ExecutionContext::enqueue"):
                for layer in self.engine.layers:
                    message = json.dumps(layer.record) if self._verbosity == ProfilingVerbosity.DETAILED else layer.name
                    with RECORDER.range(message):
                        if layer.kernel:
                            RECORDER.launch(layer.kernel, int(layer.time_ms * 1e6))
        if self.profiler is not None:
            self._pending = [(layer.name, layer.time_ms) for layer in self.engine.layers]
            if self.enqueue_emits_profile:
                self.report_to_profiler()

    def report_to_profiler(self) -> bool:
        if self.profiler is None:
            return False
        for name, ms in self._pending:
            self.profiler.report_layer_time(name, ms)
        self._pending = []
        return True


def _register_tracer() -> None:
    """The stand-in's tracer, where the project is importable (it always is in its tests)."""
    import importlib.util

    if importlib.util.find_spec("profilers") is not None:
        import tensorrt._tracer  # noqa: F401


_register_tracer()
