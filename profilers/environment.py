"""The machine a study ran on: host, versions, and the GPU's state as found (clocks, limits)."""

from __future__ import annotations

import os
import platform
import socket
import sys
import threading
import time
from collections.abc import Callable
from importlib import metadata
from types import TracebackType
from typing import Self

from profilers.device import study_device
from sessions.documents.model import Environment, GpuInfo, GpuSample, TimingConditions, TorchSettings

PACKAGES = (
    "trt-inspect",
    "torch",
    "timm",
    "transformers",
    "nvidia-modelopt",
    "tensorrt",
    "onnx",
    "cupti-python",
    "nvidia-cudnn-frontend",
    "cuda-python",
    "cuda-bindings",
    "nvidia-ml-py",
    "numpy",
)

# NVML clock-event reason bits (nvml.h: nvmlClocksEventReason*).
CLOCK_EVENT_REASONS = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}


def package_versions() -> dict[str, str | None]:
    versions: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def torch_settings() -> TorchSettings | None:
    """The switches in effect now, where PyTorch is loaded (never imported here: fake and ONNX paths stay light)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    backends = torch.backends
    return TorchSettings(
        cudnn_enabled=bool(backends.cudnn.enabled),
        cudnn_version=backends.cudnn.version() if backends.cudnn.is_available() else None,
        cudnn_benchmark=bool(backends.cudnn.benchmark),
        cudnn_deterministic=bool(backends.cudnn.deterministic),
        tf32_matmul=bool(backends.cuda.matmul.allow_tf32),
        tf32_cudnn=bool(backends.cudnn.allow_tf32),
        float32_matmul_precision=torch.get_float32_matmul_precision(),
    )


class ConditionSampler:
    """Samples the GPU (clocks, temperature, power) on a thread while the timed rounds run: first, every
    `interval_s`, and last. A sampler without `read` records only why nothing was sampled."""

    def __init__(self, read: Callable[[], GpuSample] | None, source: str, interval_s: float = 0.5,
                 close: Callable[[], None] | None = None) -> None:
        self._read, self._source, self._interval, self._close = read, source, interval_s, close
        self._samples: list[GpuSample] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._t0 = 0.0

    def __enter__(self) -> Self:
        if self._read is not None:
            self._t0 = time.monotonic()
            self._sample()
            self._thread = threading.Thread(target=self._loop, name="trt-inspect-gpu-sampler", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._sample()
        if self._close is not None:
            self._close()

    def _loop(self) -> None:
        while not self._stop.wait(self._interval):
            self._sample()

    def _sample(self) -> None:
        assert self._read is not None
        try:
            sample = self._read()
        except Exception as exc:  # noqa: BLE001  (a driver that stops answering ends sampling, never the study)
            self._source += f"; sampling stopped: {type(exc).__name__}: {exc}"
            self._stop.set()
            return
        sample.t_s = round(time.monotonic() - self._t0, 3)
        with self._lock:
            self._samples.append(sample)

    def conditions(self) -> TimingConditions:
        with self._lock:
            return TimingConditions(self._source, list(self._samples))


def timing_sampler(device: str, index: int = 0, interval_s: float = 0.5) -> ConditionSampler:
    """A sampler of GPU `index` through NVML, or one that says why there is nothing to sample."""
    if not study_device(device).gpu:
        return ConditionSampler(None, "not sampled: the study ran on the CPU")
    try:
        import pynvml
    except ImportError:
        return ConditionSampler(None, "not sampled: nvidia-ml-py (pynvml) is not installed")
    try:
        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(index)
    except pynvml.NVMLError as exc:
        return ConditionSampler(None, f"not sampled: NVML did not answer ({exc})")
    return ConditionSampler(lambda: _nvml_sample(pynvml, handle), f"NVML, GPU {index}, every {interval_s:g} s",
                            interval_s, close=lambda: _nvml_shutdown(pynvml))


def _nvml_sample(pynvml, handle) -> GpuSample:  # type: ignore[no-untyped-def]
    sample = GpuSample(t_s=0.0)
    _fill(sample, _nvml_state(pynvml, handle), pynvml)
    return sample


def _nvml_state(pynvml, handle) -> dict[str, Callable[[], object]]:  # type: ignore[no-untyped-def]
    """The NVML queries of the GPU's changing state, by the GpuInfo / GpuSample field each fills."""
    return {
        "sm_clock_mhz": lambda: pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM),
        "mem_clock_mhz": lambda: pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_MEM),
        "temperature_c": lambda: pynvml.nvmlDeviceGetTemperature(handle, pynvml.NVML_TEMPERATURE_GPU),
        "power_w": lambda: pynvml.nvmlDeviceGetPowerUsage(handle) / 1000.0,
        "clock_event_reasons": lambda: decode_reasons(pynvml.nvmlDeviceGetCurrentClocksEventReasons(handle)),
    }


