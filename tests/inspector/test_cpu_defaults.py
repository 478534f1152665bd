"""The CPU policy: threads from cores and load, bf16 from a measurement, counts and variants from the model's cost."""

from collections.abc import Callable
from dataclasses import replace

import pytest

from inspector import cpu_defaults
from inspector.cpu_defaults import (
    BUDGET_S,
    LADDER,
    Bf16Timing,
    Machine,
    choose_threads,
    estimate_s,
    fit_cpu_plan,
    least_alternated,
)
from inspector.request import CPU_TIMING, StudyRequest
from profilers.images import STRESS_CASES, stress_inputs
from sessions.analyses.captions import session_caveats
from sessions.documents.model import Environment, LatencyStats, Session, Study, Variant
from sessions.documents.plan import StudyPlan, parse_variants


def machine(forward_s: float, bf16_ratio: float = 1.0, threads: int = 1) -> Machine:
    bf16 = Bf16Timing("a 3 x 3 convolution", 0.001, 0.001 * bf16_ratio, "the least of 7 alternated calls each")
    return Machine(cores=2, load=(1.5, 1.0, 0.5), threads=threads, forward_s=forward_s, single_s=forward_s, bf16=bf16)


def cpu_plan(variants: str = "fp32,bf16,fp8", recipes: tuple[str, ...] = (), **changes) -> StudyPlan:
    plan = StudyPlan(model="senet154", backend="torch", device="cpu", batch=1, timing=CPU_TIMING, tracer="torch",
                     variants=parse_variants(variants, list(recipes), []))
    return replace(plan, **changes)


@pytest.fixture
def measured(monkeypatch):
    """fit_cpu_plan with the machine measurement replaced: set `.value` to the Machine it should see."""
    holder = type("Holder", (), {"value": machine(1.0)})()
    monkeypatch.setattr(cpu_defaults, "measure_machine", lambda plan: holder.value)
    monkeypatch.setattr(cpu_defaults, "_available_images", lambda plan: 18)
    return holder


@pytest.mark.parametrize(("cores", "load", "threads"),
                         [(2, 0.0, 2), (2, 0.4, 2), (2, 1.2, 1), (2, 14.0, 1), (16, 3.6, 12)])
def test_threads_are_the_cores_the_load_leaves_free(cores, load, threads):
    assert choose_threads(cores, load) == threads


def test_a_cheap_model_keeps_the_full_defaults_and_bf16_where_it_is_fast(measured):
    measured.value = machine(0.01, bf16_ratio=1.1)
    plan, notes = fit_cpu_plan(cpu_plan(), StudyRequest("resnet18"))
    assert [v.name for v in plan.variants] == ["fp32", "bf16", "fp8-all", "fp8-no-se"]
    assert (plan.eval_count, plan.calib_count, plan.stress_count) == (None, 16, None)
    assert (plan.timing.rounds, plan.timing.iters) == (LADDER[0].rounds, LADDER[0].iters)
    assert plan.threads == 1 and any(note.startswith("CPU: 2 cores, load average 1.5 / 1.0 / 0.5") for note in notes)


def test_a_costly_model_gets_fewer_counts_within_the_budget_and_no_slow_bf16(measured):
    measured.value = machine(0.9, bf16_ratio=33.0)
    plan, notes = fit_cpu_plan(cpu_plan(), StudyRequest("senet154"))
    assert "bf16" not in [v.name for v in plan.variants]
    assert any(note.startswith("bf16 left out: it ran 33x slower") for note in notes)
    assert any("a 3 x 3 convolution took 33 ms in bf16 against 1 ms in fp32 (the least of 7 alternated calls each)"
               in note for note in notes)
    assert plan.eval_count is not None and plan.eval_count < 18 and plan.stress_count < STRESS_CASES
    estimate = estimate_s(plan, measured.value, 18, plan.stress_count)
    assert estimate <= BUDGET_S
    line = next(note for note in notes if note.startswith("CPU plan:"))
    assert f"estimated {cpu_defaults._duration(estimate)} from here" in line and "over the" not in line


