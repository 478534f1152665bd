"""Every difference between TensorRT 10.x and 11.x, in one place.

Written against the public Python API as documented (../shared/docs/tensorrt-facts.md, sections
2 and 3); it has not run here, since TensorRT cannot be installed on these machines. Enum values
are stored by name: their integers changed in 11.x.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sessions.errors import InspectError, MissingEnvironment


def import_tensorrt():
    try:
        import tensorrt as trt
    except ImportError:
        raise MissingEnvironment("TensorRT is not installed (pip install 'trt-inspect[tensorrt]')") from None
    return trt


def major(trt) -> int:
    return int(trt.__version__.split(".")[0])


def network_flags(trt) -> int:
    """Strongly typed everywhere: 11.x always is; 10.x needs the flag (and FP8 convs need it, #3987)."""
    if major(trt) >= 11:
        return 0
    return 1 << int(trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED)


def make_progress_monitor(trt, report) -> Any:
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


def build_plan(trt, onnx_path: Path, opt_level: int, timing_cache: Path, report) -> bytes:
    """Parse a strongly typed ONNX file and build a serialized engine (DETAILED profiling verbosity)."""
    logger = trt.Logger(trt.Logger.WARNING)
    builder = trt.Builder(logger)
    network = builder.create_network(network_flags(trt))
    parser = trt.OnnxParser(network, logger)
    if not parser.parse_from_file(str(onnx_path)):
        errors = [str(parser.get_error(i)) for i in range(parser.num_errors)]
        raise InspectError(f"TensorRT could not parse {onnx_path}: {errors[0] if errors else 'unknown error'}")
    config = builder.create_builder_config()
    config.profiling_verbosity = trt.ProfilingVerbosity.DETAILED
    config.builder_optimization_level = opt_level
    cache_bytes = timing_cache.read_bytes() if timing_cache.is_file() else b""
    cache = config.create_timing_cache(cache_bytes)
    config.set_timing_cache(cache, False)
    config.progress_monitor = make_progress_monitor(trt, report)
    plan = builder.build_serialized_network(network, config)
    if plan is None:
        raise InspectError(f"TensorRT failed to build an engine from {onnx_path}")
    timing_cache.parent.mkdir(parents=True, exist_ok=True)
    timing_cache.write_bytes(bytes(memoryview(config.get_timing_cache().serialize())))
    return bytes(memoryview(plan))


def layer_information(trt, engine, context) -> dict:
    """The engine inspector's JSON (the same document trtexec --exportLayerInfo writes)."""
    import json

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
    """TensorRT's NVTX range names are layer names; a `TensorRT:` prefix, where present, is dropped.

    The prefix is reported by third parties for nsys output (tensorrt-facts.md, section 5), not
    checked here.
    """
    return name.removeprefix("TensorRT:")
