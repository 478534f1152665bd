"""Under CI=true a test that would skip (a missing shared fixture, tool or package) fails; elsewhere it skips, saying
why."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT

SKIPPING = '''
import pytest
from tests.conftest import fixture_dir

def test_needs_a_missing_fixture():
    fixture_dir("no-such-fixture")

@pytest.mark.skipif(True, reason="a tool is missing")
def test_marked():
    pass
'''


@pytest.mark.parametrize("ci, expected", [("true", "1 failed, 1 error"), ("", "2 skipped")])
def test_skips_fail_under_ci(tmp_path, ci, expected):
    (tmp_path / "test_skipping.py").write_text(SKIPPING)
    env = {**os.environ, "CI": ci, "PYTHONPATH": str(ROOT)}
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "tests.conftest", "-p", "no:cacheprovider",
                             "-rs", str(tmp_path / "test_skipping.py")], cwd=tmp_path, env=env, capture_output=True,
                            text=True, timeout=120, check=False)
    assert expected in result.stdout, result.stdout
    assert "shared fixture no-such-fixture is not present" in result.stdout