def test_what_the_user_set_is_kept(measured):
    measured.value = machine(0.9, bf16_ratio=33.0)
    request = StudyRequest("senet154", variants="fp32,bf16,fp8", rounds=7, iters=9, calib_count=12, eval_count=5,
                           threads=2)
    plan, _ = fit_cpu_plan(cpu_plan(threads=2, calib_count=12, eval_count=5), request)
    assert [v.name for v in plan.variants][:2] == ["fp32", "bf16"]
    assert (plan.timing.rounds, plan.timing.iters, plan.calib_count, plan.eval_count) == (7, 9, 12, 5)


def test_when_no_count_fits_the_default_second_recipe_goes_but_a_named_one_stays(measured):
    measured.value = machine(4.0, bf16_ratio=33.0)
    plan, notes = fit_cpu_plan(cpu_plan(), StudyRequest("senet154"))
    assert [v.name for v in plan.variants] == ["fp32", "fp8-all"]
    assert any("left out to fit the time: fp8-no-se" in note for note in notes)
    named, notes = fit_cpu_plan(cpu_plan(recipes=("all", "no-se")),
                                StudyRequest("senet154", fp8_recipes=("all", "no-se")))
    assert [v.name for v in named.variants] == ["fp32", "fp8-all", "fp8-no-se"]
    assert any("over the" in note for note in notes)


def test_the_estimate_follows_the_measured_cost_and_the_plans_steps():
    plan = cpu_plan("fp32,fp8", ("all",))
    slow, fast = estimate_s(plan, machine(2.0), 18, 5), estimate_s(plan, machine(1.0), 18, 5)
    fixed = (cpu_defaults.BEFORE_S + 2 * cpu_defaults.VARIANT_S  # fp32 and one FP8 variant, whatever the model
             + cpu_defaults.FP8_VARIANT_S + cpu_defaults.FIRST_FP8_TRACE_S)
    assert slow - fixed == pytest.approx(2 * (fast - fixed))
    more_rounds = replace(plan, timing=replace(plan.timing, rounds=plan.timing.rounds * 2))
    assert estimate_s(more_rounds, machine(1.0), 18, 5) > fast
    assert estimate_s(plan, machine(1.0), 18, 15) > fast
    assert estimate_s(cpu_plan("fp32"), machine(1.0), 18, 5) < fast


def test_stress_inputs_thinned_evenly_keep_the_extremes_apart():
    names = [name for name, _ in stress_inputs((3, 4, 4), 5)]
    assert names == ["zeros", "constant 255", "checkerboard saturated", "extreme +-65504", "noise sigma 1"]
    assert len(stress_inputs((3, 4, 4))) == STRESS_CASES
    assert len({name for name, _ in stress_inputs((3, 4, 4), 14)}) == 14


def _noisy_session(device: str) -> Session:
    study = Study(model="m", source="timm", input_shape=[3, 8, 8], batch=1, command=[], created="", backend="torch",
                  device=device, tool_version="0")
    env = Environment(host="h", os="linux", cpu="cpu", cpu_count=2, python="3.11", versions={}, torch_threads=1,
                      load_average=[3.2, 2.0, 1.0])
    noisy = LatencyStats(samples_ms=[1.0, 1.2], min_ms=1.0, median_ms=1.1, mean_ms=1.1, p90_ms=1.2, p99_ms=1.2,
                         max_ms=1.2, std_ms=0.1, cov=0.09, round_medians_ms=[1.0, 1.2], round_cov=0.1)
    variant = Variant(name="fp32", backend="torch", precision="fp32", device=device, latency=noisy)
    return Session(study=study, environment=env, method=None, variants=[variant])  # type: ignore[arg-type]


def test_noise_advice_on_the_cpu_names_threads_and_load_and_no_clocks():
    cpu = " ".join(session_caveats(_noisy_session("cpu")))
    assert "lock clocks" not in cpu and "1 PyTorch thread and load average 3.2 / 2.0 / 1.0" in cpu
    assert "lock clocks" in " ".join(session_caveats(_noisy_session("cuda")))


