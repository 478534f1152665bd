"""A smoke run on a real terminal: tmux runs the app, keys go in with send-keys, the screen comes back."""

import os
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

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

    def quit(self, timeout: float = 10) -> bool:
        """Ctrl+Q, then whether the app (and its tmux session) ended within `timeout`."""
        self.keys("C-q")
        deadline = time.monotonic() + timeout
        while self.alive() and time.monotonic() < deadline:
            time.sleep(0.2)
        return not self.alive()

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
        assert term.quit()
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


@pytest.mark.slow
def test_the_built_wheel_opens_a_session_and_drills_to_the_qdq_kernels(tmp_path, terminal_env):
    """Bug 11: the wheel (not the checkout) carries app.tcss; opened in tmux from a fresh venv.

    The venv gets the wheel alone; its dependencies come from this interpreter's site-packages
    through a .pth line placed after the venv's own, so the imported `inspector` is the wheel's.
    """
    import site
    import sysconfig
    import zipfile

    source = tmp_path / "source"  # a clean copy: a build/ or egg-info left in the checkout would hide a missing file
    for name in ("inspector", "builders", "profilers", "sessions"):
        shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(tmp_path), str(source)],
                   check=True, capture_output=True)
    (wheel,) = tmp_path.glob("trt_inspect-*.whl")
    assert "inspector/tui/app.tcss" in zipfile.ZipFile(wheel).namelist()
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    purelib = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", purelib, str(wheel)], check=True)
    deps = [p for p in [*site.getsitepackages(), sysconfig.get_paths()["purelib"]] if "site-packages" in p]
    (Path(purelib) / "zz_deps.pth").write_text("\n".join(dict.fromkeys(deps)) + "\n")
    where = subprocess.run([python, "-c", "import inspector; print(inspector.__file__)"], capture_output=True, text=True,
                           check=True, cwd=tmp_path).stdout
    assert where.startswith(purelib), where
    env = {k: v for k, v in terminal_env.items() if k != "PYTHONPATH"}
    term = Terminal(["env", "-C", str(tmp_path), str(python), "-m", "inspector", "open", str(H200 / "senet154-h200.json")], env)
    try:
        term.wait_for("slower than fp16")  # the verdict: the stylesheet loaded and the overview drew
        term.keys("g")
        term.wait_for("grouped convolution")
        term.keys("G", "Enter")  # the last group: quantize / dequantize (fp8 only)
        term.wait_for("weight_quantizer")
        term.keys("Enter")
        screen = term.wait_for("count/call")
        assert "quantize / dequantize in fp8-all > layer1.0.conv1.input_quantizer" in screen
        assert term.quit()
    finally:
        term.close()
