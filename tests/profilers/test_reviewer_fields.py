"""What a reviewer of a study needs, recorded in the session: PyTorch's kernel switches, the GPU's clocks and
temperature sampled during timing (fake NVML here), the weights seed and the tool's commit."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
import types

import pytest

from profilers import environment
from sessions.documents import document, storage
from sessions.documents.model import GpuSample
from tests.fake_backend import TimedWorld
from tests.profilers.test_mutations import constant, timed_study


class FakeNvml(types.SimpleNamespace):
    """pynvml's few calls the sampler makes, with a GPU that heats up by one degree per reading."""

    class NVMLError(Exception):
        pass

    NVML_CLOCK_SM, NVML_CLOCK_MEM, NVML_TEMPERATURE_GPU = 1, 2, 0

    def __init__(self, fail_init: bool = False):
        super().__init__(readings=0, shut=False, fail_init=fail_init)

    def nvmlInit(self):
        if self.fail_init:
            raise self.NVMLError("Driver Not Loaded")

    def nvmlShutdown(self):
        self.shut = True

    def nvmlDeviceGetHandleByIndex(self, index):
        return f"gpu{index}"

    def nvmlDeviceGetClockInfo(self, handle, clock):
        return 1980 if clock == self.NVML_CLOCK_SM else 2619

    def nvmlDeviceGetTemperature(self, handle, sensor):
        self.readings += 1
        return 40 + self.readings

    def nvmlDeviceGetPowerUsage(self, handle):
        return 250_000

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle):
        return 0x20 if self.readings > 2 else 0


def test_nvml_is_sampled_during_timing_not_once(monkeypatch):
    nvml = FakeNvml()
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    with environment.timing_sampler("cuda", interval_s=0.01) as sampler:
        time.sleep(0.1)
    conditions = sampler.conditions()
    assert conditions.source == "NVML, GPU 0, every 0.01 s"
    assert len(conditions.samples) >= 3  # first, at least one in between, last
    temperatures = [s.temperature_c for s in conditions.samples]
    assert temperatures == sorted(temperatures) and temperatures[-1] > temperatures[0]
    assert conditions.samples[0].sm_clock_mhz == 1980 and conditions.samples[0].power_w == 250.0
    assert "sw_thermal_slowdown" in conditions.samples[-1].clock_event_reasons
    assert [s.t_s for s in conditions.samples] == sorted(s.t_s for s in conditions.samples)
    assert nvml.shut


def test_without_nvml_the_session_says_why_nothing_was_sampled(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", FakeNvml(fail_init=True))
    with environment.timing_sampler("cuda") as sampler:
        pass
    assert sampler.conditions().source == "not sampled: NVML did not answer (Driver Not Loaded)"
    assert sampler.conditions().samples == []
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import fails
    assert "pynvml) is not installed" in environment.timing_sampler("cuda").conditions().source
    assert environment.timing_sampler("cpu").conditions().source == "not sampled: the study ran on the CPU"


def test_a_sampler_whose_driver_stops_answering_keeps_what_it_had():
    readings = iter([GpuSample(0.0, sm_clock_mhz=1980)])
    with environment.ConditionSampler(lambda: next(readings), "fake", interval_s=0.01) as sampler:
        time.sleep(0.05)
    conditions = sampler.conditions()
    assert len(conditions.samples) == 1 and "sampling stopped: StopIteration" in conditions.source


def test_the_study_stores_the_samples_taken_while_it_timed(tmp_path, monkeypatch):
    readings = []

    def read():
        readings.append(len(readings))
        return GpuSample(0.0, sm_clock_mhz=1900 + len(readings), temperature_c=50)

    monkeypatch.setattr(environment, "timing_sampler",
                        lambda device: environment.ConditionSampler(read, "fake NVML", interval_s=0.01))
    session = timed_study(tmp_path, monkeypatch, TimedWorld({"fp32": constant(1.0), "fp16": constant(1.0)}))
    conditions = session.environment.during_timing
    assert conditions.source == "fake NVML" and len(conditions.samples) == len(readings) >= 2
    assert conditions.samples[-1].sm_clock_mhz == 1900 + len(readings)
    assert session.study.weights == "random (pretrained=False, seed 0)" and session.study.plan.seed == 0


def test_a_cpu_study_records_that_no_gpu_was_sampled(tmp_path, monkeypatch):
    session = timed_study(tmp_path, monkeypatch, TimedWorld({"fp32": constant(1.0), "fp16": constant(1.0)}))
    assert session.environment.during_timing.source == "not sampled: the study ran on the CPU"


def test_torch_switches_are_read_as_they_stand():
    torch = pytest.importorskip("torch")
    before = torch.backends.cudnn.benchmark, torch.backends.cuda.matmul.allow_tf32
    try:
        torch.backends.cudnn.benchmark, torch.backends.cuda.matmul.allow_tf32 = True, True
        settings = environment.torch_settings()
        assert (settings.cudnn_benchmark, settings.tf32_matmul) == (True, True)
        torch.backends.cudnn.benchmark, torch.backends.cuda.matmul.allow_tf32 = False, False
        settings = environment.torch_settings()
        assert (settings.cudnn_benchmark, settings.tf32_matmul) == (False, False)
    finally:
        torch.backends.cudnn.benchmark, torch.backends.cuda.matmul.allow_tf32 = before
    assert settings.tf32_cudnn == torch.backends.cudnn.allow_tf32
    assert settings.float32_matmul_precision == torch.get_float32_matmul_precision()
    assert settings.cudnn_version == (torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None)


def test_torch_switches_are_absent_where_torch_never_loaded(monkeypatch):
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    assert environment.torch_settings() is None


def git(folder, *args):
    return subprocess.run(["git", "-C", str(folder), *args], capture_output=True, text=True, check=True).stdout.strip()


def test_the_commit_of_a_checkout_is_recorded_and_local_changes_say_so(tmp_path, monkeypatch):
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    repo = tmp_path / "checkout"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / "tool.py").write_text("x = 1\n")
    git(repo, "add", "tool.py")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one")
    head = git(repo, "rev-parse", "HEAD")
    assert document.tool_commit(repo) == head
    (repo / "tool.py").write_text("x = 2\n")
    assert document.tool_commit(repo) == f"{head}-dirty"
    assert document.tool_commit(tmp_path) is None  # an installed copy: no .git beside the packages
    session = timed_study(tmp_path, monkeypatch, TimedWorld({"fp32": constant(1.0), "fp16": constant(1.0)}))
    assert session.study.tool_commit == document.tool_commit()


def test_reviewer_fields_round_trip_and_old_sessions_still_load(tmp_path):
    from tests.conftest import H200

    old = storage.load(H200 / "senet154-h200.json")  # written before these fields existed
    assert old.environment.torch is None and old.environment.during_timing is None and old.study.tool_commit is None
    old.environment.during_timing = environment.TimingConditions(
        "fake", [GpuSample(0.5, 1980, 2619, 61, 300.5, ["sw_power_cap"])])
    old.environment.torch = environment.TorchSettings(cudnn_benchmark=True, cudnn_version=92400)
    old.study.tool_commit = "abc123-dirty"
    again = storage.load(storage.save(old, tmp_path / "s.json"))
    assert again.environment == old.environment and again.study.tool_commit == "abc123-dirty"
