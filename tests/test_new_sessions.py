"""The one naming rule of new session files (sessions.paths.session_file), as every producer uses it."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from sessions.paths import HOME_ENV, session_file

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
