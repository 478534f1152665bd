"""run_study end to end through a registered fake backend and tracer: no torch, no GPU."""

from __future__ import annotations

import subprocess
import sys

import pytest

import tests.fake_backend  # registers the fake backend and tracer
from inspector.study import run_study
from sessions.documents import storage
from sessions.documents.errors import MissingEnvironment
from sessions.documents.plan import StudyPlan, TimingPlan, parse_variants


def fake_plan(tmp_path, **changes) -> StudyPlan:
    values = {"model": "fake-model", "backend": "fake", "device": "cpu",
              "variants": parse_variants("fp32,fp16,fp8", ["all"], []), "batch": 2, "timing": TimingPlan(0.0, 2, 3),
              "tracer": "fake", "trace_calls": 2, "out": str(tmp_path / "s.json")}
    values.update(changes)
    return StudyPlan(**values)


def test_a_fake_backend_runs_the_whole_study(tmp_path):
    _, path = run_study(fake_plan(tmp_path), ["trt-inspect", "run", "fake-model"], lambda p: None)
    loaded = storage.load(path)
    assert [v.name for v in loaded.variants] == ["fp32", "fp16", "fp8-all"]
    fp8 = loaded.variant("fp8-all")
    assert fp8.trace.records == 2 * 3 * 2 and fp8.trace.per_call == 6 and fp8.trace.unattributed == 0
    assert loaded.variant("fp32").trace.per_call == 3
    assert [layer.name for layer in fp8.layers] == ["conv1", "conv2", "fc"]
    assert all(len(layer.call_times_ms) == 2 and sum(layer.call_times_ms) / 2 == pytest.approx(layer.time_ms)
               for layer in fp8.layers)  # each traced call's time stored, and their mean is the layer's time
    assert all(len(v.latency.samples_ms) == 2 * 3 for v in loaded.variants)
    assert loaded.variant("fp16").quality.top1_agreement == 1.0 and fp8.quality.top1_agreement < 1.0
    assert loaded.study.plan == fake_plan(tmp_path)  # the stored plan is the plan, exactly
    assert "fake: eager" in fp8.notes and loaded.method.kernels == "fake tracer, 2 call(s)"


def test_the_backend_lets_go_of_its_build_resources_once_after_the_last_build_and_before_timing(tmp_path, monkeypatch):
    events: list[str] = []
    fake = tests.fake_backend.FakeBackend
    build = fake.build
    monkeypatch.setattr(fake, "builds_done", lambda self: events.append("builds done"))
    monkeypatch.setattr(fake, "build", lambda self, variant, calibration: (events.append("build"),
                                                                          build(self, variant, calibration))[1])
    from inspector import study

    time_variants = study.time_variants
    monkeypatch.setattr(study, "time_variants", lambda *args: (events.append("timing"), time_variants(*args))[1])
    run_study(fake_plan(tmp_path), ["trt-inspect", "run", "fake-model"], lambda p: None)
    assert events == ["build"] * 3 + ["builds done", "timing"]



@pytest.mark.parametrize("last_fails", [False, True])
def test_the_backend_begins_letting_go_after_its_last_build_before_that_variants_quality(tmp_path, monkeypatch,
                                                                                        last_fails):
    """`builds_ending` once, right after the backend's last build (also one that fails), so that its workers'
    exit overlaps that variant's quality and trace; `builds_done` still follows, before timing."""
    events: list[str] = []
    fake = tests.fake_backend.FakeBackend
    build = fake.build
    last = fake_plan(tmp_path).variants[-1].name

    def built(self, variant, calibration):
        events.append("build")
        if last_fails and variant.name == last:
            raise RuntimeError("no kernel")
        return build(self, variant, calibration)

    monkeypatch.setattr(fake, "build", built)
    monkeypatch.setattr(fake, "builds_ending", lambda self: events.append("builds ending"))
    monkeypatch.setattr(fake, "builds_done", lambda self: events.append("builds done"))
    from inspector import study

    measure_quality = study.measure_quality
    monkeypatch.setattr(study, "measure_quality", lambda *args: (events.append("quality"), measure_quality(*args))[1])
    run_study(fake_plan(tmp_path), ["trt-inspect", "run", "fake-model"], lambda p: None)
    last_quality = [] if last_fails else ["quality"]
    assert events == ["build", "quality"] * 2 + ["build", "builds ending", *last_quality, "builds done"]


