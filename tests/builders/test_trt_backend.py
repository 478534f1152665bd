"""The TensorRT backend's own code, run against the stand-in in tests/fake_tensorrt (onnxruntime on the CPU).

The stand-in is put on sys.path only here and removed after each test. What only a real GPU can
show (CUDA streams, graph replay, TensorRT's kernels) is out of reach; the CUDA-graph fallback is
checked with torch.cuda replaced by stubs.
"""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

from builders.backend import BackendContext, backend_class
from builders.models.catalog import LoadedModel
from builders.tensorrt.compat import range_to_layer
from sessions.analyses.captions import STAND_IN, STAND_IN_LAYER_TIMES
from sessions.documents.errors import InputError, InspectError, MissingEnvironment
from sessions.documents.paths import cache_dir
from sessions.documents.plan import StudyPlan, TimingPlan, parse_variants
from tests.conftest import TESTS

STAND_IN_PATH = TESTS / "fake_tensorrt"
SHAPE = (3, 16, 16)


class Tiny(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.conv2 = torch.nn.Conv2d(8, 8, 3, padding=1, groups=2)
        self.fc = torch.nn.Linear(8, 5)

    def forward(self, x):
        x = torch.relu(self.conv2(torch.relu(self.conv1(x))))
        return self.fc(x.mean((2, 3)))


@pytest.fixture
def trt(monkeypatch):
    """The stand-in, imported fresh; afterwards gone from sys.modules and the tracer registry."""
    from profilers import tracers

    monkeypatch.syspath_prepend(str(STAND_IN_PATH))
    import tensorrt

    yield tensorrt
    for name in [m for m in sys.modules if m == "tensorrt" or m.startswith("tensorrt.")]:
        del sys.modules[name]
    tracers._tracers.pop("trt-stand-in", None)


def tiny_model(seed: int = 0) -> LoadedModel:
    torch.manual_seed(seed)
    return LoadedModel(name=f"tiny{seed}", source="timm", module=Tiny().eval(), input_size=SHAPE)


def make_backend(model: LoadedModel | None = None, batch: int = 2, device: str = "cpu", reports: list | None = None):
    from builders.tensorrt.tensorrt_backend import TensorRTBackend

    plan = StudyPlan(model="tiny", backend="tensorrt", device=device, variants=parse_variants("fp32", [], []),
                     batch=batch, timing=TimingPlan(0, 1, 1), tracer="trt-stand-in")
    static = torch.randn(batch, *SHAPE, generator=torch.Generator().manual_seed(1))
    report = (lambda *step: reports.append(step)) if reports is not None else (lambda *step: None)
    return TensorRTBackend(BackendContext(plan, model or tiny_model(), static, report))


def build(backend, precision: str = "fp32"):
    (variant,) = parse_variants(precision, [], [])
    return backend.build(variant, torch.randn(4, *SHAPE))


# -- NVTX: kernel attribution under a DETAILED build


def test_a_detailed_nvtx_record_names_its_layer():
    record = {"Name": "/conv1/Conv + /act1/Relu", "LayerType": "CaskConvolution", "TacticName": "sm80_xmma_fprop"}
    assert range_to_layer(json.dumps(record)) == "/conv1/Conv + /act1/Relu"
    assert range_to_layer("TensorRT:" + json.dumps(record)) == "/conv1/Conv + /act1/Relu"
    assert range_to_layer("TensorRT:/fc/Gemm") == "/fc/Gemm"
    assert range_to_layer("{not json") == "{not json"


def test_the_traced_context_marks_layers_by_name(trt):
    from tensorrt._markers import RECORDER

    engine = build(make_backend()).engine
    (plan_path,) = cache_dir().glob("*.plan")
    names = [layer.name for layer in engine.layers()]
    RECORDER.clear()
    RECORDER.active = True
    try:
        engine.run_once()  # outside the traced region: no markers (latency runs)
        assert RECORDER.ranges == []
        with engine.layer_ranges("nvtx"):
            engine.run_once()
        # a context left at the build's DETAILED verbosity, as every context starts
        raw = trt.Runtime(trt.Logger()).deserialize_cuda_engine(plan_path.read_bytes()).create_execution_context()
        raw.set_tensor_address("input", engine.buffers["input"].data_ptr())
        raw.set_tensor_address("logits", engine.buffers["logits"].data_ptr())
        before = len(RECORDER.ranges)
        assert raw.execute_async_v3(0)
    finally:
        RECORDER.active = False
    traced = [message for message, *_ in RECORDER.ranges[:before] if message != "ExecutionContext::enqueue"]
    assert traced == names
    detailed = [message for message, *_ in RECORDER.ranges[before:] if message != "ExecutionContext::enqueue"]
    assert all(message.startswith("{") for message in detailed)
    assert [engine.range_to_layer(message) for message in detailed] == names


# -- execute_async_v3's result


def test_a_failed_enqueue_is_an_error_not_a_fast_inference(trt):
    engine = build(make_backend()).engine
    trt.CONTROLS.failing_enqueues = 1
    with pytest.raises(InspectError, match=r"execute_async_v3 failed\): stand-in: the enqueue failed"):
        engine.run_once()
    trt.CONTROLS.failing_enqueues = 1
    with pytest.raises(InspectError, match="execute_async_v3"):
        engine.infer(torch.zeros(2, *SHAPE))


class StubStream:
    cuda_stream = 7

    def synchronize(self): pass
    def wait_stream(self, other): pass


class StubGraph:
    def replay(self): pass


@pytest.fixture
def stub_cuda(monkeypatch):
    import contextlib

    from builders.tensorrt import device as engine_device

    cuda = engine_device.torch.cuda
    monkeypatch.setattr(cuda, "Stream", StubStream)
    monkeypatch.setattr(cuda, "CUDAGraph", StubGraph)
    monkeypatch.setattr(cuda, "synchronize", lambda: None)
    monkeypatch.setattr(cuda, "current_stream", StubStream)
    monkeypatch.setattr(cuda, "graph", lambda graph, stream, capture_error_mode: contextlib.nullcontext())
    return engine_device.CudaDevice()


def test_a_failed_enqueue_during_graph_capture_keeps_no_graph(stub_cuda):
    calls = []

    def enqueue():
        calls.append(len(calls))
        if len(calls) == 2:  # the enqueue inside the capture
            raise InspectError("TensorRT could not run the engine (execute_async_v3 failed)")

    run, why = stub_cuda.capture(enqueue)
    assert why == ("CUDA graph capture failed, timed eagerly: TensorRT could not run the engine "
                   "(execute_async_v3 failed)")
    run()
    assert calls == [0, 1, 2]  # the timed step enqueues eagerly, on the dedicated stream
    run, why = stub_cuda.capture(lambda: None)
    assert why is None and run.__self__.__class__ is StubGraph


# -- bf16 engines


def test_a_bf16_engine_runs_without_nptype(trt):
    with pytest.raises(TypeError):
        trt.nptype(trt.DataType.BF16)  # as TensorRT: the reason the backend maps dtypes by name
    backend = make_backend()
    engine = build(backend, "bf16").engine
    assert engine.buffers["input"].dtype == torch.bfloat16
    batch = torch.randn(3, *SHAPE)
    outputs, reference = engine.infer(batch), backend.reference(batch)
    assert outputs.dtype == torch.float32 and outputs.shape == (3, 5)
    assert torch.allclose(outputs, reference, atol=0.05)


# -- the plan cache


def test_a_truncated_plan_is_rebuilt(trt):
    first = build(make_backend())
    (plan_path,) = cache_dir().glob("*.plan")
    assert "engine cache miss" in first.variant.notes[1]
    plan_path.write_bytes(plan_path.read_bytes()[:1000])
    again = build(make_backend())
    assert any(n.startswith(f"engine cache {plan_path.name} could not be loaded: stand-in: the serialized engine is "
                            "truncated") and n.endswith(": rebuilt") for n in again.variant.notes)
    assert trt.Runtime(trt.Logger()).deserialize_cuda_engine(plan_path.read_bytes()) is not None
    assert "engine cache hit" in build(make_backend()).variant.notes[1]


def test_a_cached_engine_made_a_link_is_a_miss_not_loaded(trt, tmp_path):
    build(make_backend())
    (plan_path,) = cache_dir().glob("*.plan")
    elsewhere = tmp_path / "elsewhere.plan"
    elsewhere.write_bytes(plan_path.read_bytes())
    plan_path.unlink()
    plan_path.symlink_to(elsewhere)  # a valid engine, but not the cache's own file
    again = build(make_backend())
    assert again.variant.status == "ok" and not any("engine cache hit" in n for n in again.variant.notes)


def test_a_plan_that_cannot_be_written_leaves_no_file(trt, monkeypatch):
    import os

    fsync = os.fsync

    def full_disk(fd):  # the disk fills as the engine is written (the ONNX file it builds from was written first)
        if ".plan" in os.readlink(f"/proc/self/fd/{fd}"):
            raise OSError(28, "No space left on device")
        fsync(fd)

    monkeypatch.setattr(os, "fsync", full_disk)
    result = build(make_backend())
    assert any(n.startswith("engine not cached: cannot save engine") for n in result.variant.notes)
    assert not any(p.suffix in (".plan", ".tmp") for p in cache_dir().iterdir())


# -- the timing cache


def test_the_timing_cache_is_per_gpu_and_version(trt, monkeypatch):
    from builders.tensorrt.device import HostDevice

    backend = make_backend()
    build(backend)
    path = backend.timing_cache_path()
    assert path.is_file() and b"stand-in host" in path.read_bytes()
    monkeypatch.setattr(HostDevice, "key", lambda self: "NVIDIA H200 sm90")
    other_gpu = make_backend().timing_cache_path()
    monkeypatch.setattr(trt, "__version__", "0.1-fake")
    assert len({path, other_gpu, make_backend().timing_cache_path()}) == 3


def test_a_foreign_or_corrupt_timing_cache_is_ignored_with_a_note(trt):
    trt.CONTROLS.device = "another GPU"
    backend = make_backend(tiny_model(1))
    build(backend)  # a cache made on "another GPU", where this machine's cache would be
    trt.CONTROLS.device = "stand-in host"
    result = build(make_backend(tiny_model(2)))
    path = backend.timing_cache_path()
    assert (f"timing cache {path.name} was written for another GPU or TensorRT: ignored, started afresh"
            in result.variant.notes)
    assert b"stand-in host" in path.read_bytes()
    path.write_bytes(b"garbage")
    result = build(make_backend(tiny_model(3)))
    assert f"timing cache {path.name} is corrupt: ignored, started afresh" in result.variant.notes
    assert result.variant.status == "ok" and b"stand-in host" in path.read_bytes()


def test_a_timing_cache_made_a_link_is_ignored_with_a_note(trt, tmp_path):
    backend = make_backend(tiny_model(1))
    build(backend)
    path = backend.timing_cache_path()
    elsewhere = tmp_path / "elsewhere.cache"
    elsewhere.write_bytes(path.read_bytes())
    path.unlink()
    path.symlink_to(elsewhere)
    result = build(make_backend(tiny_model(2)))
    assert f"timing cache {path.name} could not be read: started afresh" in result.variant.notes
    assert result.variant.status == "ok"


# -- IProfiler, IProgressMonitor, the inspector


def test_profiler_times_name_the_inspector_layers(trt):
    reports: list = []
    engine = build(make_backend(reports=reports)).engine
    layers = engine.layers()
    assert [layer.kind for layer in layers][:2] == ["CaskConvolution", "CaskConvolution"]
    assert layers[1].groups == 2 and layers[1].tactic.startswith("stand_in_")
    times = engine.layer_times(3)
    assert set(times) == {layer.name for layer in layers}
    assert all(len(values) == 3 and min(values) >= 0 for values in times.values())  # one report per enqueue
    assert engine.context.profiler is None
    phase = "Building the stand-in engine"
    assert reports[0] == (phase, 0, len(layers)) and reports[-1] == (phase, len(layers), len(layers))


# -- .onnx models


def onnx_model(tmp_path: Path, dynamic: bool) -> LoadedModel:
    from builders.models.catalog import load_model

    path = tmp_path / ("tiny-dynamic.onnx" if dynamic else "tiny.onnx")
    axes = {"input": {0: "batch"}, "logits": {0: "batch"}} if dynamic else None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the TorchScript exporter's deprecation notes
        torch.onnx.export(Tiny().eval(), (torch.randn(1, *SHAPE),), str(path), input_names=["input"],
                          output_names=["logits"], dynamic_axes=axes, dynamo=False)
    return load_model(str(path))


def test_an_onnx_model_with_a_free_batch_runs_at_the_study_batch(trt, tmp_path):
    backend = make_backend(onnx_model(tmp_path, dynamic=True), batch=3)
    assert backend.reference(torch.zeros(3, *SHAPE)) is None  # quality is skipped, not failed
    engine = build(backend).engine
    assert tuple(engine.buffers["input"].shape) == (3, *SHAPE)
    assert engine.infer(torch.randn(5, *SHAPE)).shape == (5, 5)
    with pytest.raises(InputError, match="holds fp32 weights and is built as it is; ask for --variants fp32"):
        build(backend, "fp16")


def test_an_onnx_model_with_a_fixed_batch_says_which(trt, tmp_path):
    with pytest.raises(InputError,
                       match=r"fixed at \[1, 3, 16, 16\]; the study feeds \[2, 3, 16, 16\] \(use --batch 1\)"):
        build(make_backend(onnx_model(tmp_path, dynamic=False), batch=2))


def test_the_parser_refuses_a_zero_scale(trt, tmp_path):
    import onnx
    from onnx import TensorProto, helper

    scale = helper.make_tensor("scale", TensorProto.FLOAT16, [], [0.0])
    zero = helper.make_tensor("zero", TensorProto.FLOAT8E4M3FN, [], [0.0])
    nodes = [helper.make_node("QuantizeLinear", ["input", "scale", "zero"], ["q"], name="q"),
             helper.make_node("DequantizeLinear", ["q", "scale", "zero"], ["logits"], name="dq")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("input", TensorProto.FLOAT16, [2, *SHAPE])],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT16, [2, *SHAPE])],
                              [scale, zero])
    path = tmp_path / "zero-scale.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)]), str(path))
    model = LoadedModel(name="zero-scale", source="onnx", onnx_path=path, input_size=SHAPE)
    with pytest.raises(InspectError,
                       match="could not parse zero-scale.onnx: stand-in parser: q: a Q/DQ scale is not positive"):
        build(make_backend(model), "fp16")


