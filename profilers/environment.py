"""The machine a study ran on: host, versions, and the GPU's state as found (clocks, limits)."""

from __future__ import annotations

import os
import platform
import socket
import sys
from importlib import metadata

from sessions.model import Environment, GpuInfo

PACKAGES = (
    "trt-inspect",
    "torch",
    "timm",
    "transformers",
    "nvidia-modelopt",
    "tensorrt",
    "onnx",
    "cupti-python",
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


def tool_version() -> str:
    try:
        return metadata.version("trt-inspect")
    except metadata.PackageNotFoundError:
        return "unknown"


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
    versions["cuda_runtime"] = cuda_version or (torch.version.cuda if device == "cuda" and torch else None)
    return Environment(
        host=socket.gethostname(),
        os=platform.platform(),
        cpu=_cpu_name(),
        cpu_count=os.cpu_count() or 1,
        python=sys.version.split()[0],
        versions=versions,
        gpu=gpu_info() if device == "cuda" else None,
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
        handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        info = GpuInfo(name=_text(pynvml.nvmlDeviceGetName(handle)))
        optional = {
            "uuid": lambda: _text(pynvml.nvmlDeviceGetUUID(handle)),
            "driver": lambda: _text(pynvml.nvmlSystemGetDriverVersion()),
            "cuda_driver": lambda: _cuda_version(pynvml.nvmlSystemGetCudaDriverVersion_v2()),
            "memory_mib": lambda: pynvml.nvmlDeviceGetMemoryInfo(handle).total // (1 << 20),
            "sm_clock_mhz": lambda: pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM),
            "mem_clock_mhz": lambda: pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_MEM),
            "max_sm_clock_mhz": lambda: pynvml.nvmlDeviceGetMaxClockInfo(handle, pynvml.NVML_CLOCK_SM),
            "clock_event_reasons": lambda: decode_reasons(pynvml.nvmlDeviceGetCurrentClocksEventReasons(handle)),
            "temperature_c": lambda: pynvml.nvmlDeviceGetTemperature(handle, pynvml.NVML_TEMPERATURE_GPU),
            "power_w": lambda: pynvml.nvmlDeviceGetPowerUsage(handle) / 1000.0,
            "pstate": lambda: f"P{pynvml.nvmlDeviceGetPerformanceState(handle)}",
        }
        for key, read in optional.items():
            try:
                setattr(info, key, read())
            except (pynvml.NVMLError, AttributeError):
                pass  # not every GPU or driver answers every query
        return info
    except pynvml.NVMLError:
        return None
    finally:
        try:
            pynvml.nvmlShutdown()
        except pynvml.NVMLError:
            pass


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