def timing_reports(tmp_path, monkeypatch, fail_after_warm_up: str | None = None) -> list[tuple[int, str | None, int]]:
    """The timing steps a fake study reports, as (round done, variant named, inferences run by then); with
    `fail_after_warm_up`, that variant's first inference after the second timing step (the warm-ups' end) raises."""
    fake = tests.fake_backend.FakeBackend
    build, run_once = fake.build, tests.fake_backend.FakeEngine.run_once
    failing: list[object] = []  # the engine of `fail_after_warm_up`
    armed, inferences, reports = [False], [0], []

    def built(self, variant, calibration):
        result = build(self, variant, calibration)
        if variant.name == fail_after_warm_up:
            failing.append(result.engine)
        return result

    def counted(self):
        if armed[0] and failing and self is failing[0]:
            armed[0] = False
            raise RuntimeError("the device went away")
        inferences[0] += 1
        run_once(self)

    def report(p) -> None:
        if p.phase == "timing":
            reports.append((p.done, p.variant, inferences[0]))
            armed[0] = armed[0] or len(reports) == 2  # once, at the second timing step: the warm-ups' end

    monkeypatch.setattr(fake, "build", built)
    monkeypatch.setattr(tests.fake_backend.FakeEngine, "run_once", counted)
    run_study(fake_plan(tmp_path), ["trt-inspect", "run", "fake-model"], report)
    return reports


def test_the_timing_reports_the_warm_ups_end_at_round_0_between_the_warm_ups_and_round_1(tmp_path, monkeypatch):
    reports = timing_reports(tmp_path, monkeypatch)
    assert [(done, variant) for done, variant, _ in reports] == [(0, None), (0, None), (1, None), (2, None)]
    started, warmed, first_round = (ran for _, _, ran in reports[:3])
    assert started < warmed < first_round  # the warm-ups ran before the second report, round 1's samples after it


def test_after_a_variant_fails_in_timing_the_rounds_report_their_warm_ups_end_again(tmp_path, monkeypatch):
    reports = timing_reports(tmp_path, monkeypatch, fail_after_warm_up="fp16")
    assert [(done, variant) for done, variant, _ in reports] == [
        (0, None), (0, None), (0, "fp16"), (0, None), (0, None), (1, None), (2, None)]

def test_an_interrupted_build_still_lets_go_of_the_backends_build_resources(tmp_path, monkeypatch):
    events: list[str] = []
    fake = tests.fake_backend.FakeBackend
    build = fake.build

    def interrupted(self, variant, calibration):
        if variant.precision == "fp16":
            raise KeyboardInterrupt
        return build(self, variant, calibration)

    monkeypatch.setattr(fake, "builds_done", lambda self: events.append("builds done"))
    monkeypatch.setattr(fake, "build", interrupted)
    with pytest.raises(KeyboardInterrupt):
        run_study(fake_plan(tmp_path), ["trt-inspect", "run", "fake-model"], lambda p: None)
    assert events == ["builds done"]


def test_a_tracer_the_backend_cannot_serve_fails_before_any_work(tmp_path):
    with pytest.raises(MissingEnvironment, match="marks layers with annotation, which --tracer cupti cannot see"):
        run_study(fake_plan(tmp_path, tracer="cupti", device="cuda"), [], lambda p: None)
    assert not (tmp_path / "s.json").exists()


