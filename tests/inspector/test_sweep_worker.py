"""A sweep job's worker process: a SIGTERM (a scheduler's cancel) ends the job like Ctrl-C, and says so."""

from __future__ import annotations

import os
import signal
import time

import pytest

from inspector.sweep import worker
from inspector.sweep.jobs import Job, SweepFolder
from sessions.documents.errors import ExitCode
from sessions.documents.plan import StudyPlan, TimingPlan, VariantPlan


def test_a_sigterm_cancels_the_job_and_leaves_its_outcome(tmp_path, monkeypatch):
    import inspector.study

    folder = SweepFolder(tmp_path)
    plan = StudyPlan(model="m", backend="torch", device="cpu", variants=(VariantPlan("fp16"),), batch=1,
                     timing=TimingPlan(0.0, 1, 1), tracer="none")
    folder.write_job(Job("k", {}, plan, ("trt-inspect", "run", "m")))

    def terminated(*args: object) -> None:
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)
        pytest.fail("the SIGTERM did not interrupt the job")

    def ignored(signum: int, frame: object) -> None:  # without the worker's handler, the test process lives on
        pass

    monkeypatch.setattr(inspector.study, "run_study", terminated)
    previous = signal.signal(signal.SIGTERM, ignored)
    try:
        assert worker.main([str(tmp_path), "k"]) == ExitCode.INTERRUPTED
        assert signal.getsignal(signal.SIGTERM) is ignored  # the worker's handler only while the job runs
    finally:
        signal.signal(signal.SIGTERM, previous)
    outcome = folder.read_status("k")
    assert outcome is not None and (outcome.state, outcome.error) == ("cancelled", "interrupted (SIGINT or SIGTERM)")


def test_a_mismatched_torch_pair_fails_the_job_with_the_checks_line(tmp_path, monkeypatch):
    import inspector.study
    from inspector import torch_stack
    from sessions.documents.errors import MissingEnvironment

    folder = SweepFolder(tmp_path)
    plan = StudyPlan(model="m", backend="torch", device="cpu", variants=(VariantPlan("fp16"),), batch=1,
                     timing=TimingPlan(0.0, 1, 1), tracer="none")
    folder.write_job(Job("k", {}, plan, ("trt-inspect", "run", "m")))

    def mismatched() -> None:
        raise MissingEnvironment("torch and torchvision do not match: a stand-in pair")

    def never(*args: object) -> None:
        pytest.fail("the study ran although the pair does not match")

    monkeypatch.setattr(torch_stack, "check", mismatched)
    monkeypatch.setattr(inspector.study, "run_study", never)
    assert worker.main([str(tmp_path), "k"]) == MissingEnvironment("").exit_code
    outcome = folder.read_status("k")
    assert outcome is not None and (outcome.state, outcome.error) == (
        "failed", "torch and torchvision do not match: a stand-in pair")
