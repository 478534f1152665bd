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


def test_open_without_a_terminal_says_so():
    result = run_cli("open", str(H200 / "senet154-h200.json"))
    assert result.returncode == 2 and "open needs a terminal" in result.stderr


def test_diff_with_one_bad_side(tmp_path):
    path = bad_files(tmp_path)["truncated"]
    result = run_cli("diff", str(H200 / "senet154-h200.json"), str(path))
    assert result.returncode == 2 and "corrupt or truncated" in result.stderr


@pytest.mark.parametrize(
    "args, code, message",
    [
        (["run", "test_resnet", "--device", "cpu", "--tracer", "cupti"], 3, "--tracer cupti needs a CUDA GPU"),
        (["run", "test_resnet", "--device", "cpu", "--fp8-layout", "odd", "--variants", "fp8"], 2,
         "unknown FP8 recipe"),
        (["import", "--layers", "/nonexistent.json"], 2, "no such layer information file"),
        (["groups", str(H200 / "senet154-h200.json"), "--groups", "/nonexistent.toml"], 2, "no such rules file"),
        (["groups", str(H200 / "senet154-h200.json"), "--groups", str(ROOT)], 2, "is a folder, not a rules file"),
        (["rerun", "/nonexistent.json"], 2, "no such session"),
    ],
)
def test_environment_and_input_errors(args, code, message):
    result = run_cli(*args)
    assert result.returncode == code, result.stderr
    assert message in result.stderr and "Traceback" not in result.stderr


@pytest.mark.slow
def test_a_recipe_that_selects_nothing_is_refused_before_any_work(tmp_path):
    out = tmp_path / "s.json"
    result = run_cli("run", "test_resnet", "--device", "cpu", "--variants", "fp32,fp8", "--fp8-layout", "all",
                     "--fp8-exclude", "*", "--rounds", "1", "--iters", "1", "--warmup", "0", "--out", str(out))
    assert result.returncode == 2
    assert "fp8-all quantizes no layer of test_resnet" in result.stderr and "Traceback" not in result.stderr
    assert not out.exists()


def test_a_failed_variant_is_kept_beside_the_ones_that_worked(tmp_path):
    from inspector.study import run_study
    from sessions.documents.plan import StudyPlan, TimingPlan, parse_variants

    plan = StudyPlan(model="test_resnet", backend="torch", device="cpu", batch=1, timing=TimingPlan(0, 1, 1),
                     variants=parse_variants("fp32,fp8", ["all"], ["*"]), tracer="none", calib_count=2,
                     out=str(tmp_path / "s.json"))  # a plan made without resolve's check: the build fails
    session, path = run_study(plan, [], lambda p: None)
    assert [(v.name, v.status) for v in session.variants] == [("fp32", "ok"), ("fp8-all", "failed")]
    assert "quantizes no layer" in session.variants[1].error
    assert orjson.loads(path.read_bytes())["variants"][1]["status"] == "failed"


SOURCES = [p for folder in ("inspector", "builders", "profilers", "sessions") for p in (ROOT / folder).rglob("*.py")]


def test_no_pickle_no_shell_strings_in_the_code():
    for path in SOURCES:
        text = path.read_text()
        assert not re.search(r"^\s*(import|from)\s+(c?pickle|dill|shelve)\b", text, re.MULTILINE), path
        # the one exception: the compile workers' jobs, in memory, in their pool's own transport
        assert "ForkingPickler" not in text or path == ROOT / "builders" / "engine" / "compiler.py", path
        assert "shell=True" not in text and "os.system(" not in text, path
        for call in re.findall(r"torch\.load\([^)]*\)", text):
            assert "weights_only=True" in call, (path, call)


@pytest.mark.slow
@pytest.mark.parametrize("signal_name", ["SIGINT", "SIGTERM"])
def test_ctrl_c_during_a_cli_study_keeps_the_finished_variants(tmp_path, signal_name):
    import os
    import signal
    import subprocess
    import sys
    import time

    out = tmp_path / "s.json"
    proc = subprocess.Popen(
        [sys.executable, "-m", "inspector", "run", "test_resnet", "--device", "cpu", "--variants", "fp32,fp16,bf16",
         "--rounds", "50", "--iters", "20", "--warmup", "0", "--calib-count", "2", "--out", str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ},
        # a shell that started pytest in the background ignores SIGINT, and children inherit that
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # noqa: PLW1509  (a signal reset, no lock)
    )
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if out.exists() and len(orjson.loads(out.read_bytes())["variants"]) == 3:
            break  # every variant built and traced; the timing rounds are running now
        time.sleep(0.2)
    proc.send_signal(getattr(signal, signal_name))
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    assert "interrupted; finished variants are saved in" in stderr and "Traceback" not in stderr
    session = orjson.loads(out.read_bytes())
    assert [v["name"] for v in session["variants"]] == ["fp32", "fp16", "bf16"]
    assert all(v["trace"]["records"] > 0 for v in session["variants"])
