"""No study lost to a variant: a variant that fails for any reason, in its build, its quality run,
its timing step or a timed inference, is kept as failed with one line of reason; the others are measured in full and
the run exits 0; only where every variant failed does it end with the documented code, and never in a traceback."""

from __future__ import annotations

import pytest

import tests.fake_backend
from inspector.cli import main
from inspector.commands.output import run_headless
from inspector.study import run_study
from sessions.documents import storage
from sessions.documents.errors import ExitCode, InspectError
from tests.inspector.test_study_fake import fake_plan

FAKE = tests.fake_backend.FakeBackend
ROUNDS, ITERS = 2, 3


def plan(tmp_path):
    from sessions.documents.plan import TimingPlan

    return fake_plan(tmp_path, timing=TimingPlan(0.0, ROUNDS, ITERS))


def failing_build(monkeypatch, precision: str, exc: BaseException) -> None:
    """The fake backend's build of `precision` raises `exc`; the others build as before."""
    build = FAKE.build

    def fails(self, variant, calibration):
        if variant.precision == precision:
            raise exc
        return build(self, variant, calibration)

    monkeypatch.setattr(FAKE, "build", fails)


def run(tmp_path, capsys, seen: list | None = None) -> tuple[int, object, str]:
    """The study run as `trt-inspect run` runs it: its exit code, the loaded session, what it printed; every
    progress report added to `seen` where given."""

    def study(report):
        return run_study(plan(tmp_path), ["trt-inspect"], lambda p: (seen is not None and seen.append(p), report(p)))

    code, _, path = run_headless(study, False)
    out = capsys.readouterr()
    return code, storage.load(path), out.out + out.err


def assert_fully_timed(session, names):
    for name in names:
        variant = session.variant(name)
        assert variant.status == "ok" and variant.error is None
        assert len(variant.latency.samples_ms) == ROUNDS * ITERS, name


@pytest.mark.parametrize("exc, line", [
    # ModelOpt's max calibrator on an fp16 model whose activations overflow (modelopt/torch/quantization/calib/max.py)
    (AssertionError("detected inf values in amax. inf in original tensor: True"),
     "AssertionError: detected inf values in amax. inf in original tensor: True"),
    (MemoryError(), "MemoryError"),
    (RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB\nGPU 0 has a total capacity of 139 GiB"),
     "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB"),
    (KeyError("conv1.weight"), "KeyError: 'conv1.weight'"),
    (InspectError("fp8-all quantizes no layer of fake-model"), "fp8-all quantizes no layer of fake-model"),
])
def test_a_variant_that_fails_to_build_is_marked_with_one_line_and_the_others_are_measured(tmp_path, capsys,
                                                                                          monkeypatch, exc, line):
    failing_build(monkeypatch, "fp8", exc)
    code, session, printed = run(tmp_path, capsys)
    assert code == ExitCode.OK
    fp8 = session.variant("fp8-all")
    assert (fp8.status, fp8.error, fp8.latency) == ("failed", line, None)
    assert_fully_timed(session, ["fp32", "fp16"])
    assert f"failed: {line}" in printed and "Traceback" not in printed


def test_show_and_export_mark_the_failed_variant(tmp_path, capsys, monkeypatch):
    failing_build(monkeypatch, "fp16", AssertionError("detected inf values in amax. inf in original tensor: True"))
    _, path = run_study(plan(tmp_path), [], lambda p: None)
    capsys.readouterr()
    assert main(["show", str(path)]) == 0
    shown = capsys.readouterr().out
    row = next(line for line in shown.splitlines() if line.split()[:1] == ["fp16"])
    assert "failed: AssertionError: detected inf values in amax" in row
    assert main(["export", str(path), "--format", "md", "-o", str(tmp_path / "s.md")]) == 0
    assert "failed: AssertionError: detected inf values in amax" in (tmp_path / "s.md").read_text()


def test_a_quality_run_that_fails_leaves_a_note_and_the_variant_timed(tmp_path, capsys, monkeypatch):
    infer = tests.fake_backend.FakeEngine.infer

    def infer_fails_for_fp8(self, batch):
        if self.scale < 0:  # the fake's fp8 engine
            raise ValueError("operands could not be broadcast together")
        return infer(self, batch)

    monkeypatch.setattr(tests.fake_backend.FakeEngine, "infer", infer_fails_for_fp8)
    code, session, _ = run(tmp_path, capsys)
    assert code == ExitCode.OK
    assert_fully_timed(session, ["fp32", "fp16", "fp8-all"])
    assert "quality not measured in full: ValueError: operands could not be broadcast together" in session.variant(
        "fp8-all").notes
    assert session.variant("fp8-all").quality is None and session.variant("fp16").quality is not None


