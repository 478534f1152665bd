"""The study options' spec: every command, check and matrix reads one declaration per option, so a value one
refuses the others refuse with the same line; plans (rerun, sweep) are checked completely before any work;
a registered plug-in backend and tracer are chosen from the command line."""

from __future__ import annotations

import dataclasses
import math
import re

import orjson
import pytest

import tests.fake_backend  # noqa: F401  # registers the fake backend and tracer, as a plug-in module would
from inspector.cli import build_parser, main, study_request
from inspector.options import validate_plan
from inspector.probe.fp8_probe import ProbeOptions
from inspector.request import StudyRequest
from inspector.sweep.matrix import combinations, parse_matrix
from sessions.documents import storage
from sessions.documents.errors import InputError
from sessions.documents.options import OPTIONS, PROBE, RUN, Option
from sessions.documents.plan import StudyPlan, TimingPlan, parse_variants
from tests.conftest import ROOT

RANGED = [spec for spec in OPTIONS if spec.low is not None]
H200 = ROOT / "tests" / "data" / "h200"


def fake_plan(**change) -> StudyPlan:
    plan = StudyPlan(model="fake-model", backend="fake", device="cpu", variants=parse_variants("fp32,fp16", [], []),
                     batch=1, timing=TimingPlan(0.0, 1, 1), tracer="fake")
    return dataclasses.replace(plan, **change)


def checkers(spec: Option) -> dict[str, object]:
    """Every place that takes `spec`, as a function of one value that raises InputError when it is refused."""
    found = {}
    if RUN in spec.commands:
        found["request"] = lambda v: StudyRequest(model="m", **{spec.field: v}).validate()
        found["plan"] = lambda v: validate_plan(_plan_with(spec.field, v))
    if PROBE in spec.commands:
        found["probe"] = lambda v: ProbeOptions(model="m", **{spec.field: v}).validate()
    if spec.matrix:
        found["matrix"] = lambda v: combinations(parse_matrix({"base": {"model": "m", spec.keys[0]: v}}, "m", "m"), "m")
    return found


def _plan_with(field: str, value) -> StudyPlan:
    plan = fake_plan()
    if field in TimingPlan.__dataclass_fields__:
        return dataclasses.replace(plan, timing=dataclasses.replace(plan.timing, **{field: value}))
    return dataclasses.replace(plan, **{field: value})


def _outside(spec: Option) -> list:
    values = [spec.low - 1, spec.high + 1]
    return values + [math.inf, math.nan, 1e308] if spec.kind is float else values


@pytest.mark.parametrize(("spec", "value"), [(s, v) for s in RANGED for v in _outside(s)],
                         ids=lambda x: x.field if isinstance(x, Option) else repr(x))
def test_every_check_refuses_a_value_out_of_the_spec_range_with_the_same_line(spec, value):
    line = f"{spec.flag} must be {spec.range_text()}"
    refused = {}
    for where, check in checkers(spec).items():
        with pytest.raises(InputError) as caught:
            check(value)
        refused[where] = caught.value.message
    assert refused and all(line in message for message in refused.values()), refused


@pytest.mark.parametrize("spec", RANGED, ids=lambda s: s.field)
def test_every_check_takes_the_ends_of_the_spec_range(spec, monkeypatch):
    import builders.recipes.fp8

    monkeypatch.setattr(builders.recipes.fp8, "preflight", lambda model, checkpoint, variants, explicit: (variants, []))
    for check in checkers(spec).values():
        for value in (spec.low, spec.high):
            check(value)


def test_the_command_line_defaults_are_the_request_defaults():
    assert study_request(build_parser().parse_args(["run", "m"]), []) == StudyRequest(model="m")
    probe = build_parser().parse_args(["probe", "m"])
    assert all(getattr(probe, f) == getattr(ProbeOptions(model="m"), f)
               for f in ("rounds", "iters", "warmup_s", "batch"))


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    errors = [line for line in err if not line.startswith("trt-inspect: [")]
    assert len(errors) == 1 and errors[0].startswith("trt-inspect: error:") and "Traceback" not in "".join(err), err
    return errors[0]