def test_resolve_hands_a_cpu_study_to_the_policy(measured):
    from inspector.resolve import resolve

    measured.value = machine(0.9, bf16_ratio=33.0)
    run = resolve(StudyRequest("test_resnet", device="cpu"))
    plan, notes = run.plan, run.notes
    assert plan.threads == 1 and "bf16" not in [v.name for v in plan.variants]
    assert any(note.startswith("CPU plan:") for note in notes)


def test_a_model_whose_forward_fails_keeps_the_defaults_with_a_note(monkeypatch):
    def failing(plan):
        raise RuntimeError("Given groups=1, weight of size [8, 3, 3, 3], expected input to have 3 channels\nmore")

    monkeypatch.setattr(cpu_defaults, "measure_machine", failing)
    plan = cpu_plan()
    fitted, notes = fit_cpu_plan(plan, StudyRequest("senet154"))
    assert fitted == plan
    expected = ("CPU plan: the defaults as they are; timing the model's fp32 forward failed: Given groups=1, "
                "weight of size [8, 3, 3, 3], expected input to have 3 channels")
    assert notes == [expected]


def test_a_simulated_fp8_variant_is_costed_at_the_measured_quantizers_not_a_fixed_ratio():
    plan = cpu_plan("fp32,fp8", ("all",), eval_count=4, calib_count=4, stress_count=3)
    cheap = replace(machine(0.05), fp8_ratios={"fp8-all": 1.2})
    costly = replace(machine(0.05), fp8_ratios={"fp8-all": 4.0})
    steps_cheap = cpu_defaults.estimate_steps(plan, cheap, 18, 3)
    steps_costly = cpu_defaults.estimate_steps(plan, costly, 18, 3)
    assert steps_costly.variants["fp32"] == steps_cheap.variants["fp32"]
    assert steps_costly.variants["fp8-all"] > 2 * steps_cheap.variants["fp8-all"] - steps_cheap.variants["fp32"]
    assert steps_costly.timing > steps_cheap.timing


def test_the_quantized_inputs_are_every_convolution_and_linear_call_by_module_path():
    import torch

    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU(), torch.nn.Conv2d(4, 2, 1),
                                torch.nn.Flatten(), torch.nn.Linear(2 * 6 * 6, 5))
    shapes = cpu_defaults.quantized_inputs(model, torch.zeros(1, 3, 8, 8))
    assert {path: [tuple(shape) for shape in calls] for path, calls in shapes.items()} == {
        "0": [(1, 3, 8, 8)], "2": [(1, 4, 6, 6)], "4": [(1, 72)]}


def _stem_trunk_head():
    """A stem convolution, a 1 x 1 and a 3 x 3 convolution, a linear head; its input: 3 x 16 x 16."""
    import torch

    return torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU(), torch.nn.Conv2d(4, 4, 1),
                               torch.nn.Conv2d(4, 4, 3, padding=1), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(),
                               torch.nn.Linear(4, 5)), torch.zeros(1, 3, 16, 16)


def test_a_variants_fp8_forward_counts_only_the_quantizers_its_recipe_places(monkeypatch):
    """The recipes keep the stem and the head out (and pointwise the 3 x 3 convolution, an exclusion pattern what it
    names): their inputs cost a variant's forward nothing."""
    from builders.models.structure import model_structure
    from builders.recipes.fp8 import select

    model, sample = _stem_trunk_head()
    structure = model_structure(model, sample)
    paths = {name: set(select(structure, recipe, exclude).quantized)
             for name, recipe, exclude in [("fp8-all", "all", []), ("fp8-pointwise", "pointwise", []),
                                           ("fp8-all-but-3", "all", ["3"])]}
    per_element_s = 1e-5  # a quantizer's time per input element, in this stand-in for ModelOpt's
    timed = set()

    def quantizers_s(shapes):
        timed.update(shapes)
        return {path: sum(per_element_s * shape.numel() for shape in calls) for path, calls in shapes.items()}

    monkeypatch.setattr(cpu_defaults, "quantizers_s", quantizers_s)
    ratios = cpu_defaults.fp8_forward_ratios(model, sample, 0.01, paths)
    assert timed == {"2", "3"}  # the stem ("0") and the head ("6") are no recipe's: not timed
    pointwise, spatial = 4 * 14 * 14, 4 * 14 * 14  # input elements of each layer
    assert ratios == pytest.approx({"fp8-all": 1 + (pointwise + spatial) * per_element_s / 0.01,
                                    "fp8-pointwise": 1 + pointwise * per_element_s / 0.01,
                                    "fp8-all-but-3": 1 + pointwise * per_element_s / 0.01})


