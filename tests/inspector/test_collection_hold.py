"""`inspector.process.collection_held` / `settle_heap`: the garbage collector held while a study command sets up,
the heap frozen once it is, and everything as it was after the command."""

from __future__ import annotations

import gc

import pytest

import tests.fake_backend  # registers the fake backend and tracer
from inspector import process
from inspector.study import run_study
from tests.inspector.test_study_fake import fake_plan


@pytest.fixture(autouse=True)
def collector_restored():
    enabled, frozen = gc.isenabled(), gc.get_freeze_count()
    yield
    if gc.get_freeze_count() > frozen:
        gc.unfreeze()
    if enabled:
        gc.enable()
    else:
        gc.disable()


def test_the_hold_stops_the_collector_until_the_study_is_set_up_then_freezes_what_the_heap_holds():
    gc.enable()
    kept = [[] for _ in range(10)]  # a few objects the collector tracks: the heap is never empty
    with process.collection_held():
        assert not gc.isenabled()
        process.settle_heap()
        assert gc.isenabled() and gc.get_freeze_count() >= len(kept)
        process.settle_heap()  # once: a second call freezes nothing more
        assert gc.isenabled()
    assert gc.isenabled() and gc.get_freeze_count() == 0  # nothing stays frozen after the command


class Cycle:
    """Garbage only the collector frees: it refers to itself."""

    def __init__(self) -> None:
        self.me = self


def test_a_save_after_the_study_is_set_up_neither_unfreezes_the_heap_nor_freezes_the_builds_garbage():
    """`gc_paused` (a session's save, a diff) inside a settled study: the set-up's freeze stays, and a cycle the
    builds left (a failed build's model copy) stays collectable; outside one it unfreezes what it froze, as before."""
    import weakref

    from sessions.documents.gc_pause import gc_paused

    gc.enable()
    with process.collection_held():
        process.settle_heap()
        frozen = gc.get_freeze_count()
        garbage = Cycle()
        gone = weakref.ref(garbage)
        del garbage
        with gc_paused():
            built = [[index] for index in range(1000)]
        assert gc.get_freeze_count() == frozen and gc.isenabled() and built
        gc.collect()
        assert gone() is None
    assert gc.get_freeze_count() == 0
    with gc_paused():
        built = [[index] for index in range(1000)]
    assert gc.get_freeze_count() == 0 and gc.isenabled()


def test_a_hold_inside_a_hold_is_the_outer_ones():
    gc.enable()
    with process.collection_held():
        with process.collection_held():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the inner block's end gave nothing back
        process.settle_heap()
        assert gc.isenabled() and gc.get_freeze_count() > 0
    assert gc.isenabled() and gc.get_freeze_count() == 0


def test_a_command_that_never_sets_up_a_study_gets_the_collector_back_as_it_was():
    gc.enable()
    with pytest.raises(KeyError), process.collection_held():
        raise KeyError("no such model")
    assert gc.isenabled() and gc.get_freeze_count() == 0
    gc.disable()  # a caller that had turned it off keeps it off, settled or not
    with process.collection_held():
        process.settle_heap()
        assert not gc.isenabled()
    assert not gc.isenabled() and gc.get_freeze_count() == 0


def test_without_a_hold_settling_freezes_nothing_and_leaves_the_collector_alone():
    gc.enable()
    with process.collection_held(active=False):
        assert gc.isenabled()
        process.settle_heap()  # the TUI's study, a sweep's worker
        assert gc.get_freeze_count() == 0
    process.settle_heap()
    assert gc.isenabled() and gc.get_freeze_count() == 0


def test_a_study_settles_the_heap_once_set_up_and_before_its_first_build(tmp_path, monkeypatch):
    events: list[str] = []
    fake = tests.fake_backend.FakeBackend
    build = fake.build
    monkeypatch.setattr(fake, "build", lambda self, variant, calibration: (events.append("build"),
                                                                          build(self, variant, calibration))[1])
    reference = fake.reference
    monkeypatch.setattr(fake, "reference", lambda self, batch: (events.append("reference"),
                                                               reference(self, batch))[1])
    monkeypatch.setattr(process, "settle_heap", lambda: events.append("settled"))
    run_study(fake_plan(tmp_path), ["trt-inspect", "run", "fake-model"], lambda p: None)
    assert events[events.index("settled") - 1] == "reference" and events.count("settled") == 1
    assert events[events.index("settled") + 1:] == ["build"] * 3


def test_the_cli_holds_the_collector_for_the_commands_that_run_a_study_only(monkeypatch):
    """`run` and `rerun` run one study (held from their start, the study settles); `probe`, `sweep`, `onnx` build
    models for longer without a set-up to end the hold, and reading commands build none."""
    from inspector import cli

    held: list[bool] = []  # one hold asked for per command, active or not
    real = process.collection_held

    def recording(active: bool = True):
        held.append(active)
        return real(active)

    monkeypatch.setattr(process, "collection_held", recording)
    monkeypatch.setattr(cli.torch_stack, "check", lambda: None)
    for name in cli.COMMANDS:  # every command stands in: only the hold around it is under test
        monkeypatch.setitem(cli.COMMANDS, name, lambda args: 0)
    for argv in (["run", "senet154"], ["rerun", "s.json"], ["show", "s.json"], ["probe", "senet154"]):
        assert cli.main(argv) == 0
    assert held == [True, True, False, False]  # run, rerun, show, probe