def _fill(target: object, reads: dict[str, Callable[[], object]], pynvml) -> None:  # type: ignore[no-untyped-def]
    for key, read in reads.items():
        try:
            setattr(target, key, read())
        except (pynvml.NVMLError, AttributeError):
            pass  # not every GPU or driver answers every query


def _nvml_shutdown(pynvml) -> None:  # type: ignore[no-untyped-def]
    try:
        pynvml.nvmlShutdown()
    except pynvml.NVMLError:
        pass


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def collect(device: str, cuda_version: str | None = None) -> Environment:
    """Describe this machine; GPU facts only when `device` is cuda."""
    versions = package_versions()
    torch = sys.modules.get("torch")  # the CUDA runtime PyTorch was built with, where PyTorch runs the study
    gpu = study_device(device).gpu
    versions["cuda_runtime"] = cuda_version or (torch.version.cuda if gpu and torch else None)
    return Environment(
        host=socket.gethostname(),
        os=platform.platform(),
        cpu=_cpu_name(),
        cpu_count=os.cpu_count() or 1,
        python=sys.version.split()[0],
        versions=versions,
        gpu=gpu_info() if gpu else None,
        torch=torch_settings(),
        torch_threads=torch.get_num_threads() if torch else None,
        load_average=list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
    )


def decode_reasons(mask: int) -> list[str]:
    return [name for bit, name in CLOCK_EVENT_REASONS.items() if mask & bit]


def gpu_info(index: int = 0) -> GpuInfo | None:
    """GPU facts through NVML (nvidia-ml-py) and the CUDA runtime (cuda-bindings); None if neither answers."""
    info = _nvml_info(index)
    props = _cuda_props(index)
    if info is None and props is None:
        return None
    if info is None:
        info = GpuInfo(name=props["name"])
    if props:
        info.compute_capability = props["cc"]
        info.multiprocessors = props["sms"]
    return info


def _nvml_handle(pynvml, index: int):
    """The NVML handle of CUDA device `index`: NVML counts every GPU, CUDA only those CUDA_VISIBLE_DEVICES lists."""
    visible = [d.strip() for d in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]
    if "CUDA_VISIBLE_DEVICES" not in os.environ or index >= len(visible):
        return pynvml.nvmlDeviceGetHandleByIndex(index)
    device = visible[index]
    if device.isdigit():
        return pynvml.nvmlDeviceGetHandleByIndex(int(device))
    return pynvml.nvmlDeviceGetHandleByUUID(device)


def _nvml_info(index: int) -> GpuInfo | None:
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        return None
    try:
        handle = _nvml_handle(pynvml, index)
        info = GpuInfo(name=_text(pynvml.nvmlDeviceGetName(handle)))
        optional = {
            "uuid": lambda: _text(pynvml.nvmlDeviceGetUUID(handle)),
            "driver": lambda: _text(pynvml.nvmlSystemGetDriverVersion()),
            "cuda_driver": lambda: _cuda_version(pynvml.nvmlSystemGetCudaDriverVersion_v2()),
            "memory_mib": lambda: pynvml.nvmlDeviceGetMemoryInfo(handle).total // (1 << 20),
            "max_sm_clock_mhz": lambda: pynvml.nvmlDeviceGetMaxClockInfo(handle, pynvml.NVML_CLOCK_SM),
            "pstate": lambda: f"P{pynvml.nvmlDeviceGetPerformanceState(handle)}",
            **_nvml_state(pynvml, handle),
        }
        _fill(info, optional, pynvml)
        return info
    except pynvml.NVMLError:
        return None
    finally:
        _nvml_shutdown(pynvml)


def _cuda_props(index: int) -> dict | None:
    try:
        from cuda.bindings import runtime as cudart
    except ImportError:
        return None
    err, props = cudart.cudaGetDeviceProperties(index)
    if err != cudart.cudaError_t.cudaSuccess:
        return None
    return {
        "name": _text(props.name).rstrip("\x00"),
        "cc": f"{props.major}.{props.minor}",
        "sms": props.multiProcessorCount,
    }


def _cuda_version(number: int) -> str:
    return f"{number // 1000}.{number % 1000 // 10}"


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value