def test_each_fp8_variant_is_costed_at_its_own_ratio():
    plan = cpu_plan("fp32,fp8", ("all", "pointwise"), eval_count=4, calib_count=4, stress_count=3)
    measured = replace(machine(0.05), fp8_ratios={"fp8-all": 3.0, "fp8-pointwise": 1.5})
    steps = cpu_defaults.estimate_steps(plan, measured, 18, 3)
    same = replace(measured, fp8_ratios={"fp8-all": 3.0, "fp8-pointwise": 3.0})
    assert steps.variants["fp8-pointwise"] < cpu_defaults.estimate_steps(plan, same, 18, 3).variants["fp8-pointwise"]


@pytest.mark.parametrize("fp8_ratio", [1.3, 4.5])
def test_each_calibration_sample_costs_about_one_fp32_forward_whatever_the_fp8_forward_costs(fp8_ratio):
    """ModelOpt's max calibration only takes |x|'s largest value at each quantizer, over batched samples: twelve more
    calibration images add twelve `CALIBRATION_FORWARD`s of one sample to the first FP8 variant, at a cheap FP8
    forward and at a costly one (a small model's quantizers are most of its FP8 forward, none of its calibration)."""
    few = cpu_plan("fp32,fp8", ("all",), eval_count=4, calib_count=4, stress_count=3)
    measured = replace(machine(0.05), fp8_ratios={"fp8-all": fp8_ratio}, fp8_build_s=0.5)
    added = (cpu_defaults.estimate_steps(replace(few, calib_count=16), measured, 18, 3).variants["fp8-all"]
             - cpu_defaults.estimate_steps(few, measured, 18, 3).variants["fp8-all"])
    assert added == pytest.approx(12 * 0.05 * cpu_defaults.CALIBRATION_FORWARD)


def test_the_plan_line_states_the_estimate_per_step_and_they_add_up_to_it(measured):
    import re

    measured.value = machine(0.05)
    plan, notes = fit_cpu_plan(cpu_plan("fp32,fp8", ("all",)), StudyRequest("resnet18"))
    line = next(note for note in notes if note.startswith("CPU plan:"))
    stated = [float(x) for x in re.findall(r"(?:fp32|fp8-all|timing rounds) (\d+\.\d) s", line)]
    total = estimate_s(plan, measured.value, 18, cpu_defaults._stress(plan))
    assert len(stated) == 3 and 0 < total - sum(stated) < total / 2  # the rest: the reference before the variants


def test_the_calibration_is_costed_once_for_the_study_not_per_fp8_variant():
    """The study's FP8 recipes take copies of one calibration: more calibration images cost the first FP8 variant
    more, and the second nothing."""
    few = cpu_plan("fp32,fp8", ("all", "no-se"), eval_count=4, calib_count=2, stress_count=3)
    many = replace(few, calib_count=16)
    steps_few = cpu_defaults.estimate_steps(few, machine(0.05), 18, 3)
    steps_many = cpu_defaults.estimate_steps(many, machine(0.05), 18, 3)
    assert steps_many.variants["fp8-all"] > steps_few.variants["fp8-all"]
    assert steps_many.variants["fp8-no-se"] == steps_few.variants["fp8-no-se"]


