"""`--backend auto` where no backend runs: the error names each backend and why, a backend whose module cannot be
imported among them (the module and the import error's first line), never an empty list."""

from __future__ import annotations

import pytest

import builders.backend
from inspector import cli
from inspector.request import StudyRequest
from inspector.resolve import choose_backend
from sessions.documents.errors import MissingEnvironment

GHOST = "builders.ghost.ghost_backend"


@pytest.fixture
def only_an_unimportable_backend(monkeypatch):
    """The built-in backends are one whose module does not exist, none registered yet."""
    monkeypatch.setattr(builders.backend, "builtin_backends", lambda: {"ghost": GHOST})
    monkeypatch.setattr(builders.backend, "_registered", {})


def test_a_backend_that_cannot_be_imported_is_named_with_its_module_and_error(only_an_unimportable_backend):
    with pytest.raises(MissingEnvironment) as raised:
        choose_backend(StudyRequest(model="resnet18"), has_gpu=False)
    assert str(raised.value) == (f"no backend runs here: backend ghost: importing {GHOST} failed: "
                                 "No module named 'builders.ghost'")


def test_run_prints_that_reason_on_one_line_and_exits_non_zero(only_an_unimportable_backend, capsys, tmp_path,
                                                                 monkeypatch):
    monkeypatch.setenv("TRT_INSPECT_HOME", str(tmp_path))
    code = cli.main(["run", "resnet18", "--device", "cpu", "--out", str(tmp_path / "s.json")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == MissingEnvironment("").exit_code != 0
    assert err[-1] == (f"trt-inspect: error: no backend runs here: backend ghost: importing {GHOST} failed: "
                       "No module named 'builders.ghost'")


def test_a_backend_auto_does_not_pick_on_the_device_is_named_beside_the_unimportable_one(only_an_unimportable_backend,
                                                                                         monkeypatch):
    from tests.fake_backend import FakeBackend

    class GpuOnly(FakeBackend):
        name, label, auto_rank, auto_devices = "gpu-only", "GPU-only engine", 0, frozenset({"cuda"})

    monkeypatch.setitem(builders.backend._registered, "gpu-only", GpuOnly)
    with pytest.raises(MissingEnvironment) as raised:
        choose_backend(StudyRequest(model="resnet18", device="cpu"), has_gpu=False)
    assert str(raised.value) == (f"no backend runs here: backend ghost: importing {GHOST} failed: "
                                 "No module named 'builders.ghost'; GPU-only engine: --backend auto does not pick it "
                                 "on cpu")
