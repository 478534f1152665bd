"""Sessions say what they are (sessions/documents/state.py), the live view calls finished only what is saved, the
ETA."""

import copy
import fcntl
import os

import pytest

from inspector.eta import Estimate, duration_words
from inspector.study import Progress
from sessions.analyses.captions import session_caveats
from sessions.documents import storage
from sessions.documents.state import lock_path, session_state, unfinished_step
from tests.conftest import H200

STUDY = H200 / "senet154-mainjob-warm.json"  # planned fp32, fp16 and two FP8 recipes, 5 rounds


@pytest.fixture(scope="module")
def study():
    return storage.load(STUDY)


def test_a_finished_study_is_complete(study):
    assert session_state(study, STUDY).text == "complete" and unfinished_step(study) is None


def test_a_study_stopped_while_building_says_which_variant(study, tmp_path):
    stopped = copy.deepcopy(study)
    stopped.variants = stopped.variants[:2]
    for variant in stopped.variants:
        variant.latency = None
    path = storage.save(stopped, tmp_path / "s.json")
    state = session_state(storage.load(path), path)
    assert state.text == "interrupted (building fp8-all: 2 of 4 variants built)"
    assert session_caveats(stopped)[0].startswith("incomplete session: the study stopped, or is still running, "
                                                  "at building")


def test_a_study_stopped_while_timing_says_how_many_rounds(study):
    stopped = copy.deepcopy(study)
    for variant in stopped.variants:
        variant.latency.round_medians_ms = variant.latency.round_medians_ms[:3]
    assert unfinished_step(stopped) == "timing: 3 of 5 rounds saved"


def test_running_means_a_live_process_holds_the_lock(study, tmp_path):
    stopped = copy.deepcopy(study)
    stopped.variants = []
    path = storage.save(stopped, tmp_path / "s.json")
    with storage.session_lock(path):  # what a study holds while it writes the file
        assert session_state(stopped, path).text == "running (building fp32: 0 of 4 variants built)"
    assert session_state(stopped, path).kind == "interrupted"
    fd = os.open(lock_path(path), os.O_CREAT | os.O_RDWR)  # a lock file left behind, nobody holding it
    os.close(fd)
    assert session_state(stopped, path).kind == "interrupted"
    fd = os.open(lock_path(path), os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        assert session_state(stopped, path).kind == "running"
    finally:
        os.close(fd)


def test_old_sessions_without_round_medians_still_read_complete(study):
    old = copy.deepcopy(study)
    for variant in old.variants:
        variant.latency.round_medians_ms = []
    assert unfinished_step(old) is None


def test_the_estimate_comes_from_the_steps_done():
    now = [0.0]
    eta = Estimate(clock=lambda: now[0])
    assert "an estimate once it is built" in eta.update(Progress("build", "building fp32", "fp32", 0, 4))
    now[0] = 30.0
    line = eta.update(Progress("build", "fp32 built and traced", "fp32", 1, 4))
    assert line.endswith("variants done; about 1 min 30 s left for the rest, then the timing rounds")
    assert eta.update(Progress("build", "engine", None, 3, 9)) == line  # a backend's own sub-steps are not variants
    now[0] = 40.0  # between steps the figure counts down
    assert eta.line().endswith("variants done; about 1 min 20 s left for the rest, then the timing rounds")
    now[0] = 100.0
    assert "an estimate after the first round" in eta.update(Progress("timing", "warm-up", None, 0, 5))
    now[0] = 110.0
    assert eta.update(Progress("timing", "round 2/5", None, 2, 5)) == "timing: round 2 of 5; about 15 s left"
    now[0] = 126.0  # a round slower than the ones before: said so, never a figure below zero
    assert eta.line() == "timing: round 2 of 5; about 0 s left (this step runs longer)"
    assert duration_words(59.6) == "1 min 00 s"


def test_the_cli_called_in_process_leaves_no_sigterm_handler_behind():
    import signal

    from inspector.cli import main

    before = signal.getsignal(signal.SIGTERM)
    main(["sessions"])
    assert signal.getsignal(signal.SIGTERM) is before  # pytest's own handling of SIGTERM stays