class ZeroSE(torch.nn.Module):
    """A stem, a convolution that outputs zeros and an SE block: its fc1 input quantizer sees only zeros."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.conv = torch.nn.Conv2d(8, 8, 3, padding=1)
        torch.nn.init.zeros_(self.conv.weight)
        torch.nn.init.zeros_(self.conv.bias)
        self.layer1 = torch.nn.Module()
        self.layer1.se = torch.nn.Module()
        self.layer1.se.fc1 = torch.nn.Conv2d(8, 4, 1)
        self.layer1.se.fc2 = torch.nn.Conv2d(4, 8, 1)
        self.fc = torch.nn.Linear(8, 5)

    def forward(self, x):
        x = self.conv(self.stem(x))
        se = self.layer1.se
        x = x * torch.sigmoid(se.fc2(torch.relu(se.fc1(x.mean((2, 3), keepdim=True)))))
        return self.fc(x.mean((2, 3)))


@pytest.mark.slow
def test_fp8_with_an_all_zero_se_input_passes_the_parser(trt):
    model = LoadedModel(name="zero-se", source="timm", module=ZeroSE().eval(), input_size=SHAPE)
    assert build(make_backend(model), "fp8-all").variant.status == "ok"


# -- where it runs, and what the session says


def test_the_stand_in_runs_on_the_host_only_and_says_so(trt):
    from builders.tensorrt.tensorrt_backend import TensorRTBackend

    assert TensorRTBackend.unavailable("cpu") is None
    with pytest.raises(MissingEnvironment, match="stand-in for tests runs on the host only"):
        make_backend(device="cuda")
    backend = make_backend()
    assert backend.describe() == {"tensorrt": "0.0-fake (a stand-in for tests, not TensorRT)"}
    assert backend.capabilities.layer_times == STAND_IN_LAYER_TIMES
    assert type(backend).capabilities.layer_times.startswith("TensorRT IProfiler")
    assert build(backend).variant.notes[0] == STAND_IN and "not by TensorRT" in STAND_IN


def test_without_tensorrt_the_backend_needs_it_on_the_host():
    from builders.tensorrt.tensorrt_backend import TensorRTBackend

    assert "tensorrt" not in sys.modules
    assert "TensorRT is not installed" in TensorRTBackend.unavailable("cpu")


def test_auto_picks_a_tracer_that_sees_tensorrt_layers(trt):
    from inspector.request import StudyRequest
    from inspector.resolve import resolve

    run = resolve(StudyRequest(model="resnet18", backend="tensorrt", device="cpu"))
    plan, notes = run.plan, run.notes
    assert (plan.backend, plan.device, plan.tracer) == ("tensorrt", "cpu", "trt-stand-in")
    assert notes[0] == "backend: the TensorRT stand-in for tests, as asked; tracer: trt-stand-in"


def test_auto_without_cupti_runs_tensorrt_untraced():
    from inspector.resolve import fit_tracer

    tracer, note = fit_tracer("torch", "CUPTI unavailable (x): kernels from torch.profiler", backend_class("tensorrt"),
                              "cuda", "cupti-python is not installed")
    assert tracer == "none"
    assert note == ("CUPTI unavailable (cupti-python is not installed): no kernel trace, since the tensorrt backend "
                    "marks layers with nvtx only")
    assert fit_tracer("torch", "", backend_class("torch"), "cpu", None) == ("torch", "")


# -- the study around the backend: a failing tracer or profiler costs a note, not the study


class StubEngine:
    def __init__(self, times):
        self.times = times

    def layers(self):
        from sessions.documents.model import Layer

        return [Layer(name="a", kind="CaskConvolution"), Layer(name="b", kind="Reformat")]

    def layer_times(self, calls):
        if isinstance(self.times, Exception):
            raise self.times
        return self.times

    def run_once(self): pass

    def layer_ranges(self, kind):
        import contextlib

        return contextlib.nullcontext()


class FailingTracer:
    name, range_kind = "failing", "nvtx"

    def trace(self, run_once, calls, device, synchronize):
        raise MissingEnvironment("CUPTI refused to trace (CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED)")


def run_trace_variant(engine, tracer, layer_times: str | None):
    from inspector.study import trace_variant
    from sessions.documents.model import Variant

    class Backend:
        class capabilities:
            pass

    Backend.capabilities.layer_times = layer_times
    recorder = type("Recorder", (), {"step": lambda self, *a, **k: None})()
    plan = StudyPlan(model="m", backend="tensorrt", device="cpu", variants=parse_variants("fp32", [], []), batch=1,
                     timing=TimingPlan(0, 1, 1), tracer=tracer.name)
    variant = Variant(name="fp32", backend="tensorrt", precision="fp32", device="cpu")
    return variant, trace_variant(variant, engine, plan, tracer, Backend(), recorder)


def test_a_tracer_failure_leaves_the_layers_and_profiler_times():
    variant, profiled = run_trace_variant(StubEngine({"a": [0.25, 0.75] * 5}), FailingTracer(), "IProfiler words")
    assert profiled and [(layer.name, layer.time_ms) for layer in variant.layers] == [("a", 0.5), ("b", None)]
    assert variant.layers[0].call_times_ms == [0.25, 0.75] * 5  # one report in each of the 10 profiled calls
    assert variant.notes == [("kernel trace failed, no kernels recorded: CUPTI refused to trace "
                              "(CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED)")]


def test_per_layer_words_claim_the_profiler_only_where_it_measured():
    from inspector.study import per_layer_words
    from profilers.tracers import get_tracer

    none = get_tracer("none")
    variant, profiled = run_trace_variant(StubEngine(InspectError("TensorRT could not run the engine")), none,
                                          "IProfiler")
    assert not profiled and variant.notes == ["per-layer profiler failed: TensorRT could not run the engine"]
    variant, profiled = run_trace_variant(StubEngine({"other": [1.0]}), none, "IProfiler")
    assert not profiled and "none of them by a known name" in variant.notes[0]
    backend = type("B", (), {"capabilities": type("C", (), {"layer_times": "IProfiler words"})})()
    assert per_layer_words(backend, none, "cuda", profiled=False) == "not measured (--tracer none)"
    assert per_layer_words(backend, none, "cuda", profiled=True) == "IProfiler words"


def test_without_a_reference_quality_is_skipped_with_a_note():
    from builders.models.info import ModelInfo
    from builders.study_inputs import StudyInputs
    from inspector.study import measure_quality, reference_outputs
    from sessions.analyses.captions import NO_REFERENCE
    from sessions.documents.model import Variant

    backend = type("OnnxModelBackend", (), {"reference": lambda self, batch: None})()
    rows = np.zeros((2, 3))
    inputs = StudyInputs(ModelInfo("m", "onnx", (3,)), "rows", [rows], rows, rows)
    assert reference_outputs(backend, inputs) is None
    variant = Variant(name="fp32", backend="tensorrt", precision="fp32", device="cpu")
    measure_quality(variant, None, None, inputs, None, {})
    assert variant.quality is None and variant.notes == [NO_REFERENCE]


# -- end to end, as a user runs it


@pytest.mark.slow
def test_run_resnet18_on_the_tensorrt_backend_end_to_end(tmp_path):
    from sessions.documents import storage
    from tests.conftest import ROOT, run_cli_process

    out = tmp_path / "resnet18.json"
    result = run_cli_process("run", "resnet18", "--backend", "tensorrt", "--device", "cpu",
                             "--variants", "fp32,bf16,fp8", "--fp8-layout", "all", "--rounds", "2", "--iters", "2",
                             "--warmup", "0", "--calib-count", "2",
                             "--json", "--out", str(out), env={"PYTHONPATH": f"{STAND_IN_PATH}:{ROOT}"})
    assert result.returncode == 0, result.stderr
    assert "backend: the TensorRT stand-in for tests, as asked; tracer: trt-stand-in" in result.stderr
    session = storage.load(out)
    assert session.environment.versions["tensorrt"] == "0.0-fake (a stand-in for tests, not TensorRT)"
    assert session.method.per_layer == STAND_IN_LAYER_TIMES and "not CUPTI and not TensorRT" in session.method.kernels
    assert [v.name for v in session.variants] == ["fp32", "bf16", "fp8-all"]
    for variant in session.variants:
        assert variant.status == "ok" and variant.notes[0] == STAND_IN
        assert variant.trace.tracer == "trt-stand-in" and variant.trace.unattributed == 0
        assert variant.trace.records == len(variant.kernels) > 20
        assert all(layer.time_ms and layer.time_ms > 0 for layer in variant.layers)
        assert set(variant.kernels.layer) == set(range(len(variant.layers)))  # every kernel has its layer
        assert variant.quality.top1_agreement > 0.5 and variant.latency is not None
    fp8 = session.variant("fp8-all")
    assert fp8.recipe.quantized and any(layer.kind == "Reformat" for layer in fp8.layers)
    assert np.isclose(session.variant("fp32").quality.max_abs_logit_error, 0, atol=1e-3)
