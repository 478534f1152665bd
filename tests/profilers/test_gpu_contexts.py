"""The GPU state: another process's CUDA context made and ended once every graph is made, and what the session says
of it."""

from __future__ import annotations

import re
import sys

import pytest

from profilers import gpu_contexts
from profilers.device import study_device
from sessions.documents import storage
from sessions.documents.vocab import GPU_STATE_NOT_SETTLED, GPU_STATE_SETTLED
from sessions.reports.sections import environment_section
from tests.conftest import H200


def test_the_host_has_no_gpu_state():
    assert study_device("cpu").settle() is None


def test_a_helper_that_ran_says_the_context_was_made(monkeypatch):
    monkeypatch.setattr(gpu_contexts, "_HELPER", "import sys; assert sys.argv[1] == '3'")
    assert gpu_contexts.settle_gpu(3) == GPU_STATE_SETTLED


@pytest.mark.parametrize(("helper", "reason"), [
    ("import sys; sys.exit('cuInit returned CUDA error 100')", "cuInit returned CUDA error 100"),
    ("raise SystemExit(7)", "exit 7"),
    ("import sys; assert sys.argv[1] == '3'", "AssertionError"),  # the device index reaches the helper
])
def test_a_helper_that_failed_says_why_and_the_study_goes_on(monkeypatch, helper, reason):
    monkeypatch.setattr(gpu_contexts, "_HELPER", helper)
    assert gpu_contexts.settle_gpu(0) == f"{GPU_STATE_NOT_SETTLED}the helper process failed ({reason})"


def test_a_helper_that_hangs_is_ended(monkeypatch):
    monkeypatch.setattr(gpu_contexts, "_HELPER", "import time; time.sleep(30)")
    monkeypatch.setattr(gpu_contexts, "TIMEOUT_S", 0.5)
    assert gpu_contexts.settle_gpu(0) == f"{GPU_STATE_NOT_SETTLED}the helper process did not end within 0.5 s"


def test_a_helper_that_failed_once_is_not_started_again_in_the_process(monkeypatch):
    """The probe settles once a shape: a driver that refused the helper is not asked again (each ask could wait a
    minute); a helper that ran is run every time."""
    started: list[int] = []
    helper = gpu_contexts._helper
    monkeypatch.setattr(gpu_contexts, "_helper", lambda index: started.append(index) or helper(index))
    monkeypatch.setattr(gpu_contexts, "_HELPER", "pass")
    assert [gpu_contexts.settle_gpu(i) for i in (0, 1)] == [GPU_STATE_SETTLED] * 2 and started == [0, 1]
    monkeypatch.setattr(gpu_contexts, "_HELPER", "raise SystemExit(7)")
    said = [gpu_contexts.settle_gpu(i) for i in (2, 3)]
    assert said == [f"{GPU_STATE_NOT_SETTLED}the helper process failed (exit 7)"] * 2 and started == [0, 1, 2]


def test_a_helper_whose_error_is_not_text_still_says_why(monkeypatch):
    monkeypatch.setattr(gpu_contexts, "_HELPER", "import sys; sys.stderr.buffer.write(bytes([0xff, 0xfe]) + b' bad'); "
                                                 "sys.exit(1)")
    assert gpu_contexts.settle_gpu(0).startswith(f"{GPU_STATE_NOT_SETTLED}the helper process failed (")


def test_the_real_helper_says_what_the_driver_said_in_one_line():
    """The real helper: settled on a GPU machine; elsewhere the driver library's own refusal (CI: no libcuda.so.1), or
    a driver call's error code, in one line, never a traceback."""
    if sys.platform != "linux":
        pytest.skip("the helper names libcuda.so.1, Linux's driver library")
    said = gpu_contexts.settle_gpu(0)
    reason = re.fullmatch(re.escape(GPU_STATE_NOT_SETTLED) + r"the helper process failed \((.*)\)", said)
    assert said == GPU_STATE_SETTLED or (reason is not None and re.fullmatch(
        r"OSError: libcuda\.so\.1: .*|cu\w+ returned CUDA error \d+", reason.group(1)))


def test_the_environment_section_says_the_gpu_state_and_a_session_keeps_it(tmp_path):
    session = storage.load(H200 / "senet154-h200.json")  # recorded before the state was settled: none
    assert session.environment.gpu_state is None and "CUDA-graph state" not in environment_section(session)
    session.environment.gpu_state = "another process made and ended a context"
    storage.save(session, tmp_path / "s.json")
    again = storage.load(tmp_path / "s.json")
    assert again.environment.gpu_state == session.environment.gpu_state
    assert "| CUDA-graph state | another process made and ended a context |" in environment_section(again)


def test_a_state_not_settled_is_a_caveat_under_the_table_and_a_settled_one_is_not():
    from sessions.analyses.captions import session_caveats

    session = storage.load(H200 / "senet154-h200.json")
    assert not any("graph state" in line for line in session_caveats(session))  # not recorded: no claim either way
    session.environment.gpu_state = GPU_STATE_SETTLED
    assert not any("graph state" in line for line in session_caveats(session))
    session.environment.gpu_state = f"{GPU_STATE_NOT_SETTLED}the helper process failed (exit 7)"
    said = [line for line in session_caveats(session) if "graph state" in line]
    assert said == [(f"CUDA-graph state {GPU_STATE_NOT_SETTLED}the helper process failed (exit 7): the rows may run "
                     "about 10 % slower than a study whose state was settled (docs/method.md, Latency)")]


def test_a_gpu_that_does_not_answer_leaves_the_rows_as_found_and_says_so(monkeypatch):
    import torch

    def no_driver() -> None:
        raise RuntimeError("Found no NVIDIA driver on your system")

    monkeypatch.setattr(torch.cuda, "synchronize", no_driver)
    assert study_device("cuda").settle() == f"{GPU_STATE_NOT_SETTLED}CUDA did not answer (RuntimeError)"


@pytest.fixture(autouse=True)
def no_failure_remembered(monkeypatch):
    """Each test starts as a fresh process does: no helper has failed yet."""
    monkeypatch.setattr(gpu_contexts, "_failed", None)
