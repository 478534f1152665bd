"""The device object: what a study on the GPU or the host is asked, and the one line for a name no study runs on."""

from __future__ import annotations

import pytest

from builders.backend import Backend, backend_class, builtin_backends
from profilers.device import CPU, CUDA, device_for, study_device
from sessions.documents.errors import InputError, MissingEnvironment


def test_each_device_answers_for_itself():
    assert (study_device("cuda").gpu, study_device("cuda").words, study_device("cuda").timer) == (
        True, "CUDA", "cuda-events")
    assert (study_device("cpu").gpu, study_device("cpu").words, study_device("cpu").timer) == (
        False, "the CPU", "perf_counter")
    assert study_device("cpu").capability() is None
    study_device("cpu").synchronize()  # nothing queued on the host: returns at once, without torch.cuda
    assert device_for(True) is CUDA and device_for(False) is CPU


def test_a_name_no_study_runs_on_is_one_line():
    with pytest.raises(InputError, match="^unknown device 'tpu'; use cuda or cpu$"):
        study_device("tpu")


# every backend shipped, found by file name as the CLI finds them; one that cannot be imported here is skipped
BACKENDS = sorted(builtin_backends())
# the first line's words for each backend on each device, written out here (TensorRT names no device, and on the CPU
# only its stand-in runs)
CHOICE_LABELS = {
    ("cudnn", "cuda"): "cuDNN / cuBLASLt engine on CUDA", ("cudnn", "cpu"): "cuDNN / cuBLASLt engine on the CPU",
    ("compile", "cuda"): "torch.compile (Inductor) on CUDA", ("compile", "cpu"): "torch.compile (Inductor) on the CPU",
    ("tensorrt", "cuda"): "TensorRT", ("tensorrt", "cpu"): "the TensorRT stand-in for tests",
    ("torch", "cuda"): "PyTorch on CUDA", ("torch", "cpu"): "PyTorch on the CPU",
}


def importable_backend(name: str) -> type[Backend]:
    try:
        return backend_class(name)
    except MissingEnvironment as exc:
        pytest.skip(f"backend {name} cannot be imported here: {exc.message}")


@pytest.mark.parametrize("name", BACKENDS)
@pytest.mark.parametrize(("asked", "has_gpu", "runs_on"), [
    (None, True, "cuda"), (None, False, "cpu"), ("cpu", True, "cpu"), ("cuda", True, "cuda"), ("cpu", False, "cpu"),
])
def test_a_backend_runs_on_the_gpu_where_one_is_visible_unless_the_cpu_is_asked_for(name, asked, has_gpu, runs_on):
    cls = importable_backend(name)
    assert cls.device_for(asked, has_gpu) == runs_on
    assert (name, runs_on) in CHOICE_LABELS, f"a backend with no first line written here: {name}"
    assert cls.choice_label(runs_on) == CHOICE_LABELS[name, runs_on]