def test_quantizers_that_fail_to_time_cost_the_fixed_ratio_and_keep_the_plan(monkeypatch):
    import torch

    def failing(shapes):
        raise RuntimeError("a quantizer that cannot run here")

    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3))
    sample, fixed = torch.zeros(1, 3, 8, 8), cpu_defaults.FP8_FORWARD
    monkeypatch.setattr(cpu_defaults, "quantizers_s", failing)
    assert cpu_defaults.fp8_forward_ratios(model, sample, 0.01, {"fp8-all": {"0"}}) == {"fp8-all": fixed}
    monkeypatch.setattr(cpu_defaults, "quantizers_s", lambda shapes: dict.fromkeys(shapes, 0.03))
    assert cpu_defaults.fp8_forward_ratios(model, sample, 0.01, {"fp8-all": {"0"}}) == {"fp8-all": pytest.approx(4.0)}


def test_modelopts_quantizer_is_timed_per_module_path():
    import torch

    seconds = cpu_defaults.quantizers_s({"conv": [torch.Size((1, 4, 8, 8)), torch.Size((1, 4, 8, 8))], "idle": []})
    assert set(seconds) == {"conv"} and seconds["conv"] > 0


def test_work_is_divided_by_the_share_of_a_core_and_the_warm_up_is_wall_time():
    """At half a core every step takes twice its work; the warm-up, which runs for its seconds, does not stretch."""
    plan = cpu_plan("fp32,fp8", ("all",), eval_count=4, calib_count=4, stress_count=3)
    full, half = machine(0.01), replace(machine(0.01), share=0.5)
    alone, loaded = cpu_defaults.estimate_steps(plan, full, 18, 3), cpu_defaults.estimate_steps(plan, half, 18, 3)
    assert loaded.before == pytest.approx(2 * alone.before)
    assert loaded.variants == pytest.approx({name: 2 * s for name, s in alone.variants.items()})
    warm_up = len(plan.variants) * plan.timing.warmup_s  # each variant's forward is far below its warm-up
    assert plan.timing.warmup_s > 0.1
    assert loaded.timing - warm_up == pytest.approx(2 * (alone.timing - warm_up))


def test_a_call_is_counted_as_its_cpu_seconds_at_one_thread_and_as_its_wall_at_more():
    from inspector.cpu_defaults import Pace

    waited = Pace(wall_s=2.0, cpu_s=0.5)  # three quarters of the call waited for a core
    assert waited.work_s(1) == 0.5 and waited.share(1) == 0.25
    assert waited.work_s(2) == 2.0
    assert Pace(wall_s=1.0, cpu_s=1.5).work_s(1) == 1.0  # a helper thread's CPU: never more than the wall
    assert Pace(wall_s=1.0, cpu_s=1.5).share(1) == 1.0
    assert Pace(wall_s=1.0, cpu_s=0.0).share(1) == cpu_defaults.MIN_SHARE


def test_the_share_is_the_processs_cpu_over_its_life_from_proc():
    ticks = 100
    stat = "4242 (python (x)) R " + " ".join(["0"] * 10) + " 1500 500 " + " ".join(["0"] * 6) + " 1000 0 0"
    #       fields 4-13 (10 zeros), utime 15 s and stime 5 s in ticks, fields 16-21, starttime at 10 s after boot
    assert cpu_defaults.share_from_proc(stat, "50.0 90.0", ticks) == pytest.approx(20 / 40)
    assert cpu_defaults.share_from_proc(stat, "20.0 9.0", ticks) == 1.0  # more CPU than wall: threads; one core's
    assert cpu_defaults.share_from_proc(stat, "10.0 9.0", ticks) is None


