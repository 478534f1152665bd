"""Every call into TensorRT's Python API that differs between versions or needs care, in one place.

Written against the real 10.x and 11.x bindings (../shared/docs/tensorrt-facts.md, sections 2 to 5;
names checked by tests/builders/test_trt_api_contract.py). Enum values are stored by name: their integers
changed in 11.x. Tests run this code against a stand-in (tests/fake_tensorrt) that executes on the
CPU; its version ends in STAND_IN_SUFFIX, and what it produces is never presented as TensorRT's.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from builders.cache_files import MAX_TRT_TIMING_CACHE_BYTES, read_cache_bytes
from sessions.documents.errors import InputError, InspectError, MissingEnvironment
from sessions.documents.storage import write_atomically

STAND_IN_SUFFIX = "-fake"

Report = Callable[[str, int, int], None]


def import_tensorrt():
    try:
        import tensorrt as trt
    except ImportError:
        raise MissingEnvironment("TensorRT is not installed (pip install 'trt-inspect[tensorrt]')") from None
    return trt


def major(trt) -> int:
    return int(trt.__version__.split(".")[0])


def is_stand_in(trt) -> bool:
    """The test stand-in, which runs engines on the host and whose numbers are synthetic."""
    return str(trt.__version__).endswith(STAND_IN_SUFFIX)


def network_flags(trt) -> int:
    """Strongly typed everywhere: 11.x always is; 10.x needs the flag (and FP8 convs need it, #3987)."""
    if major(trt) >= 11:
        return 0
    return 1 << int(trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED)


def make_logger(trt, errors: list[str]) -> Any:
    """A logger that appends TensorRT's errors to `errors`, so a failure can say what TensorRT said."""

    class Log(trt.ILogger):
        def __init__(self) -> None:
            trt.ILogger.__init__(self)

        def log(self, severity, msg):
            if severity in (trt.ILogger.Severity.ERROR, trt.ILogger.Severity.INTERNAL_ERROR):
                errors.append(str(msg).strip())

    return Log()


def said(errors: list[str]) -> str:
    """TensorRT's last error, as the tail of a message."""
    return f": {errors[-1]}" if errors else ""


def make_progress_monitor(trt, report: Report) -> Any:
    """An IProgressMonitor forwarding phases to `report(phase, step, steps)`."""

    class Monitor(trt.IProgressMonitor):
        def __init__(self) -> None:
            trt.IProgressMonitor.__init__(self)
            self.steps: dict[str, int] = {}

        def phase_start(self, phase_name, parent_phase, num_steps):
            self.steps[phase_name] = num_steps
            report(phase_name, 0, num_steps)

        def step_complete(self, phase_name, step):
            report(phase_name, step + 1, self.steps.get(phase_name, 0))
            return True

        def phase_finish(self, phase_name):
            report(phase_name, self.steps.get(phase_name, 0), self.steps.get(phase_name, 0))

    return Monitor()


def attach_timing_cache(trt, config, path: Path) -> tuple[Any, list[str]]:
    """The timing cache at `path` attached to `config`, or a new one; a corrupt or foreign cache is
    ignored with a note, never fatal. Returns the cache (None: building without one) and the notes.

    TensorRT checks a device header when the cache is set (`ignore_mismatch=False`): a cache from
    another GPU is refused there. The path is already keyed by GPU and TensorRT version.
    """
    notes: list[str] = []
    data = read_cache_bytes(path, "TensorRT timing cache", MAX_TRT_TIMING_CACHE_BYTES) or b""
    if not data and path.is_file():
        notes.append(f"timing cache {path.name} could not be read: started afresh")
    if data:
        cache = config.create_timing_cache(data)
        if cache is None:
            notes.append(f"timing cache {path.name} is corrupt: ignored, started afresh")
        elif config.set_timing_cache(cache, False):
            return cache, notes
        else:
            notes.append(f"timing cache {path.name} was written for another GPU or TensorRT: ignored, started afresh")
    cache = config.create_timing_cache(b"")
    if cache is None or not config.set_timing_cache(cache, False):
        return None, notes + ["TensorRT refused a new timing cache: built without one"]
    return cache, notes


def save_timing_cache(config, path: Path) -> list[str]:
    cache = config.get_timing_cache()
    if cache is None:
        return []
    try:
        write_atomically(path, bytes(memoryview(cache.serialize())))
    except InspectError as exc:
        return [f"timing cache not saved: {exc.message}"]
    return []


def pin_dynamic_inputs(builder, network, config, shape: tuple[int, ...]) -> None:
    """One optimization profile fixing every dynamic input to the study's input shape.

    TensorRT refuses to build a network with dynamic inputs (an `.onnx` file with a free batch
    dimension) without one; the study times one shape, so min = opt = max.
    """
    inputs = [network.get_input(i) for i in range(network.num_inputs)]
    dynamic = [tensor for tensor in inputs if any(d < 0 for d in tuple(tensor.shape))]
    if not dynamic:
        return
    profile = builder.create_optimization_profile()
    for tensor in dynamic:
        dims = tuple(tensor.shape)
        if len(dims) != len(shape) or any(d >= 0 and d != s for d, s in zip(dims, shape, strict=False)):
            raise InputError(f"the ONNX input {tensor.name} has shape {list(dims)}; the study feeds {list(shape)}")
        profile.set_shape(tensor.name, shape, shape, shape)
    if config.add_optimization_profile(profile) < 0:
        raise InputError(f"TensorRT refused an optimization profile fixing the inputs at {list(shape)}")


def build_plan(trt, logger, errors: list[str], onnx_path: Path, opt_level: int, input_shape: tuple[int, ...],
               timing_cache: Path, report: Report) -> tuple[bytes, list[str]]:
    """Parse a strongly typed ONNX file and build a serialized engine (DETAILED profiling verbosity).

    Returns the plan and notes on the timing cache.
    """
    builder = trt.Builder(logger)
    network = builder.create_network(network_flags(trt))
    parser = trt.OnnxParser(network, logger)
    if not parser.parse_from_file(str(onnx_path)):
        errors = [str(parser.get_error(i)) for i in range(parser.num_errors)]
        raise InspectError(f"TensorRT could not parse {onnx_path.name}: {errors[0] if errors else 'unknown error'}")
    config = builder.create_builder_config()
    config.profiling_verbosity = trt.ProfilingVerbosity.DETAILED
    config.builder_optimization_level = opt_level
    pin_dynamic_inputs(builder, network, config, input_shape)
    cache, notes = attach_timing_cache(trt, config, timing_cache)
    config.progress_monitor = make_progress_monitor(trt, report)
    plan = builder.build_serialized_network(network, config)
    if plan is None:
        raise InspectError(f"TensorRT failed to build an engine from {onnx_path.name}{said(errors)}")
    if cache is not None:
        notes += save_timing_cache(config, timing_cache)
    return bytes(memoryview(plan)), notes


def layer_information(trt, engine, context) -> dict:
    """The engine inspector's JSON (the same document trtexec --exportLayerInfo writes)."""
    inspector = engine.create_engine_inspector()
    inspector.execution_context = context
    return json.loads(inspector.get_engine_information(trt.LayerInformationFormat.JSON))


def make_layer_profiler(trt, times: dict[str, list[float]]) -> Any:
    class Profiler(trt.IProfiler):
        def __init__(self) -> None:
            trt.IProfiler.__init__(self)

        def report_layer_time(self, layer_name, ms):
            times.setdefault(layer_name, []).append(ms)

    return Profiler()


def io_tensor_names(engine) -> list[str]:
    return [engine.get_tensor_name(i) for i in range(engine.num_io_tensors)]


def is_input(trt, engine, name: str) -> bool:
    return engine.get_tensor_mode(name) == trt.TensorIOMode.INPUT


def range_to_layer(name: str) -> str:
    """The layer an NVTX range of TensorRT stands for.

    Under LAYER_NAMES_ONLY the message is the layer's name. Under DETAILED (the engine's build
    verbosity, which an execution context inherits) it is the layer's JSON record: its `Name` is
    the layer. A `TensorRT:` prefix (the domain, as nsys prints it) is dropped where present.
    """
    message = name.removeprefix("TensorRT:")
    if message.startswith("{"):
        try:
            record = json.loads(message)
        except ValueError:
            return message
        if isinstance(record, dict) and isinstance(record.get("Name"), str):
            return record["Name"]
    return message