def test_an_fp32_reference_that_fails_costs_the_quality_figures_only(tmp_path, capsys, monkeypatch):
    def broken(self, batch):
        raise RuntimeError("mat1 and mat2 shapes cannot be multiplied")

    monkeypatch.setattr(FAKE, "reference", broken)
    code, session, _ = run(tmp_path, capsys)
    assert code == ExitCode.OK
    assert_fully_timed(session, ["fp32", "fp16", "fp8-all"])
    note = "quality not measured: the fp32 reference failed: RuntimeError: mat1 and mat2 shapes cannot be multiplied"
    assert all(note in v.notes and v.quality is None for v in session.variants)


class Released:
    """Counts the fake engines let go, by their scale (which names the variant: fp32 1, fp16 1.001, fp8 -1)."""

    def __init__(self, monkeypatch):
        self.scales: list[float] = []
        monkeypatch.setattr(tests.fake_backend.FakeEngine, "release", lambda engine: self.scales.append(engine.scale))


def test_a_timed_inference_that_fails_marks_its_variant_and_the_others_are_timed_in_full(tmp_path, capsys,
                                                                                        monkeypatch):
    released = Released(monkeypatch)
    timed: dict[float, int] = {}

    def fails_in_the_second_round(engine):
        timed[engine.scale] = timed.get(engine.scale, 0) + 1
        if engine.scale == 1.001 and timed[engine.scale] == 2 + ITERS:  # fp16: one warm-up call, a round, then this
            raise RuntimeError("CUDA error: an illegal memory access was encountered\nCUDA kernel errors ...")
        engine.run_once()

    monkeypatch.setattr(tests.fake_backend.FakeEngine, "timing_step",
                        lambda self: tests.fake_backend.TimingStep(lambda: fails_in_the_second_round(self), False))
    seen: list = []
    code, session, printed = run(tmp_path, capsys, seen)
    assert code == ExitCode.OK
    # saved as the failure is reported: no latency left from the rounds that did not finish
    failure = next(p for p in seen if "fp16 timing failed" in p.message)
    assert any(p.message == f"round 1/{ROUNDS}" for p in seen[:seen.index(failure)])  # after a round had latencies
    assert failure.saved and [s.median_ms for s in failure.variants] == [None, None, None]
    fp16 = session.variant("fp16")
    assert (fp16.status, fp16.latency) == ("failed", None)
    assert fp16.error == "timing failed: RuntimeError: CUDA error: an illegal memory access was encountered"
    assert_fully_timed(session, ["fp32", "fp8-all"])  # the rounds began again without fp16: none short of samples
    assert sorted(released.scales) == [-1.0, 1.0, 1.001]  # every engine let go once, the failed one too
    assert "fp16 timing failed" in printed and "Traceback" not in printed


def test_a_timing_step_that_cannot_be_made_marks_its_variant(tmp_path, capsys, monkeypatch):
    released = Released(monkeypatch)
    step = tests.fake_backend.FakeEngine.timing_step

    def no_graph_for_fp32(self):
        if self.scale == 1.0:
            raise RuntimeError("CUDA out of memory while capturing the graph")
        return step(self)

    monkeypatch.setattr(tests.fake_backend.FakeEngine, "timing_step", no_graph_for_fp32)
    code, session, _ = run(tmp_path, capsys)
    assert code == ExitCode.OK
    assert session.variant("fp32").error == "timing failed: RuntimeError: CUDA out of memory while capturing the graph"
    assert_fully_timed(session, ["fp16", "fp8-all"])
    assert sorted(released.scales) == [-1.0, 1.0, 1.001]


def test_a_study_where_every_variant_failed_ends_with_one_line_and_exit_1(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(FAKE, "build", lambda self, variant, calibration: (_ for _ in ()).throw(
        AssertionError("detected inf values in amax. inf in original tensor: True")))
    with pytest.raises(InspectError) as raised:
        run(tmp_path, capsys)
    assert raised.value.exit_code == ExitCode.FAILURE == 1
    assert raised.value.message.startswith("every variant failed; see ")
    partial = storage.load(raised.value.message.split("see ")[1].split(" (measured so far")[0])
    assert [(v.status, v.error) for v in partial.variants] == [
        ("failed", "AssertionError: detected inf values in amax. inf in original tensor: True")] * 3