def test_the_first_fp8_variant_is_costed_at_its_measured_build_and_forward():
    """A measured build replaces the fixed guess for the first FP8 variant only, with the calibration forwards of the
    samples it did not calibrate on; the measured forward's excess over the quantizers' scales every FP8 ratio."""
    plan = cpu_plan("fp32,fp8", ("all", "no-se"), eval_count=4, calib_count=4, stress_count=3)
    guessed = replace(machine(0.01), fp8_ratios={"fp8-all": 2.0, "fp8-no-se": 1.5})
    built = replace(guessed, fp8_build_s=3.0)
    steps_guessed = cpu_defaults.estimate_steps(plan, guessed, 18, 3)
    steps_built = cpu_defaults.estimate_steps(plan, built, 18, 3)
    per_sample = 0.01 * cpu_defaults.CALIBRATION_FORWARD
    guess = (cpu_defaults.FP8_BUILD + cpu_defaults.STRUCTURE_FORWARD) * 0.01 + 4 * per_sample
    assert steps_built.variants["fp8-all"] - steps_guessed.variants["fp8-all"] == pytest.approx(
        3.0 + 3 * per_sample - guess)
    assert steps_built.variants["fp8-no-se"] == steps_guessed.variants["fp8-no-se"]
    assert cpu_defaults.fp8_scale(2.0, 4.0) == pytest.approx(3.0)  # quantizers said +1 forward, the variant took +3
    assert cpu_defaults.fp8_scale(1.0, 4.0) == 1.0 and cpu_defaults.fp8_scale(2.0, 0.9) == 1.0


def test_the_first_fp8_variant_is_built_and_timed_as_the_study_builds_it(monkeypatch):
    import torch

    from builders.pytorch import variant_modules
    from sessions.documents.plan import VariantPlan

    model, sample = _stem_trunk_head()
    measured = cpu_defaults.measure_fp8(model.eval(), VariantPlan("fp8", "all", ()), sample, 1)
    assert measured is not None and measured[0] > 0 and measured[1] > 0
    timed = []
    paces = [cpu_defaults.Pace(0.02, 0.01), cpu_defaults.Pace(0.09, 0.03)]

    def in_turn(first, second):
        timed.append((first(), second()))
        return paces[0], paces[1]

    monkeypatch.setattr(cpu_defaults, "_steady_in_turn", in_turn)
    _build_s, ratio = cpu_defaults.measure_fp8(model.eval(), VariantPlan("fp8", "all", ()), sample, 1)
    assert ratio == pytest.approx(3.0) and len(timed) == 1  # at one thread: CPU seconds, the FP8 call's over fp32's
    with torch.no_grad():
        fp32_output = model(sample)
    assert torch.equal(timed[0][0], fp32_output) and not torch.equal(timed[0][1], fp32_output)  # fp32 first
    paces[0] = cpu_defaults.Pace(0.0, 0.0)  # a clock too coarse to see the fp32 call
    assert cpu_defaults.measure_fp8(model.eval(), VariantPlan("fp8", "all", ()), sample, 1) is None

    def failing(*args, **kwargs):
        raise AssertionError("detected inf values in amax")  # as ModelOpt's calibrator says it

    monkeypatch.setattr(variant_modules, "variant_module", failing)
    assert cpu_defaults.measure_fp8(model, VariantPlan("fp8", "all", ()), sample, 1) is None


class SlowingMachine:
    """A clock (wall and CPU alike) that each call advances by its seconds, 1.5x from half of `STEADY_S` on."""

    def __init__(self) -> None:
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now

    process_time = perf_counter

    def call(self, seconds: float) -> Callable[[], None]:
        def step() -> None:
            self.now += seconds * (1.5 if self.now > cpu_defaults.STEADY_S / 2 else 1.0)

        return step


def test_the_fp8_forward_ratio_is_timed_in_turn_so_a_slow_spell_of_the_machine_meets_both_sides(monkeypatch):
    """A machine that runs every call 1.5x slower from half the measuring time on: timed in turn, the FP8 call's 3x
    over the fp32 call's holds; in two windows one after the other (the second wholly slow), it would read 3.6x."""
    machine = SlowingMachine()
    monkeypatch.setattr(cpu_defaults, "time", machine)
    fp32, fp8 = cpu_defaults._steady_in_turn(machine.call(0.01), machine.call(0.03))
    assert machine.now > cpu_defaults.STEADY_S  # the slow spell came and was measured
    assert fp8.work_s(1) / fp32.work_s(1) == pytest.approx(3.0, rel=0.01)


