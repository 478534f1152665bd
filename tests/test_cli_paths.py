"""Session paths that are not UTF-8 (POSIX file names are bytes) and out-of-range arguments: one line, never a traceback."""

from __future__ import annotations

import os
import shutil

import orjson
import pytest

from inspector.cli import main
from tests.conftest import H200

REAL = H200 / "senet154-h200.json"


@pytest.fixture
def latin1_session(isolated_home):
    folder = isolated_home / "sessions"
    folder.mkdir(parents=True)
    path = os.fsdecode(os.fsencode(str(folder)) + b"/caf\xe9.json")  # 'caf\udce9.json': not valid UTF-8
    shutil.copy(REAL, path)
    return path


@pytest.mark.parametrize("argv", [
    ["show", "{p}", "--json"], ["sessions", "--json"], ["diff", "{p}", "{p}", "--format", "json"],
    ["export", "{p}", "--format", "json"],
])
def test_json_output_names_a_non_utf8_session_path(latin1_session, capsysbinary, argv):
    code = main([a.replace("{p}", latin1_session) for a in argv])
    out = capsysbinary.readouterr().out
    assert code == 0
    document = orjson.loads(out)  # valid UTF-8 JSON
    text = out.decode()
    assert "caf\\\\xe9.json" in text, text[:400]
    assert document
