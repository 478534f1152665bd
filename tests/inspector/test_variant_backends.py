"""Variants built by a backend other than the study's (`cudnn-fp16`, `compile-fp32`): each backend says which
precisions it builds so, under its name as the variant's prefix; the study builds them beside its own variants and
compares them as it compares the engine's (with their own backend's fp16, else the study's)."""

from __future__ import annotations

import contextlib
import json
import statistics

import pytest

import tests.fake_backend  # registers the fake backend and tracer
from builders.backend import backend_class, register_backend
from inspector.resolve import checked
from inspector.study import run_study
from sessions.analyses.comparison import compare
from sessions.documents import storage
from sessions.documents.errors import InputError
from sessions.documents.plan import StudyPlan, TimingPlan, VariantPlan, parse_variants
from tests.conftest import run_cli_process


@register_backend
class SideBackend(tests.fake_backend.FakeBackend):
    """The fake backend, built per variant in another backend's study (`fake-side-fp16`)."""

    name = "fake-side"
    variant_precisions = ("fp32", "fp16")


def side_plan(tmp_path, variants: str) -> StudyPlan:
    return StudyPlan(model="fake-model", backend="fake", device="cpu", variants=parse_variants(variants, [], []),
                     batch=2, timing=TimingPlan(0.0, 2, 3), tracer="fake", trace_calls=2,
                     out=str(tmp_path / "s.json"))


def test_a_prefix_names_the_backend_and_any_precision_word_follows_it():
    plans = parse_variants("fp32,compile-fp32,compile-bf16,fake-side-fp16,cudnn-fp8-no-se,fp8-no-se", ["all"], [])
    assert [(p.name, p.backend, p.recipe) for p in plans] == [
        ("fp32", None, None), ("compile-fp32", "compile", None), ("compile-bf16", "compile", None),
        ("fake-side-fp16", "fake-side", None), ("cudnn-fp8-no-se", "cudnn", "no-se"), ("fp8-no-se", None, "no-se")]
    for bad in ("fp16-x", "-fp16", "compile-int8"):
        with pytest.raises(InputError, match=f"unknown variant '{bad}'"):
            parse_variants(bad, [], [])


def test_each_backend_says_which_variants_it_builds_for_another_study():
    def problem(text: str) -> str | None:
        (variant,) = parse_variants(text, ["all"], [])
        return backend_class(variant.backend).variant_problem(variant)

    assert problem("compile-fp16") is None and problem("cudnn-fp8-all") is None and problem("cudnn-fp16") is None
    assert problem("compile-fp8") == ("unknown variant 'compile-fp8-all'; the compile backend builds compile-fp32, "
                                      "compile-fp16, compile-bf16")
    assert "cudnn-fp16, cudnn-fp8, cudnn-fp8-<recipe>" in problem("cudnn-fp32")
    assert problem("torch-fp16") == ("unknown variant 'torch-fp16': the torch backend builds no variant of "
                                     "another's study")


def test_a_study_refuses_a_variant_its_backend_does_not_build_before_any_work(tmp_path):
    with pytest.raises(InputError, match="the fake-side backend builds fake-side-fp32, fake-side-fp16"):
        checked(side_plan(tmp_path, "fp32,fake-side-fp8-all"))
    checked(side_plan(tmp_path, "fp32,fake-side-fp32"))


def test_variants_of_another_backend_are_built_by_it_and_compared_with_its_own_fp16_else_the_studys(tmp_path):
    _, path = run_study(side_plan(tmp_path, "fp32,fp16,fake-side-fp16,fake-side-fp32"), ["trt-inspect"],
                        lambda p: None)
    session = storage.load(path)
    assert [(v.name, v.backend, v.status) for v in session.variants] == [
        ("fp32", "fake", "ok"), ("fp16", "fake", "ok"), ("fake-side-fp16", "fake-side", "ok"),
        ("fake-side-fp32", "fake-side", "ok")]
    baselines = {v.name: compare(session, v).baseline.name for v in session.variants}
    assert baselines == {"fp32": "fp16", "fp16": "fp16", "fake-side-fp16": "fp16", "fake-side-fp32": "fake-side-fp16"}



