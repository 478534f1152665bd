"""A smoke run on a real terminal: tmux runs the app, keys go in with send-keys, the screen comes back."""

import os
import shlex
import shutil
import subprocess
import sys
import time
import uuid

import pytest

from tests.conftest import H200, ROOT

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (.ci/run installs it)")


class Terminal:
    def __init__(self, command: list[str], env: dict):
        self.name = f"trt-inspect-{uuid.uuid4().hex[:8]}"
        shell = shlex.join(command)  # tmux runs a shell command line; our own argv, quoted
        subprocess.run(["tmux", "new-session", "-d", "-s", self.name, "-x", "120", "-y", "36", shell],
                       check=True, env=env, cwd=ROOT)

    def screen(self) -> str:
        out = subprocess.run(["tmux", "capture-pane", "-p", "-t", self.name], capture_output=True, text=True)
        return out.stdout

    def wait_for(self, text: str, timeout: float = 120) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            screen = self.screen()
            if text in screen:
                return screen
            time.sleep(0.3)
        raise AssertionError(f"{text!r} never appeared; screen:\n{self.screen()}")

    def keys(self, *keys: str) -> None:
        subprocess.run(["tmux", "send-keys", "-t", self.name, *keys], check=True)

    def alive(self) -> bool:
        return subprocess.run(["tmux", "has-session", "-t", self.name], capture_output=True).returncode == 0

    def close(self) -> None:
        subprocess.run(["tmux", "kill-session", "-t", self.name], capture_output=True)


@pytest.fixture
def terminal_env(isolated_home):
    return {**os.environ, "TERM": "xterm-256color", "TRT_INSPECT_HOME": str(isolated_home)}


def test_open_a_session_drill_and_quit(terminal_env):
    term = Terminal([sys.executable, "-m", "inspector", "open", str(H200 / "senet154-h200.json")], terminal_env)
    try:
        term.wait_for("median ms")
        term.keys("g")
        term.wait_for("grouped convolution")
        term.keys("Enter")
        term.wait_for("layer1.0.conv2")
        term.keys("C-q")
        deadline = time.monotonic() + 10
        while term.alive() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not term.alive()
    finally:
        term.close()


@pytest.mark.slow
def test_bare_model_on_a_terminal_runs_the_study_in_the_tui(terminal_env, tmp_path):
    out = tmp_path / "live.json"
    command = [sys.executable, "-m", "inspector", "test_resnet", "--device", "cpu", "--variants", "fp32,bf16",
               "--rounds", "1", "--iters", "1", "--warmup", "0", "--calib-count", "2", "--out", str(out)]
    term = Terminal(command, terminal_env)
    try:
        screen = term.wait_for("variant median", timeout=240)  # the overview's note: the study has finished
        assert "bf16" in screen and "study of" not in screen
        assert out.is_file()
        term.keys("C-q")
    finally:
        term.close()
