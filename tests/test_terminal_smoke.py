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

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (.ci/run installs it)")]


class Terminal:
    def __init__(self, command: list[str], env: dict):
        self.name = f"trt-inspect-{uuid.uuid4().hex[:8]}"
        shell = shlex.join(command)  # tmux runs a shell command line; our own argv, quoted
        subprocess.run(["tmux", "new-session", "-d", "-s", self.name, "-x", "120", "-y", "36", shell],
                       check=True, env=env, cwd=ROOT)

    def screen(self) -> str:
        out = subprocess.run(["tmux", "capture-pane", "-p", "-t", self.name], capture_output=True, text=True,
                             check=False)
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

    def type(self, text: str) -> None:
        """`text` as typed characters (tmux would read `^` or `C-` in a key name)."""
        subprocess.run(["tmux", "send-keys", "-t", self.name, "-l", text], check=True)

    def alive(self) -> bool:
        return subprocess.run(["tmux", "has-session", "-t", self.name], capture_output=True,
                              check=False).returncode == 0

    def quit(self, timeout: float = 10) -> bool:
        """Ctrl+Q, then whether the app (and its tmux session) ended within `timeout`."""
        self.keys("C-q")
        deadline = time.monotonic() + timeout
        while self.alive() and time.monotonic() < deadline:
            time.sleep(0.2)
        return not self.alive()

    def close(self) -> None:
        subprocess.run(["tmux", "kill-session", "-t", self.name], capture_output=True, check=False)


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
    """The wheel (not the checkout) carries app.tcss; opened in tmux from a fresh venv.

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
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                    "-w", str(tmp_path), str(source)],
                   check=True, capture_output=True)
    (wheel,) = tmp_path.glob("trt_inspect-*.whl")
    assert "inspector/tui/app.tcss" in zipfile.ZipFile(wheel).namelist()
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    purelib = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", purelib, str(wheel)],
                   check=True)
    deps = [p for p in [*site.getsitepackages(), sysconfig.get_paths()["purelib"]] if "site-packages" in p]
    (Path(purelib) / "zz_deps.pth").write_text("\n".join(dict.fromkeys(deps)) + "\n")
    where = subprocess.run([python, "-c", "import inspector; print(inspector.__file__)"], capture_output=True,
                           text=True, check=True, cwd=tmp_path).stdout
    assert where.startswith(purelib), where
    env = {k: v for k, v in terminal_env.items() if k != "PYTHONPATH"}
    term = Terminal(["env", "-C", str(tmp_path), str(python), "-m", "inspector", "open",
                     str(H200 / "senet154-h200.json")], env)
    try:
        term.wait_for("slower than fp16")  # the verdict: the stylesheet loaded and the overview drew
        term.keys("g")
        term.wait_for("grouped convolution")
        term.keys("Enter")  # the first group: quantize / dequantize, the largest time fp8-all adds (sorted by delta)
        term.wait_for("weight_quantizer")
        term.keys("Enter")
        screen = term.wait_for("count/call")
        flat = " ".join(screen.split())  # the breadcrumb wraps at 120 columns
        assert "quantize / dequantize in fp8-all > " in flat and "count/call" in flat  # a Q/DQ layer's kernels
        assert term.quit()
    finally:
        term.close()


# -- committed captures: what a user sees on a real terminal -------------------------------------
CAPTURES = Path(__file__).parent / "terminal_captures"  # outside __snapshots__, which syrupy owns


def settled(term: Terminal, text: str, timeout: float = 120) -> str:
    """The screen once `text` is on it and two captures a second apart agree (the app has finished drawing)."""
    screen = term.wait_for(text, timeout)
    while True:
        time.sleep(1.0)
        again = term.screen()
        if again == screen:
            return screen
        screen = again


def matches_capture(name: str, screen: str) -> None:
    """The screen equals the committed capture `name` (TRT_INSPECT_UPDATE_CAPTURES=1 writes it instead)."""
    path = CAPTURES / f"{name}.txt"
    lines = "\n".join(line.rstrip() for line in screen.rstrip("\n").splitlines()) + "\n"
    if os.environ.get("TRT_INSPECT_UPDATE_CAPTURES") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(lines)
    assert lines == path.read_text(), f"the screen differs from {path}:\n{lines}"


def test_capture_the_overview_answers_fp8(terminal_env):
    term = Terminal([sys.executable, "-m", "inspector", "open", str(H200 / "senet154-mainjob-warm.json")], terminal_env)
    try:
        screen = settled(term, "median ms")
        assert ("fp8-all (simulated) is 3.81x slower than fp16; quantize / dequantize adds 11.87 of the 13.73 ms"
                in screen)
        assert "143 quantizer scales raised to the 2^-14 floor" in screen
        matches_capture("overview-senet154-mainjob-warm", screen)
        term.keys("t")
        screen = settled(term, "launches on")
        assert "stream 7" in screen and "timeline of fp8-all" in screen
        matches_capture("timeline-senet154-fp8-all", screen)
        assert term.quit()
    finally:
        term.close()


def test_capture_an_imported_qat_pair_with_verdict_tactics_and_formats(terminal_env, tmp_path):
    from tests.conftest import fixture_dir, run_cli

    fp16, qat = fixture_dir("trt8-resnet-a100-fp16"), fixture_dir("trt8-resnet-a100-int8-qat")
    path = tmp_path / "resnet-qat.json"
    for folder, stem, name, where in ((fp16, "resnet", "fp16", ["--out", str(path)]),
                                      (qat, "resnet-qat", "int8-qat", ["--into", str(path)])):
        done = run_cli("import", "--layers", str(folder / f"{stem}.onnx.engine.graph.json"), "--profile",
                       str(folder / f"{stem}.onnx.engine.profile.json"), "--name", name, "--model", "resnet", *where)
        assert done.returncode == 0, done.stderr
    from sessions.documents import storage

    session = storage.load(path)
    session.study.created = "2026-12-01T12:00:00+00:00"  # the import's own clock, fixed for a stable capture
    storage.save(session, path)
    term = Terminal([sys.executable, "-m", "inspector", "open", str(path)], terminal_env)
    try:
        screen = settled(term, "int8-qat is 1.08x slower than fp16")
        assert ("summed per-layer times: no end-to-end time recorded" in screen
                and "real int8 kernels (trtexec)" in screen)
        matches_capture("overview-imported-qat-pair", screen)
        term.keys("g")
        settled(term, "int8-qat against fp16")
        term.keys("/")  # the convolutions' group, then its first layer in full
        term.wait_for("Filter rows")
        term.type("^other conv")
        term.keys("Enter")
        term.wait_for("1 of 7 rows match")
        term.keys("Enter")
        screen = settled(term, "tactic:")  # the layers' detail pane is open from the start
        assert "Int8 format" in screen and "reformats:" in screen
        matches_capture("layers-imported-qat-detail", screen)
        assert term.quit()
    finally:
        term.close()


@pytest.mark.slow
def test_capture_a_live_study_with_finished_and_running_rows(terminal_env, tmp_path):
    """Its figures change from run to run: the structure is asserted, and TRT_INSPECT_UPDATE_CAPTURES=1 keeps the
    screen as `live-study-running.txt` for the record."""
    command = [sys.executable, "-m", "inspector", "test_resnet", "--device", "cpu", "--variants", "fp32,bf16,fp8",
               "--rounds", "2", "--iters", "1", "--warmup", "0", "--calib-count", "2",
               "--out", str(tmp_path / "l.json")]
    term = Terminal(command, terminal_env)
    try:
        screen = term.wait_for("running: ", timeout=240)
        while "variants done; about" not in screen:  # the first variant saved, the next one under way
            screen = term.wait_for("running: ", timeout=240)
        finished = [line for line in screen.splitlines() if line.startswith("fp32 ")]
        running = [line for line in screen.splitlines() if "running: " in line]
        assert finished and finished[0].split()[1] == "ok" and running and not running[0].startswith("fp32 ")
        if os.environ.get("TRT_INSPECT_UPDATE_CAPTURES") == "1":
            (CAPTURES / "live-study-running.txt").write_text(
                "\n".join(line.rstrip() for line in screen.rstrip("\n").splitlines()) + "\n")
        term.keys("C-q")
    finally:
        term.close()
