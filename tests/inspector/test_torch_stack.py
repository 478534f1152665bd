"""A mismatched torch / torchvision pair is one line with the fix, before any work, from every model command."""

from __future__ import annotations

import importlib

import pytest

from inspector import cli, torch_stack
from sessions.documents.errors import ExitCode, MissingEnvironment


@pytest.fixture
def installed(monkeypatch):
    """Set the versions and torchvision's requirements that `importlib.metadata` reports."""
    def set_pair(torch: str, torchvision: str, requires: list[str]) -> None:
        versions = {"torch": torch, "torchvision": torchvision}
        monkeypatch.setattr(torch_stack.metadata, "version", lambda name: versions[name])
        monkeypatch.setattr(torch_stack.metadata, "requires", lambda name: requires)
    return set_pair


def test_cpu_torch_beside_default_torchvision_is_refused_without_importing(installed, monkeypatch):
    installed("2.13.0+cpu", "0.28.0", ["torch (==2.13.0)"])
    monkeypatch.setattr(importlib, "import_module", lambda name: pytest.fail("imported despite the labels"))
    with pytest.raises(MissingEnvironment, match=r"torch and torchvision do not match: torch 2\.13\.0\+cpu "
                                                 r"\(cpu build\) with torchvision 0\.28\.0 \(default build\)"):
        torch_stack.check()


def test_torch_outside_torchvisions_requirement_is_refused(installed):
    installed("2.14.1", "0.28.0", ["torch (==2.13.0)"])
    with pytest.raises(MissingEnvironment, match=r"needs torch==2\.13\.0; reinstall"):
        torch_stack.check()


def test_import_failure_is_one_line(installed, monkeypatch):
    installed("2.14.1", "0.29.1", ["torch (>=2.14.0)", "numpy"])

    def fails(name):
        raise RuntimeError("operator torchvision::nms does not exist\n  File ...\n  File ...")
    monkeypatch.setattr(importlib, "import_module", fails)
    with pytest.raises(MissingEnvironment) as raised:
        torch_stack.check()
    assert "\n" not in raised.value.message
    assert "(operator torchvision::nms does not exist)" in raised.value.message


def test_a_matching_pair_passes(installed, monkeypatch):
    installed("2.14.1", "0.29.1", ["torch (>=2.14.0)"])
    imported = []
    monkeypatch.setattr(importlib, "import_module", imported.append)
    torch_stack.check()
    assert imported == ["torchvision"]


@pytest.mark.parametrize("argv", [["run", "resnet18"], ["resnet18"], ["probe", "resnet18"], ["onnx", "resnet18"]])
def test_model_commands_stop_at_the_check(installed, monkeypatch, capsys, argv):
    installed("2.13.0+cpu", "0.28.0", ["torch (==2.13.0)"])
    monkeypatch.setattr(cli, "interactive", lambda: False)
    assert cli.main(argv) == ExitCode.ENVIRONMENT
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("trt-inspect: error: torch and torchvision do not match"), lines