def test_a_studys_backends_are_prepared_before_the_model_loads_until_it_ends(tmp_path, monkeypatch):
    events: list[str] = []
    fake = tests.fake_backend.FakeBackend
    @contextlib.contextmanager
    def prepared(cls, plan):
        events.append(f"prepare {cls.name}")
        yield
        events.append(f"end {cls.name}")

    monkeypatch.setattr(fake, "prepared", classmethod(prepared))
    load_inputs = fake.load_inputs.__func__  # type: ignore[attr-defined]
    monkeypatch.setattr(fake, "load_inputs", classmethod(lambda cls, plan: (events.append("load"),
                                                                            load_inputs(cls, plan))[1]))
    run_study(side_plan(tmp_path, "fp32,fake-side-fp16,fp16,fake-side-fp32"), [], lambda p: None)
    assert events[:3] == ["prepare fake", "prepare fake-side", "load"]
    assert sorted(events[-2:]) == ["end fake", "end fake-side"]  # once the study ends
    events.clear()
    (tmp_path / "second").mkdir()
    run_study(side_plan(tmp_path / "second", "fp32,fp16"), [], lambda p: None)  # no variant of the side backend's
    assert events[:2] == ["prepare fake", "load"] and events[-1] == "end fake" and len(events) == 3


def test_before_its_builds_a_study_reports_each_variant_with_the_backend_that_builds_it(tmp_path, monkeypatch):
    from inspector.build_order import BuildOrder

    monkeypatch.setattr(SideBackend, "label", "Side engine")  # the study's own backend is "Fake engine"
    steps: list[tuple[str, str]] = []
    run_study(side_plan(tmp_path, "fp32,fake-side-fp16,fp16,fake-side-fp32"), [],
              lambda p: steps.append((p.phase, p.message)))
    orders = [message for _, message in steps if isinstance(message, BuildOrder)]
    assert len(orders) == 1 and orders[0].backends == {"fp32": "Fake engine", "fake-side-fp16": "Side engine",
                                                        "fp16": "Fake engine", "fake-side-fp32": "Side engine"}
    first_build = next(i for i, (phase, _) in enumerate(steps) if phase == "build")
    assert steps.index(("setup", orders[0])) < first_build

@pytest.mark.slow
def test_a_cpu_study_times_pytorch_and_torch_compile_side_by_side_and_reads_back(tmp_path):
    out = tmp_path / "s.json"
    env = {"TRT_INSPECT_HOME": str(tmp_path)}
    result = run_cli_process("run", "resnet18", "--device", "cpu", "--variants", "fp32,compile-fp32", "--rounds", "1",
                             "--iters", "2", "--calib-count", "2", "--eval-count", "2", "--out", str(out), env=env)
    assert result.returncode == 0, result.stderr
    raw = json.loads(out.read_text())
    assert [(v["name"], v["backend"], v["status"]) for v in raw["variants"]] == [
        ("fp32", "torch", "ok"), ("compile-fp32", "compile", "ok")]
    folded = [v["batchnorm_folded"] for v in raw["variants"]]  # the same graph: resnet18's 20 BatchNorms folded
    assert folded == [20, 20]
    medians = {v["name"]: statistics.median(v["latency"]["samples_ms"]) for v in raw["variants"]}
    speedup = f"{medians['fp32'] / medians['compile-fp32']:.2f}x"
    shown = run_cli_process("show", str(out), env=env)
    row = next(line for line in shown.stdout.splitlines() if line.startswith("compile-fp32 "))
    assert shown.returncode == 0 and speedup in row.split() and "compile" in row.split()
    exported = run_cli_process("export", str(out), "--format", "json", "-o", str(tmp_path / "e.json"), env=env)
    assert exported.returncode == 0, exported.stderr
    assert "compile-fp32" in (tmp_path / "e.json").read_text()
    assert storage.load(out).study.plan.variants == (VariantPlan("fp32"), VariantPlan("fp32", backend="compile"))


@pytest.mark.parametrize(("backend", "sized"), [("torch", True), ("compile", False)])
def test_a_cpu_plan_is_sized_to_the_machine_where_its_backend_says_so(monkeypatch, backend, sized):
    from inspector import cpu_defaults
    from inspector.request import StudyRequest
    from inspector.resolve import resolve

    asked: list[str] = []
    monkeypatch.setattr(cpu_defaults, "fit_cpu_plan", lambda plan, request: (asked.append(plan.backend), (plan, []))[1])
    resolve(StudyRequest("test_resnet", backend=backend, device="cpu", tracer="none"))
    assert asked == ([backend] if sized else [])
