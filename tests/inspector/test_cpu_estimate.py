"""The CPU estimate counts what runs: the model's forward as the study's later calls run it, not the
first call's set-up; the time left counts from the first variant, not from the set-up before it; a headless run
says what is left as each variant and each timing round finishes; and the rounds to go are timed without the
warm-ups, from where the study reports their end, again after a variant fails and the rounds start over. Expected
figures come from the steps written here."""

from __future__ import annotations

import time

import pytest

from inspector.commands.output import run_headless
from inspector.cpu_defaults import PlanLine, StepEstimate, _steady
from inspector.eta import Estimate
from inspector.study import Progress

FIRST_S, LATER_S = 0.3, 0.01


def test_the_forward_is_timed_as_the_calls_after_the_first_run():
    calls = []

    def step() -> None:
        time.sleep(FIRST_S if not calls else LATER_S)
        calls.append(1)

    measured = _steady(step).wall_s
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


def test_where_the_study_reports_the_warm_ups_end_the_first_round_alone_times_the_rounds_to_go():
    now = [0.0]
    eta = Estimate(clock=lambda: now[0])
    eta.update(Progress("timing", "warm-up", None, 0, 5))
    now[0] = 8.0
    eta.update(Progress("timing", "warm-ups done", None, 0, 5))
    now[0] = 10.0  # a round of 2 s after 8 s of warm-ups: four more take 8 s
    assert eta.update(Progress("timing", "round 1/5", None, 1, 5)) == "timing: round 1 of 5; about 8 s left"


def test_rounds_started_again_after_a_variant_failed_are_timed_from_their_own_start():
    now = [0.0]
    eta = Estimate(clock=lambda: now[0])
    for done, at in [(0, 0.0), (1, 10.0), (2, 12.0)]:  # warm-ups, then rounds of 2 s
        now[0] = at
        eta.update(Progress("timing", f"round {done}/5", None, done, 5))
    now[0] = 13.0
    eta.update(Progress("timing", "fp8 failed; timing the others", "fp8"))
    eta.update(Progress("timing", "warm-up", None, 0, 5))
    now[0] = 16.0
    eta.update(Progress("timing", "warm-ups done", None, 0, 5))
    now[0] = 17.0  # the others' first round: 1 s
    assert eta.update(Progress("timing", "round 1/5", None, 1, 5)) == "timing: round 1 of 5; about 4 s left"


PLAN_LINE = PlanLine("CPU plan: fp32, fp8-all, fp8-no-se; 3 rounds of 5 inferences; estimated 1 min 05 s from here "
                     "(per variant: fp32 10.0 s, fp8-all 20.0 s, fp8-no-se 20.0 s; timing rounds 15.0 s)",
                     StepEstimate(0.0, {"fp32": 10.0, "fp8-all": 20.0, "fp8-no-se": 20.0}, 15.0))


def left_s(line: str) -> float:
    """The seconds in `about [M min ]S s left`, read apart from the code under test."""
    words = line.split("about ", 1)[1].split(" left", 1)[0].split()
    return 60 * int(words[0]) + int(words[2]) if "min" in words else int(words[0])


def test_the_time_left_follows_a_load_that_doubles_after_the_plan_and_converges_on_the_time_taken():
    """The plan said 65 s; the load then doubled: the first variant took its planned 10 s, every step after it twice
    its plan. After each finished step the time left is the whole study's, and it closes in on the truth."""
    steps = [  # (progress at the step's end, seconds the step took)
        (Progress("build", "fp32 built and traced", "fp32", 1, 3), 10.0),
        (Progress("build", "fp8-all built and traced", "fp8-all", 2, 3), 40.0),
        (Progress("build", "fp8-no-se built and traced", "fp8-no-se", 3, 3), 40.0),
        (Progress("timing", "round 1/4", None, 1, 4), 12.0),  # every variant's warm-up, then a round
        (Progress("timing", "round 2/4", None, 2, 4), 6.0),
        (Progress("timing", "round 3/4", None, 3, 4), 6.0),
    ]
    last_round_s = 6.0  # the fourth round, at the same load
    now = [0.0]
    eta = Estimate(clock=lambda: now[0])
    eta.update(Progress("setup", PLAN_LINE))
    eta.update(Progress("build", "building fp32", "fp32", 0, 3))
    errors = []
    for i, (progress, took) in enumerate(steps):
        if i == 3:
            eta.update(Progress("timing", "warm-up", None, 0, 4))  # the rounds start where the variants end
        now[0] += took
        line = eta.update(progress)
        truth = sum(seconds for _, seconds in steps[i + 1:]) + last_round_s
        errors.append(abs(left_s(line) - truth) / truth)
    assert errors[1] < errors[0] and errors[2] <= errors[1]  # closes in as the variants finish
    assert errors[2] < 0.3 and errors[-1] < 0.1  # within 30 % once the variants are done; the last rounds exact


