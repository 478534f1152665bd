from __future__ import annotations

import os
import sys
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


def run_cli(*args: str, timeout: int = 600, env: dict | None = None):
    """Run the installed CLI as a user would, in a fresh process."""
    import os
    import subprocess

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
