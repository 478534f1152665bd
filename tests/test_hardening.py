"""Bad input from every side: one clear line on stderr, the documented exit code, no traceback."""

import re
from pathlib import Path

import orjson
import pytest

from tests.conftest import H200, ROOT, run_cli

REAL = (H200 / "senet154-h200.json").read_bytes()


def bad_files(tmp: Path) -> dict[str, Path]:
    cases = {
        "empty": b"",
        "truncated": REAL[: len(REAL) // 3],
        "random bytes": bytes(range(256)) * 4,
        "future version": orjson.dumps({**orjson.loads(REAL), "schema_version": 42}),
        "not a session": b'{"hello": "world"}',
    }
    paths = {}
    for name, data in cases.items():
        path = tmp / (name.replace(" ", "_") + ".json")
        path.write_bytes(data)
        paths[name] = path
    return paths


@pytest.mark.parametrize("command", ["show", "groups", "export", "open"])
def test_every_command_refuses_bad_session_files(tmp_path, command):
    for name, path in bad_files(tmp_path).items():
        result = run_cli(command, str(path))
        assert result.returncode == 2, (command, name, result.stderr)
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("trt-inspect: error:"), (command, name, result.stderr)


def test_diff_with_one_bad_side(tmp_path):
    path = bad_files(tmp_path)["truncated"]
    result = run_cli("diff", str(H200 / "senet154-h200.json"), str(path))
    assert result.returncode == 2 and "corrupt or truncated" in result.stderr


@pytest.mark.parametrize(
    "args, code, message",
    [
        (["run", "test_resnet", "--device", "cpu", "--tracer", "cupti"], 3, "--tracer cupti needs a CUDA GPU"),
        (["run", "test_resnet", "--device", "cpu", "--fp8-layout", "odd", "--variants", "fp8"], 2, "unknown FP8 layout"),
        (["import", "--layers", "/nonexistent.json"], 2, "no such layer information file"),
        (["groups", str(H200 / "senet154-h200.json"), "--groups", "/nonexistent.toml"], 2, "no such rules file"),
        (["rerun", "/nonexistent.json"], 2, "no such session"),
    ],
)
def test_environment_and_input_errors(args, code, message):
    result = run_cli(*args)
    assert result.returncode == code, result.stderr
    assert message in result.stderr and "Traceback" not in result.stderr


def test_a_failed_variant_makes_run_exit_1_and_is_kept(tmp_path):
    out = tmp_path / "s.json"
    result = run_cli("run", "test_resnet", "--device", "cpu", "--variants", "fp32,fp8", "--fp8-layout", "all",
                     "--fp8-exclude", "*", "--rounds", "1", "--iters", "1", "--warmup", "0", "--out", str(out))
    assert result.returncode == 1
    session = orjson.loads(out.read_bytes())
    assert [(v["name"], v["status"]) for v in session["variants"]] == [("fp32", "ok"), ("fp8-all", "failed")]
    assert "leave no convolution to quantize" in session["variants"][1]["error"]


SOURCES = [p for folder in ("inspector", "builders", "profilers", "sessions") for p in (ROOT / folder).rglob("*.py")]


def test_no_pickle_no_shell_strings_in_the_code():
    for path in SOURCES:
        text = path.read_text()
        assert not re.search(r"^\s*(import|from)\s+(c?pickle|dill|shelve)\b", text, re.M), path
        assert "shell=True" not in text and "os.system(" not in text, path
        for call in re.findall(r"torch\.load\([^)]*\)", text):
            assert "weights_only=True" in call, (path, call)
