"""Session paths that are not UTF-8 (POSIX file names are bytes) and out-of-range arguments: one line, never a
traceback."""

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


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    errors = [line for line in err if not line.startswith("trt-inspect: [")]  # progress lines are not errors
    assert len(errors) == 1 and errors[0].startswith("trt-inspect: error:") and "Traceback" not in "".join(err), err
    return errors[0]


@pytest.mark.parametrize("argv", [["sessions"], ["show", "x"], ["run", "test_resnet", "--device", "cpu"],
                                  ["import", "--layers", "layers.json"]])
def test_a_home_that_is_a_file_is_one_line_before_any_work(tmp_path, monkeypatch, capsys, argv):
    home = tmp_path / "home-file"
    home.write_text("not a folder")
    monkeypatch.setenv("TRT_INSPECT_HOME", str(home))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "layers.json").write_text('{"Layers": ["conv1"]}')
    assert main(argv) == 2
    line = one_error_line(capsys)
    assert "TRT_INSPECT_HOME=" in line and line.endswith("is not a folder")


def test_a_300_character_model_name_is_an_unknown_model(capsys):
    assert main(["run", "a" * 300, "--device", "cpu", "--tracer", "none"]) == 2
    assert "unknown model" in one_error_line(capsys)


@pytest.mark.parametrize("option", [["--trace-calls", "18446744073709551616"], ["--batch", "100000000"],
                                    ["--warmup", "nan"], ["--rounds", "0"]])
def test_out_of_range_study_options_stop_before_the_model_loads(option, capsys, monkeypatch):
    import builders.study_inputs

    monkeypatch.setattr(builders.study_inputs, "load_inputs", lambda choice: pytest.fail("the model loaded"))
    assert main(["run", "resnet18", "--device", "cpu", *option]) == 2
    one_error_line(capsys)


@pytest.mark.parametrize("argv", [["run", "resnet18", "--batch", "1e8"], ["diff", "a"], ["show"],
                                  ["bogus-option", "--x"]])
def test_argument_errors_are_one_line(argv, capsys):
    with pytest.raises(SystemExit) as stopped:
        main(argv)
    assert stopped.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and ": error: " in err[0] and err[0].startswith("trt-inspect"), err