@pytest.mark.parametrize("command", ["run", "probe"])
@pytest.mark.parametrize(("option", "message"), [
    (["--warmup", "inf"], "--warmup must be between 0 and 3600 seconds, not inf"),
    (["--warmup", "nan"], "--warmup must be between 0 and 3600 seconds, not nan"),
    (["--warmup", "1e308"], "--warmup must be between 0 and 3600 seconds, not 1e+308"),
    (["--batch", "100000000"], "--batch must be between 1 and 65536, not 100000000"),
    (["--rounds", "1000000000"], "--rounds must be between 1 and 100000, not 1000000000"),
    (["--calib-count", "100001"], "--calib-count must be between 1 and 100000, not 100001"),
])
def test_probe_refuses_what_run_refuses_before_any_work(command, option, message, capsys, monkeypatch):
    import builders.study_inputs
    import inspector.probe.fp8_probe

    monkeypatch.setattr(builders.study_inputs, "load_inputs", lambda choice: pytest.fail("the model loaded"))
    monkeypatch.setattr(inspector.probe.fp8_probe, "require_fp8_environment", lambda: pytest.fail("the probe started"))
    assert main([command, "resnet18", "--device" if command == "run" else "--seed", "cpu" if command == "run" else "0",
                 *option]) == 2
    assert one_error_line(capsys) == f"trt-inspect: error: {message}"


@pytest.mark.parametrize(("variants", "message"), [
    ([{"precision": "int8", "recipe": None, "exclude": []}], "unknown precision 'int8' in the plan"),
    ([{"precision": "fp8", "recipe": None, "exclude": []}], "an fp8 variant of the plan names no recipe (None)"),
    ([{"precision": "fp8", "recipe": "nope", "exclude": []}], "unknown FP8 recipe 'nope'"),
    ([{"precision": "fp16", "recipe": "all", "exclude": []}], "the plan's fp16 variant names a recipe ('all')"),
    ([], "the plan has no variants"),
])
def test_rerun_checks_the_whole_recorded_plan_before_the_model_is_built(variants, message, tmp_path, capsys,
                                                                          monkeypatch):
    import builders.study_inputs

    monkeypatch.setattr(builders.study_inputs, "load_inputs", lambda choice: pytest.fail("the model loaded"))
    doc = orjson.loads((H200 / "senet154-arch.json").read_bytes())
    doc["study"]["plan"]["variants"] = variants
    (tmp_path / "s.json").write_bytes(orjson.dumps(doc))
    assert main(["rerun", str(tmp_path / "s.json"), "--out", str(tmp_path / "new.json")]) == 2
    assert message in one_error_line(capsys)
    assert not (tmp_path / "new.json").exists()


def test_a_registered_plug_in_backend_and_tracer_are_chosen_from_the_command_line(tmp_path, capsys):
    run = build_parser()._subparsers._group_actions[0].choices["run"]
    choices = {action.dest: action.choices for action in run._actions}
    assert "fake" in choices["backend"] and "fake" in choices["tracer"]
    assert re.search(r"--backend \{auto,[^}]*fake[^}]*\}", run.format_help())
    out = tmp_path / "s.json"
    assert main(["run", "fake-model", "--backend", "fake", "--tracer", "fake", "--device", "cpu", "--variants",
                 "fp32,fp16", "--rounds", "1", "--iters", "1", "--warmup", "0", "--out", str(out)]) == 0
    session = storage.load(out)
    assert (session.study.backend, session.study.plan.tracer, session.study.engine) == ("fake", "fake", "Fake engine")
    assert [v.name for v in session.variants] == ["fp32", "fp16"] and session.variants[1].kernels is not None
    assert "Fake engine" in capsys.readouterr().err  # the first line names the backend by its own label
    from sessions.analyses.groups import load_rules
    from sessions.analyses.merge import merge_sessions
    from sessions.reports.export import export_markdown
    from sessions.reports.matrix_tables import matrix_markdown

    assert "; Fake engine; batch 1." in export_markdown(session, load_rules(), ["comparison"], str(out))
    second = dataclasses.replace(session, study=dataclasses.replace(session.study, batch=2))
    assert "; Fake engine |" in matrix_markdown(merge_sessions([(str(out), session), ("b.json", second)], []))


def test_an_unregistered_backend_is_one_line_with_the_registered_ones(capsys):
    with pytest.raises(SystemExit) as stopped:
        main(["run", "m", "--backend", "nope"])
    assert stopped.value.code == 2
    assert re.search(r"invalid choice: 'nope' \(choose from .*fake", capsys.readouterr().err)


@pytest.mark.parametrize(("option", "message"), [
    (["--batch", "0"], "--batch must be between 1 and 65536, not 0"),
    (["--seed", "-1"], "--seed must be between 0 and 4294967295, not -1"),
    (["--fp8-recipe", "nope"], "unknown FP8 recipe 'nope'"),
])
def test_onnx_checks_its_options_against_the_spec_before_the_model_loads(option, message, capsys, monkeypatch):
    import builders.study_inputs

    monkeypatch.setattr(builders.study_inputs, "load_inputs", lambda choice: pytest.fail("the model loaded"))
    assert main(["onnx", "resnet18", *option]) == 2
    assert message in one_error_line(capsys)


