"""Every study option in the spec reaches every place that takes it: the arguments of each command it names, the
request, the resolved plan and the session that records it, the sweep matrix's keys, and the `run` command line a
sweep job records. The values tried are made from each option's entry (its type, range and choices), so an option
added to the spec is tried with no change here."""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

import orjson
import pytest

import tests.fake_backend  # noqa: F401  # registers the fake backend and tracer, as a plug-in module would
from inspector.cli import build_parser, study_request
from inspector.options import choices_of
from inspector.probe.fp8_probe import ProbeOptions
from inspector.request import StudyRequest
from inspector.sweep.matrix import combinations, parse_matrix
from sessions.documents.codec import build
from sessions.documents.options import OPTIONS, PROBE, RUN, Option
from sessions.documents.plan import StudyPlan

RUN_OPTIONS = [spec for spec in OPTIONS if RUN in spec.commands]
PICKED_BY_RESOLVE = ("backend", "device", "tracer")  # the base request asks for these; the plan names what it asked
VALID_WORDS = {"variants": "fp16", "fp8_recipes": ("no-se",)}  # words the request's check takes: a precision, a recipe
BASE: dict[str, Any] = {"model": "fake-model", "backend": "fake", "device": "cpu", "tracer": "fake",
                        "variants": "fp32,fp8"}


def sample(spec: Option) -> Any:
    """A value of `spec` other than its defaults (the machines' too), within its range and choices."""
    if spec.field in VALID_WORDS:
        return VALID_WORDS[spec.field]
    if spec.repeatable:
        return ("sample-a", "sample-b")
    if spec.kind is str:
        words = [word for word in choices_of(spec) if word != spec.default]
        return words[-1] if words else "sample"
    taken = {spec.default, *spec.machine_defaults.values()}
    return next(value for value in (spec.kind((spec.low or 0) + 1), spec.kind(spec.high)) if value not in taken)


def ids(spec: Option) -> str:
    return spec.field


def subparser(command: str) -> argparse.ArgumentParser:
    (commands,) = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    parser: argparse.ArgumentParser = commands.choices[command]
    return parser


@pytest.mark.parametrize("spec", OPTIONS, ids=ids)
def test_every_option_is_an_argument_of_each_command_that_takes_it(spec: Option) -> None:
    for command in spec.commands:
        found = [a for a in subparser(command)._actions if a.dest == spec.field]
        assert found, f"{spec.field}: no argument of {command}"
        assert tuple(found[0].option_strings) == spec.flags


@pytest.mark.parametrize("spec", RUN_OPTIONS, ids=ids)
def test_the_run_command_line_a_job_records_asks_for_the_same_request(spec: Option) -> None:
    request = StudyRequest(**{"model": "m", spec.field: sample(spec)})
    assert getattr(request, spec.field) == sample(spec)
    argv = request.run_argv()
    assert (spec.flag in argv) if spec.flags else (sample(spec) in argv)
    assert study_request(build_parser().parse_args(argv[1:]), []) == request


@pytest.mark.parametrize("spec", [s for s in RUN_OPTIONS if s.field not in PICKED_BY_RESOLVE], ids=ids)
def test_each_run_option_changes_the_plan_and_the_session_records_it(spec: Option,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from inspector import resolve

    monkeypatch.setattr(resolve, "preflight", lambda model, checkpoint, variants, explicit: (variants, []))
    plain = resolve.resolve(StudyRequest(**BASE)).plan
    plan = resolve.resolve(StudyRequest(**{**BASE, spec.field: sample(spec)})).plan
    recorded = orjson.loads(orjson.dumps(plan))
    assert recorded != orjson.loads(orjson.dumps(plain)), f"{spec.field}: the plan is the same without it"
    assert build(StudyPlan, recorded) == plan


def test_the_plan_names_the_backend_device_and_tracer_asked_for(monkeypatch: pytest.MonkeyPatch) -> None:
    from inspector import resolve

    monkeypatch.setattr(resolve, "preflight", lambda model, checkpoint, variants, explicit: (variants, []))
    plan = resolve.resolve(StudyRequest(**BASE)).plan
    assert {name: getattr(plan, name) for name in PICKED_BY_RESOLVE} == {name: BASE[name] for name in PICKED_BY_RESOLVE}


@pytest.mark.parametrize("spec", [s for s in OPTIONS if s.matrix], ids=ids)
def test_every_matrix_key_of_an_option_sets_it_in_the_job_request(spec: Option) -> None:
    value = sample(spec)
    for key in spec.keys:
        base = {"model": "m", key: list(value) if isinstance(value, tuple) else value}
        (combination,) = combinations(parse_matrix({"base": base}, "m", "m"), "m")
        assert getattr(combination.request, spec.field) == value, key


@pytest.mark.parametrize("spec", [s for s in OPTIONS if PROBE in s.commands], ids=ids)
def test_every_probe_option_is_a_probe_field(spec: Option) -> None:
    args = vars(build_parser().parse_args(["probe", "m"]))
    assert spec.field in {f.name for f in dataclasses.fields(ProbeOptions)} and spec.field in args