def test_after_a_variant_the_time_left_is_the_whole_studys_at_the_studys_pace():
    now = [0.0]
    eta = Estimate(clock=lambda: now[0])
    eta.update(Progress("setup", PLAN_LINE))
    eta.update(Progress("build", "building fp32", "fp32", 0, 3))
    now[0] = 20.0  # twice the plan's 10 s; the 20 + 20 + 15 s to go weigh as planned: pace (20 + 55) / (10 + 55)
    assert eta.update(Progress("build", "fp32 built and traced", "fp32", 1, 3)) == (
        "1 of 3 variants done; about 1 min 03 s left for the study")  # 55 x 75 / 65 = 63.5 s


# A study on the 2-core CPU (efficientnet_b0, `benchmarks/cpu_estimate.py`, its log): the plan's seconds per step, then
# each step's measured seconds. fp32 took 0.46 of its plan, the FP8 variants 0.76-0.93 of theirs.
MEASURED_PLAN = StepEstimate(0.0, {"fp32": 2.6, "bf16": 1.9, "fp8-all": 7.2, "fp8-no-se": 5.4}, 6.3)
MEASURED_STEPS = {"fp32": 1.2, "bf16": 1.4, "fp8-all": 6.7, "fp8-no-se": 4.1}
MEASURED_TIMING = 5.6


def test_a_first_variant_far_from_its_plan_moves_the_estimate_by_its_share_of_the_study():
    """Every update after a variant within 30 % of what the measured study took after it (the pace of the variants
    done alone said 9 s after fp32, where 17.8 s followed)."""
    now = [0.0]
    eta = Estimate(clock=lambda: now[0])
    eta.update(Progress("setup", PlanLine("CPU plan", MEASURED_PLAN)))
    names = list(MEASURED_STEPS)
    eta.update(Progress("build", f"building {names[0]}", names[0], 0, len(names)))
    for done, name in enumerate(names, 1):
        now[0] += MEASURED_STEPS[name]
        line = eta.update(Progress("build", f"{name} built and traced", name, done, len(names)))
        truth = sum(MEASURED_STEPS[later] for later in names[done:]) + MEASURED_TIMING
        assert 0.7 <= truth / left_s(line) <= 1.3, (name, line, truth)


def test_the_rounds_to_go_are_timed_at_the_recent_rounds_pace_when_the_load_changes():
    now = [0.0]
    eta = Estimate(clock=lambda: now[0])
    eta.update(Progress("timing", "warm-up", None, 0, 8))
    for done, took in enumerate([8.0, 2.0, 2.0, 6.0, 6.0], 1):  # the warm-up and a round; then the load triples
        now[0] += took
        line = eta.update(Progress("timing", f"round {done}/8", None, done, 8))
    assert line == "timing: round 5 of 8; about 18 s left"  # 3 rounds to go at the 6 s the last ones took


def test_a_headless_run_times_what_is_left_from_the_plan_it_printed(capsys: pytest.CaptureFixture[str]):
    def study(report) -> tuple[object, object]:
        report(Progress("setup", PLAN_LINE))
        report(Progress("build", "building fp32", "fp32", 0, 3))
        report(Progress("build", "fp32 built and traced", "fp32", 1, 3))
        raise KeyboardInterrupt

    run_headless(study, False)
    lines = capsys.readouterr().err.splitlines()
    built = next(line for line in lines if "fp32 built and traced" in line)
    assert "variants done; about" in built and built.endswith("left for the study)")


def test_the_plan_is_taken_as_the_figures_it_carries_not_as_the_tenths_its_line_prints():
    """A plan of a few hundredths of a second per step prints 0.0 s for each: the figures it carries still pace the
    study. The same words in a set-up line that carries no plan are no plan."""
    steps = StepEstimate(0.0, {"fp32": 0.04, "fp8-all": 0.04}, 0.08)
    line = PlanLine(f"CPU plan: fp32, fp8-all; estimated 0 s from here ({steps.words()})", steps)
    assert "fp32 0.0 s, fp8-all 0.0 s" in line
    for setup, expected in [(line, "about 3 s left for the study"),  # 4 s for a planned 0.04: 0.12 x 4.12 / 0.16
                            (str(line), "about 4 s left for the rest, then the timing rounds")]:  # text alone: no plan
        now = [0.0]
        eta = Estimate(clock=lambda now=now: now[0])
        eta.update(Progress("setup", setup))
        eta.update(Progress("build", "building fp32", "fp32", 0, 2))
        now[0] = 4.0
        line = eta.update(Progress("build", "fp32 built and traced", "fp32", 1, 2))
        assert line == f"1 of 2 variants done; {expected}"


def test_the_plan_line_keeps_its_estimate_when_copied_or_pickled():
    import copy
    import pickle

    for again in (copy.copy(PLAN_LINE), copy.deepcopy(PLAN_LINE), pickle.loads(pickle.dumps(PLAN_LINE))):
        assert isinstance(again, PlanLine) and again == PLAN_LINE and again.steps == PLAN_LINE.steps