@pytest.mark.parametrize(("axes", "message"), [
    ('seed = [-1]', "axes.seed: --seed must be between 0 and 4294967295, not -1"),
    ('calib-count = [4]\ncalib_count = [8]', "'calib-count' and 'calib_count' are one option"),
    ('variants = ["fp32,int8"]', "unknown variant 'int8'"),
])
def test_a_sweep_dry_run_refuses_what_a_job_would_refuse(axes, message, tmp_path, capsys):
    matrix = tmp_path / "m.toml"
    matrix.write_text(f'[base]\nmodel = "test_resnet"\ndevice = "cpu"\n[axes]\n{axes}\n')
    assert main(["sweep", str(matrix), "--dry-run", "--out", str(tmp_path / "sweep")]) == 2
    assert message in one_error_line(capsys)


@pytest.mark.parametrize("batch", ["0", "65537"])
def test_import_takes_the_batch_range_of_run(batch, capsys):
    with pytest.raises(SystemExit) as stopped:
        main(["import", "--layers", "l.json", "--batch", batch])
    assert stopped.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"trt-inspect import: error: argument --batch: must be between 1 and 65536, not {batch}"]
    StudyRequest(model="m", batch=65536).validate()  # the top of the range is a batch run takes


def test_a_probe_session_names_what_timed_its_layers():
    import datetime as dt
    from types import SimpleNamespace

    import torch

    from inspector.probe.fp8_probe import new_probe_session
    from sessions.documents.engines import engine_label
    from sessions.documents.model import TimingMethod

    model = SimpleNamespace(name="m", source="timm", input_size=(3, 8, 8))
    method = TimingMethod("cuda-events", "one layer", None, 0.05, 5, 20, True, False, True, "isolated", "cupti")
    session = new_probe_session(ProbeOptions(model="m"), [], model, dt.datetime.now(dt.UTC), method)
    label = engine_label(session.study, session.environment)
    assert label.startswith(f"layers alone: PyTorch {torch.__version__}, cuDNN ") and label.endswith("and cuBLASLt")


def test_an_imported_session_names_its_engine_as_trtexec_files_with_their_version(tmp_path):
    layers = str(ROOT / "tests" / "data" / "fuzz" / "trt10.layers.json")
    assert main(["import", "--layers", layers, "--out", str(tmp_path / "p.json"), "--no-metadata-search"]) == 0
    assert storage.load(tmp_path / "p.json").study.engine == "trtexec files"
    log = tmp_path / "run.log"  # a trtexec log's version line, as in ../shared/fixtures/trt/*/result-04.log
    log.write_text("&&&& RUNNING TensorRT.trtexec [TensorRT v101601]\n"
                   "[07/07/2026-02:11:29] [I] TensorRT version: 10.16.1\n")
    assert main(["import", "--layers", layers, "--metadata", str(log), "--out", str(tmp_path / "v.json")]) == 0
    assert storage.load(tmp_path / "v.json").study.engine == "trtexec files (TensorRT 10.16.1)"


@pytest.mark.parametrize("command", ["run", "onnx"])
def test_the_recipe_help_lists_every_recipe_and_alias_of_the_recipes_file_and_names_it(command, capsys, monkeypatch):
    """Read apart from the code under test: the recipes file's tables and aliases, and the file named in the help
    found from the checkout's root."""
    import tomllib

    monkeypatch.setenv("COLUMNS", "1000")  # argparse wraps at the terminal's width, and at a hyphen
    file = ROOT / "builders" / "recipes" / "fp8.toml"
    recipes = tomllib.loads(file.read_text())["recipes"]
    with pytest.raises(SystemExit):
        build_parser().parse_args([command, "--help"])
    help_text = " ".join(capsys.readouterr().out.split())  # the help's lines joined
    recipe_help = help_text.split("--fp8-recipe RECIPE, --fp8-layout RECIPE ", 1)[1].split(" --fp8-exclude", 1)[0]
    listed = recipe_help.split(", each also as", 1)[0]
    expected = [name + (f" (alias {', '.join(spec['aliases'])})" if spec.get("aliases") else "")
                for name, spec in recipes.items()]
    assert listed.split(" | ") == expected
    named = re.search(r"recipes in (\S+);", recipe_help)
    assert named is not None and (ROOT / named.group(1)).resolve() == file.resolve()
    assert recipe_help.endswith("repeatable (default: all and no-se)")
