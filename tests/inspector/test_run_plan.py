"""A study's route checks once: a request resolved, or a plan made elsewhere checked, into one RunPlan whose backend
class is looked up once and whose tracer is prepared once; the study runs what the run plan holds."""

from __future__ import annotations

import collections

import pytest

import tests.fake_backend
from inspector import resolve, study
from inspector.request import StudyRequest
from profilers.tracers import CuptiTracer
from sessions.documents import storage
from sessions.documents.errors import MissingEnvironment
from tests.inspector.test_study_fake import fake_plan
from tests.inspector.test_variant_backends import side_plan


@pytest.fixture
def counted(monkeypatch) -> collections.Counter:
    """Backend lookups by name, tracer preparations by name and plan validations, as the study route makes them."""
    calls: collections.Counter = collections.Counter()
    lookup, prepare, validate = resolve.backend_class, tests.fake_backend.FakeTracer.prepare, resolve.validate_plan

    def counted_lookup(name):
        calls[f"backend {name}"] += 1
        return lookup(name)

    def counted_prepare(self):
        calls[f"prepare {self.name}"] += 1
        return prepare(self)

    def counted_validate(plan):
        calls["validate"] += 1
        return validate(plan)

    monkeypatch.setattr(resolve, "backend_class", counted_lookup)
    monkeypatch.setattr(tests.fake_backend.FakeTracer, "prepare", counted_prepare)
    monkeypatch.setattr(resolve, "validate_plan", counted_validate)
    return calls


def test_a_request_is_resolved_and_checked_once(tmp_path, counted):
    request = StudyRequest(model="fake-model", backend="fake", device="cpu", tracer="fake", variants="fp32,fp16",
                           rounds=1, iters=2, warmup_s=0.0, out=str(tmp_path / "s.json"))
    _, path = study.run_requested_study(request, lambda progress: None)
    assert dict(counted) == {"backend fake": 1, "prepare fake": 1}  # the request's own checks stand for the plan's
    assert [v.status for v in storage.load(path).variants] == ["ok", "ok"]


def test_a_plan_made_elsewhere_is_validated_and_checked_once(tmp_path, counted):
    _, path = study.run_study(fake_plan(tmp_path), ["trt-inspect", "rerun"], lambda progress: None)
    assert dict(counted) == {"validate": 1, "backend fake": 1, "prepare fake": 1}
    assert storage.load(path).study.plan == fake_plan(tmp_path)


def test_a_backend_a_variant_names_is_looked_up_once_and_builds_it(tmp_path, counted):
    _, path = study.run_study(side_plan(tmp_path, "fp16,fake-side-fp16"), [], lambda progress: None)
    assert counted["backend fake-side"] == 1 and counted["backend fake"] == 1
    assert [v.backend for v in storage.load(path).variants] == ["fake", "fake-side"]


def test_the_run_plan_holds_what_the_study_runs(tmp_path):
    run = resolve.checked(fake_plan(tmp_path))
    assert (run.plan, run.backend, run.tracer.name, run.notes) == (
        fake_plan(tmp_path), tests.fake_backend.FakeBackend, "fake", ())


def test_a_tracer_is_prepared_once_however_often_a_plan_asks(counted):
    prepared, tracer = resolve.Prepared(), resolve.get_tracer("fake")
    assert [prepared(tracer), prepared(tracer)] == [None, None]
    assert counted["prepare fake"] == 1


@pytest.fixture
def order(monkeypatch) -> list[str]:
    """Backend lookups and tracer preparations, in the order a check makes them."""
    calls: list[str] = []
    lookup = resolve.backend_class

    def recorded_lookup(name):
        calls.append(f"backend {name}")
        return lookup(name)

    def recorded_prepare(tracer):
        calls.append(f"prepare {tracer.name}")

    monkeypatch.setattr(resolve, "backend_class", recorded_lookup)
    monkeypatch.setattr(tests.fake_backend.FakeTracer, "prepare", recorded_prepare)
    monkeypatch.setattr(CuptiTracer, "prepare", recorded_prepare)
    return calls


def test_a_plan_made_elsewhere_prepares_its_tracer_before_its_backend_loads(tmp_path, order):
    resolve.checked(fake_plan(tmp_path))
    assert order == ["prepare fake", "backend fake"]


def test_a_plan_made_elsewhere_prepares_cupti_before_its_backend_loads_torch(tmp_path, order):
    """CUPTI's NVTX injection binds once, when torch loads: a plan traced by CUPTI prepares it first, even where the
    plan turns out not to run here (the fake backend marks no NVTX ranges)."""
    with pytest.raises(MissingEnvironment):
        resolve.checked(fake_plan(tmp_path, device="cuda", tracer="cupti"))
    assert order == ["prepare cupti", "backend fake"]
