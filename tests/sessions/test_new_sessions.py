"""New sessions: the one constructor (sessions.documents.document.new_session) and the one naming rule of their files
(sessions.documents.paths.session_file), as every producer uses them."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from sessions.documents import document
from sessions.documents.paths import HOME_ENV, session_file
from tests.conftest import DATA

CREATED = dt.datetime(2026, 12, 1, 14, 5, 9, tzinfo=dt.UTC)


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv(HOME_ENV, str(tmp_path))
    return tmp_path / "sessions"


@pytest.mark.parametrize(("subject", "qualifiers", "name"), [
    ("resnet18", (), "resnet18-20261201-140509.json"),
    ("timm/resnet 50", ("probe", "b8"), "timm_resnet_50-probe-b8-20261201-140509.json"),
    ("/models/segformer.b0.onnx", (), "segformer.b0-20261201-140509.json"),
    ("m", ("import", "fp8 all/x"), "m-import-fp8_all_x-20261201-140509.json"),
    ("a" * 130, (), "a" * 120 + "-20261201-140509.json"),
], ids=["model", "path-like name", "onnx file", "import", "long name"])
def test_a_new_session_is_named_by_subject_qualifiers_and_time(home, subject, qualifiers, name):
    assert session_file(None, subject, CREATED, *qualifiers) == home / name


def test_out_names_the_file_itself(home):
    assert session_file("here/s.json", "resnet18", CREATED, "probe") == Path("here/s.json")


def _session(**stamp):
    from sessions.documents.model import Environment, TimingMethod

    method = TimingMethod("cuda-events", "one call", None, 0.0, 1, 1, True, False, True, "kernels", "cupti")
    return document.new_session(model="m", source="timm", input_shape=[3, 8, 8], batch=1, command=["trt-inspect"],
                                backend="torch", device="cpu", weights="random", engine=None,
                                environment=Environment("h", "linux", "cpu", 1, "3", {}), method=method, **stamp)


def test_a_new_session_is_stamped_in_utc_to_the_second_by_this_tool():
    two_hours_east = dt.timezone(dt.timedelta(hours=2))
    study = _session(created=dt.datetime(2026, 12, 1, 16, 5, 9, 999, tzinfo=two_hours_east)).study
    assert study.created == "2026-12-01T14:05:09+00:00"
    assert (study.tool_version, study.tool_commit) == (document.tool_version(), document.tool_commit())


def test_a_merge_keeps_the_version_of_its_jobs_and_no_commit():
    study = _session(made_by="several: 0.1, 0.2").study
    assert (study.tool_version, study.tool_commit) == ("several: 0.1, 0.2", None)


def test_imported_files_make_a_session_stamped_like_a_study(home):
    from inspector.cli import main
    from sessions.documents.storage import load

    assert main(["import", "--layers", str(DATA / "fuzz" / "trt10.layers.json"), "--json"]) == 0
    [path] = home.glob("*.json")
    study = load(path).study
    assert path.name == f"{study.model}-import-{load(path).variants[0].name}-" \
        f"{dt.datetime.fromisoformat(study.created):%Y%m%d-%H%M%S}.json"
    assert study.tool_commit == document.tool_commit()
