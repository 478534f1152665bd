from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(__file__).parent / "data"
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
        [sys.executable, "-m", "inspector", *args], capture_output=True, text=True, timeout=timeout, env=full_env
    )


def fixture_dir(name: str) -> Path:
    path = FIXTURES / name
    if not path.is_dir():
        pytest.skip(f"shared fixture {name} is not present beside the checkout")
    return path
