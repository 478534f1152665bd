"""Peak device memory per variant (`Variant.peak_memory_bytes`, profilers/memory.py): measured on CUDA through
PyTorch's allocator only, None elsewhere; written, read back and shown by `show`, export, `show --json` and the TUI's
table.

The CUDA allocator is a stand-in here (no GPU): it counts the bytes the test says each step allocates, so the
expected figure is the test's own arithmetic.
"""

from __future__ import annotations

import csv
import io

import orjson
import pytest

import tests.fake_backend  # registers the fake backend and tracer; its FakeBackend is patched below
from inspector import study
from profilers.memory import DeviceMemory, device_memory
from sessions.documents import storage
from sessions.reports import views
from sessions.reports.tables import format_value
from tests.conftest import H200, run_cli
from tests.inspector.test_study_fake import fake_plan

MIB = 1 << 20


class StandInCuda:
    """torch.cuda's allocator statistics: `allocate` moves the current and the peak bytes."""

    def __init__(self, allocated: int) -> None:
        self.allocated, self.peak, self.synchronized = allocated, allocated, 0

    def allocate(self, size: int) -> None:
        self.allocated += size
        self.peak = max(self.peak, self.allocated)

    def synchronize(self) -> None:
        self.synchronized += 1

    def memory_allocated(self) -> int:
        return self.allocated

    def reset_peak_memory_stats(self) -> None:
        self.peak = self.allocated

    def max_memory_allocated(self) -> int:
        return self.peak


def test_the_peak_counts_from_before_the_build_and_holds_the_inferences_activations():
    cuda = StandInCuda(allocated=500 * MIB)  # other variants and the study's input: not this variant's
    memory = DeviceMemory(cuda)
    memory.mark()
    cuda.allocate(40 * MIB)  # the build: weights
    cuda.allocate(300 * MIB)  # ... and a calibration batch, freed before the inference
    cuda.allocate(-300 * MIB)

    def inference() -> None:
        cuda.allocate(25 * MIB)  # activations
        cuda.allocate(-25 * MIB)

    assert memory.peak_bytes(inference) == 40 * MIB + 25 * MIB  # the build's transient peak is left out
    assert cuda.synchronized >= 2  # device work finished before each read


def test_only_cuda_engines_that_allocate_through_pytorch_are_measured():
    assert device_memory("cpu", through_torch=True) is None
    assert device_memory("cuda", through_torch=False) is None  # TensorRT allocates its memory itself
    from builders.pytorch.torch_backend import TorchBackend
    from builders.tensorrt.tensorrt_backend import TensorRTBackend

    assert not TensorRTBackend.capabilities.torch_memory and TorchBackend.capabilities.torch_memory


def test_a_cpu_study_records_none_and_every_view_shows_a_dash(tmp_path):
    _, path = study.run_study(fake_plan(tmp_path), ["trt-inspect", "run", "fake-model"], lambda p: None)
    assert orjson.loads(path.read_bytes())["variants"][0]["peak_memory_bytes"] is None
    table = views.session_variant_table(storage.load(path))
    column = [c.label for c in table.columns].index("peak memory MiB")  # the table `show`, export and the TUI print
    assert [format_value(row[column], table.columns[column].kind) for row in table.rows] == ["-", "-", "-"]
    assert "peak memory MiB" in run_cli("show", str(path)).stdout


def test_a_measured_peak_is_written_read_back_and_shown(tmp_path, monkeypatch):
    sizes = iter([12 * MIB, 20 * MIB, 8 * MIB])  # what each variant's one inference allocates, in build order
    cuda = StandInCuda(allocated=0)

    def measured(device: str, through_torch: bool) -> DeviceMemory:
        return DeviceMemory(cuda)

    class Metered:
        def __init__(self, engine) -> None:
            self.engine, self.size = engine, next(sizes)

        def __call__(self) -> None:
            cuda.allocate(self.size)
            cuda.allocate(-self.size)

    original_build = tests.fake_backend.FakeBackend.build

    def build(self, variant, calibration):
        result = original_build(self, variant, calibration)
        result.engine.run_once = Metered(result.engine)
        return result

    monkeypatch.setattr(study, "device_memory", measured)
    monkeypatch.setattr(tests.fake_backend.FakeBackend, "build", build)
    _, path = study.run_study(fake_plan(tmp_path), ["trt-inspect", "run", "fake-model"], lambda p: None)
    loaded = storage.load(path)
    assert [v.peak_memory_bytes for v in loaded.variants] == [12 * MIB, 20 * MIB, 8 * MIB]
    shown = run_cli("show", str(path)).stdout
    header = next(line for line in shown.splitlines() if "peak memory MiB" in line)
    assert header.index("peak memory MiB") > header.index("images/s")
    rows = list(csv.DictReader(io.StringIO(run_cli("export", str(path), "--format", "csv").stdout)))
    assert [float(row["peak memory MiB"]) for row in rows] == pytest.approx([12.0, 20.0, 8.0])
    summary = orjson.loads(run_cli("show", str(path), "--json").stdout)
    assert [v["peak_memory_mib"] for v in summary["variants"]] == pytest.approx([12.0, 20.0, 8.0])


def test_sessions_written_before_the_field_load_without_it():
    raw = orjson.loads((H200 / "senet154-h200.json").read_bytes())
    assert all("peak_memory_bytes" not in v for v in raw["variants"])
    assert all(v.peak_memory_bytes is None for v in storage.load(H200 / "senet154-h200.json").variants)