def test_a_variants_trace_is_costed_at_the_measured_traced_call():
    """Seven traced calls at the measured traced call's work (times the variant's ratio), not at a fixed 1.5
    forwards; the untraced calls before them at the forward's."""
    plan = cpu_plan("fp32,fp8", ("all",), eval_count=4, calib_count=4, stress_count=3)
    guessed = replace(machine(0.01), fp8_ratios={"fp8-all": 2.0})
    traced = replace(guessed, traced_s=0.05)
    steps_guessed = cpu_defaults.estimate_steps(plan, guessed, 18, 3)
    steps_traced = cpu_defaults.estimate_steps(plan, traced, 18, 3)
    per_call = 0.05 - cpu_defaults.TRACE_FORWARD * 0.01
    assert steps_traced.variants["fp32"] - steps_guessed.variants["fp32"] == pytest.approx(plan.trace_calls * per_call)
    assert steps_traced.variants["fp8-all"] - steps_guessed.variants["fp8-all"] == pytest.approx(
        plan.trace_calls * per_call * 2.0)


def test_a_traced_call_is_timed_with_the_studys_tracer_and_a_failing_tracer_leaves_it_untimed(monkeypatch):
    import torch

    from profilers import torch_trace

    model, sample = _stem_trunk_head()
    calls = []

    def counted() -> None:
        calls.append(1)
        with torch.no_grad():
            model(sample)

    assert (cpu_defaults.traced_call_s(counted, 1) or 0.0) > 0
    assert len(calls) == 2  # one untimed traced call, then the timed one

    def failing(*args, **kwargs):
        raise RuntimeError("the profiler is taken")

    monkeypatch.setattr(torch_trace, "trace", failing)
    assert cpu_defaults.traced_call_s(counted, 1) is None


def scripted_clock(durations: list[tuple[float, float]]):
    """A stand-in for `time.perf_counter` under `cpu_defaults.least_alternated`: it reads the clock before the first
    call of a turn, between the two, and after the second; round i's readings are 10 s apart from the last round's
    and take durations[i] (fp32's call, bf16's call)."""
    readings = []
    now = 0.0
    for fp32_s, bf16_s in durations:
        now += 10.0
        readings += [now, now + fp32_s, now + fp32_s + bf16_s]
        now += fp32_s + bf16_s
    return iter(readings).__next__


SPIKE = 271.21  # the ratio one timing of bf16 gave under a load spike on the 2-core CPU


@pytest.mark.parametrize("spiked", ["bf16", "fp32"])
@pytest.mark.parametrize("turn", range(7))
def test_a_load_spike_on_one_call_does_not_flip_the_bf16_decision(spiked, turn):
    """bf16 as fast as fp32 (1.04 ms against 1 ms) but one call of seven 271x longer, whichever: kept either way."""
    turns = [(0.001, 0.00104)] * 7
    turns[turn] = (0.001 * SPIKE, 0.00104) if spiked == "fp32" else (0.001, 0.001 * SPIKE)
    timing = cpu_defaults.bf16_ratio(scripted_clock(turns))
    assert timing.ratio == pytest.approx(1.04)
    assert timing.ratio <= cpu_defaults.BF16_SLOW


def test_a_bf16_slow_on_every_call_is_left_out_whatever_the_spikes():
    turns = [(0.001, 0.088)] * 7
    turns[0] = (0.001 * SPIKE, 0.088)
    assert cpu_defaults.bf16_ratio(scripted_clock(turns)).ratio == pytest.approx(88.0)


def test_calls_are_alternated_after_one_untimed_call_of_each():
    order: list[str] = []
    least_alternated(lambda: order.append("fp32"), lambda: order.append("bf16"), 3,
                     scripted_clock([(0.001, 0.002)] * 3))
    assert order == ["fp32", "bf16"] * 4
