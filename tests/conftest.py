from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TESTS = Path(__file__).resolve().parent  # the tests root: data, helpers and stand-ins are found from it
DATA = TESTS / "data"
H200 = DATA / "h200"
FIXTURES = ROOT.parent / "shared" / "fixtures" / "trtexec"


@pytest.fixture(autouse=True)
def isolated_home(tmp_path, monkeypatch):
    """Sessions of a test go to its own folder, never the user's."""
    monkeypatch.setenv("TRT_INSPECT_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


@pytest.fixture(autouse=True)
def no_offered_model():
    """A meta-device model one test's recipe preflight offers (builders.models.seeded_weights) is never another
    test's."""
    yield
    seeded = sys.modules.get("builders.models.seeded_weights")
    if seeded is not None:
        seeded._OFFERED.clear()


@dataclass(frozen=True)
class CliResult:
    """What one command left: its exit code and its output, as `subprocess.CompletedProcess` names them."""

    returncode: int
    stdout: str
    stderr: str


def run_cli(*args: str) -> CliResult:
    """Run a command in this process (`inspector.cli.main`), its stdout and stderr captured, as the console script
    would run it bar the process: no fresh interpreter, so no environment read at start-up, no signals, no exit.
    A test about the process itself (signals, start-up, imports, a hang it guards with a timeout) uses
    `run_cli_process`."""
    from inspector.cli import main

    (out, stdout), (err, stderr) = _pipe(), _pipe()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        try:
            code = main(list(args))
        except SystemExit as exit_:  # argparse: --help, usage errors
            code = exit_.code if isinstance(exit_.code, int) else 0 if exit_.code is None else 1
    stdout.flush()
    stderr.flush()
    return CliResult(code, out.getvalue().decode(), err.getvalue().decode())


def _pipe() -> tuple[io.BytesIO, io.TextIOWrapper]:
    """Bytes and a strict UTF-8 text stream over them, like a pipe's: text that cannot be encoded (a lone surrogate
    from a non-UTF-8 file name) fails here as it would on a real stdout, where a StringIO would take it."""
    raw = io.BytesIO()
    return raw, io.TextIOWrapper(raw, encoding="utf-8", newline="", write_through=True)


def run_cli_process(*args: str, timeout: int = 600, env: dict | None = None) -> subprocess.CompletedProcess[str]:
    """Run the installed CLI as a user would, in a fresh process."""
    full_env = {**os.environ, **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "inspector", *args], capture_output=True, text=True, timeout=timeout, env=full_env,
        check=False,
    )


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """No silent skips in CI: under CI=true a test that would skip (missing fixture, tool or package) fails."""
    outcome = yield
    report = outcome.get_result()
    if report.skipped and in_ci() and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"would skip, but CI=true: {reason}"


def fixture_dir(name: str) -> Path:
    path = FIXTURES / name
    if not path.is_dir():
        pytest.skip(f"shared fixture {name} is not present beside the checkout ({FIXTURES})")
    return path
