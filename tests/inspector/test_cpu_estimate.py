"""The CPU estimate counts what runs (issue 37, item 7): the model's forward as the study's later calls run it, not the
first call's set-up; the time left counts from the first variant, not from the set-up before it; and a headless run
says what is left as each variant and each timing round finishes. Expected figures come from the steps written here."""

from __future__ import annotations

import time

import pytest

from inspector.commands.output import run_headless
from inspector.cpu_defaults import _steady
from inspector.eta import Estimate
from inspector.study import Progress

FIRST_S, LATER_S = 0.3, 0.01


def test_the_forward_is_timed_as_the_calls_after_the_first_run():
    calls = []

    def step() -> None:
        time.sleep(FIRST_S if not calls else LATER_S)
        calls.append(1)

    measured = _steady(step)
    assert len(calls) >= 2
    assert LATER_S <= measured < (FIRST_S + LATER_S) / 2  # a later call's time; the set-up call's is far above


def test_the_time_left_counts_from_the_first_variant_not_from_the_set_up():
    now = [0.0]
    eta = Estimate(clock=lambda: now[0])
    now[0] = 50.0  # model loaded, CPU measured: the set-up took 50 s
    eta.update(Progress("build", "building fp32", "fp32", 0, 4))
    now[0] = 60.0  # one variant in 10 s: three more take 30 s
    assert eta.update(Progress("build", "fp32 built and traced", "fp32", 1, 4)).endswith(
        "about 30 s left for the rest, then the timing rounds")


def test_a_headless_run_says_what_is_left_as_variants_and_rounds_finish(capsys: pytest.CaptureFixture[str]):
    def study(report) -> tuple[object, object]:
        report(Progress("setup", "CPU plan: fp32, fp8-all; estimated 30 s from here"))
        report(Progress("build", "building fp32", "fp32", 0, 2))
        report(Progress("build", "fp32 built and traced", "fp32", 1, 2))
        report(Progress("timing", "warm-up", None, 0, 3))
        report(Progress("timing", "round 1/3", None, 1, 3))
        report(Progress("timing", "round 2/3", None, 2, 3))
        raise KeyboardInterrupt  # ends the run here: no session to print

    run_headless(study, False)
    lines = capsys.readouterr().err.splitlines()
    by_message = {line.split("] ", 1)[1].split(" (")[0]: line for line in lines if "] " in line}
    assert "(1 of 2 variants done; about" in by_message["fp32 built and traced"]
    assert "(timing: round 1 of 3; about" in by_message["round 1/3"]
    assert "(timing: round 2 of 3; about" in by_message["round 2/3"]
    assert "(" not in by_message["CPU plan: fp32, fp8-all; estimated 30 s from here"]


def test_rounds_after_the_first_are_timed_without_the_warm_up_the_first_one_holds():
    now = [0.0]
    eta = Estimate(clock=lambda: now[0])
    eta.update(Progress("timing", "warm-up", None, 0, 5))
    now[0] = 10.0  # 8 s of warm-up, then a round of 2 s
    eta.update(Progress("timing", "round 1/5", None, 1, 5))
    now[0] = 12.0
    assert eta.update(Progress("timing", "round 2/5", None, 2, 5)) == "timing: round 2 of 5; about 6 s left"