def test_the_fake_path_imports_no_torch():
    code = (
        "import sys, tests.fake_backend; from inspector.study import run_study; "
        "from tests.inspector.test_study_fake import fake_plan; import pathlib, tempfile; "
        "run_study(fake_plan(pathlib.Path(tempfile.mkdtemp())), [], lambda p: None); "
        "print('torch' in sys.modules)"
    )
    result = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"


@pytest.mark.parametrize("interval, saved_rounds", [(0.0, [1, 2, 3, 4]), (3600.0, [4])])
def test_timing_rounds_are_saved_at_most_every_interval_and_always_after_the_last(tmp_path, monkeypatch, interval,
                                                                                  saved_rounds):
    import sessions.documents.storage
    from inspector import study

    monkeypatch.setattr(study, "ROUND_SAVE_INTERVAL_S", interval)
    saved: list[int] = []
    real_save = sessions.documents.storage.save

    def save(session, path):
        latency = session.variants[0].latency if session.variants else None
        samples = latency.samples_ms if latency else []
        saved.append(len(samples) // 3)  # rounds measured when this save ran
        return real_save(session, path)

    monkeypatch.setattr(sessions.documents.storage, "save", save)
    _, path = run_study(fake_plan(tmp_path, timing=TimingPlan(0.0, 4, 3)), [], lambda p: None)
    timing_saves = sorted({n for n in saved if n > 0})
    assert timing_saves == saved_rounds
    assert len(storage.load(path).variants[0].latency.samples_ms) == 4 * 3


def test_a_variant_whose_samples_span_several_inferences_stores_the_count_and_says_so(tmp_path, monkeypatch):
    """Where the clock makes a sample of 3 inferences (as a GPU does for a short model), every variant stores 3 with
    its latency and its notes say its percentiles are of such means; a clock of one says nothing."""
    from profilers import timing

    class ThreeClock(timing.HostClock):
        def inference_ms(self, step):
            return 1.5  # a sample of 4 ms spans 3 of them

    monkeypatch.setattr(timing, "clock_for", lambda device: ThreeClock())
    _, path = run_study(fake_plan(tmp_path), ["trt-inspect", "run", "fake-model"], lambda p: None)
    for variant in storage.load(path).variants:
        assert variant.latency.inferences_per_sample == 3
        assert sum("mean of 3 back-to-back inferences" in note for note in variant.notes) == 1
    monkeypatch.setattr(timing, "clock_for", lambda device: timing.HostClock())
    _, path = run_study(fake_plan(tmp_path, out=str(tmp_path / "one.json")), ["trt-inspect", "run", "fake-model"],
                        lambda p: None)
    assert not any("back-to-back" in note for v in storage.load(path).variants for note in v.notes)


def test_the_gpu_state_is_settled_once_every_graph_is_made_and_before_the_rounds(tmp_path, monkeypatch):
    """The device's settle (profilers.gpu_contexts) runs after every variant's timing step is made and before the
    first round; what it says is the session's GPU state."""
    from inspector import study
    from profilers import timing
    from profilers.device import StudyDevice

    events: list[str] = []
    monkeypatch.setattr(StudyDevice, "settle", lambda self: events.append("settle") or "the helper's words")
    measure = timing.measure
    monkeypatch.setattr(timing, "measure", lambda *a, **k: (events.append("rounds"), measure(*a, **k))[1])
    time_variants = study.time_variants

    def watched(session, engines, *args):
        for name, one in engines.items():
            step = one.timing_step

            def made(step=step, name=name):
                events.append(f"step {name}")
                return step()

            one.timing_step = made
        return time_variants(session, engines, *args)

    monkeypatch.setattr(study, "time_variants", watched)
    _, path = run_study(fake_plan(tmp_path), ["trt-inspect", "run", "fake-model"], lambda p: None)
    assert events == ["step fp32", "step fp16", "step fp8-all", "settle", "rounds"]
    assert storage.load(path).environment.gpu_state == "the helper's words"
