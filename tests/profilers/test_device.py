"""The device object: what a study on the GPU or the host is asked, and the one line for a name no study runs on."""

from __future__ import annotations

import pytest

from builders.backend import backend_class
from profilers.device import CPU, CUDA, device_for, study_device
from sessions.documents.errors import InputError


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


@pytest.mark.parametrize(("asked", "has_gpu", "runs_on"), [
    (None, True, "cuda"), (None, False, "cpu"), ("cpu", True, "cpu"), ("cuda", True, "cuda"), ("cpu", False, "cpu"),
])
def test_a_backend_runs_on_the_gpu_where_one_is_visible_unless_the_cpu_is_asked_for(asked, has_gpu, runs_on):
    assert backend_class("torch").device_for(asked, has_gpu) == runs_on
    assert backend_class("torch").choice_label(runs_on) == f"PyTorch on {'CUDA' if runs_on == 'cuda' else 'the CPU'}"
