"""Compile workers started before a study's builds (`start_workers_early`): one ready-up job per worker, taken by the
first compiler of their device instead of a pool of its own, ended by `close_early_workers` where none took them; and
the cuDNN engine starting them only where its timing cache is missing, ending them when the study ends."""

from __future__ import annotations

import concurrent.futures
import os
from concurrent.futures.process import BrokenProcessPool

import pytest

from builders.engine import compiler as plan_compiler
from builders.engine.compiler import PlanCompiler


class RecordingPool:
    """A stand-in for the process pool: records what it is sent and whether it was shut down."""

    def __init__(self, workers: int) -> None:
        self.workers, self.calls, self.futures, self.shut = workers, [], [], False

    def submit(self, fn, *args) -> concurrent.futures.Future:
        self.calls.append((fn.__name__, args))
        self.futures.append(concurrent.futures.Future())
        return self.futures[-1]

    def shutdown(self, wait: bool, cancel_futures: bool) -> None:
        self.shut = True


class RefusingPool(RecordingPool):
    def submit(self, fn, *args) -> concurrent.futures.Future:
        raise BrokenProcessPool("a worker died at its start")


@pytest.fixture
def pools(monkeypatch) -> list[RecordingPool]:
    made: list[RecordingPool] = []
    monkeypatch.setattr(plan_compiler, "_new_pool", lambda workers: made.append(RecordingPool(workers)) or made[-1])
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(16)))
    monkeypatch.setattr(plan_compiler, "_EARLY", {})
    return made


def test_workers_started_early_get_ready_and_the_first_compiler_of_their_device_takes_them(pools):
    plan_compiler.start_workers_early(1)
    plan_compiler.start_workers_early(1)  # started already: nothing more
    (early,) = pools
    assert early.workers == plan_compiler.MAX_WORKERS == 15  # all but one of the 16 cores, at most MAX_WORKERS
    assert early.calls == [("_ready", (1,))] * early.workers  # one ready-up a worker, on their device
    other = PlanCompiler(0)
    other.submit(["a", "b", "c", "d"], 4)  # type: ignore[list-item]
    assert len(pools) == 2 and other._pool is pools[1]  # another device's compiler starts its own
    mine = PlanCompiler(1)
    mine.submit(["a", "b"], 4)  # type: ignore[list-item]  (fewer than MIN_GRAPHS: sent, the workers are ready)
    assert mine._pool is early and mine._workers == early.workers and len(pools) == 2
    assert [name for name, _ in early.calls[early.workers:]] == ["_compile", "_compile"]
    plan_compiler.close_early_workers(1)
    assert not early.shut  # a compiler took them: its own `close` ends them
    mine.close()
    assert early.shut


def test_a_compiler_counts_its_early_workers_as_answered_once_one_is_ready(pools):
    plan_compiler.start_workers_early(0)
    compiler = PlanCompiler(0)
    compiler.submit(["a", "b", "c", "d"], 4)  # type: ignore[list-item]
    assert not compiler._warm.is_set()  # taken before any worker was ready: `take` builds here meanwhile
    ready = pools[0].futures[0]
    ready.set_running_or_notify_cancel()
    ready.set_result(None)
    assert compiler._warm.is_set()  # a worker is ready: `take` waits for the answers


def test_workers_no_compiler_took_are_ended(pools):
    plan_compiler.start_workers_early(0)
    plan_compiler.close_early_workers(0)
    assert pools[0].shut
    PlanCompiler(0).submit(["a", "b", "c", "d"], 4)  # type: ignore[list-item]
    assert len(pools) == 2  # they are gone: a pool of its own


def test_a_pool_that_cannot_start_is_ended_and_the_first_build_starts_its_own(pools, monkeypatch):
    monkeypatch.setattr(plan_compiler, "_new_pool", lambda workers: pools.append(RefusingPool(workers)) or pools[-1])
    plan_compiler.start_workers_early(0)
    assert pools[0].shut and plan_compiler._EARLY == {}


def test_a_pool_that_cannot_be_made_leaves_nothing_and_raises_nothing(pools, monkeypatch):
    def no_semaphores(workers: int) -> RecordingPool:
        raise OSError("no usable /dev/shm")

    monkeypatch.setattr(plan_compiler, "_new_pool", no_semaphores)
    plan_compiler.start_workers_early(0)
    assert plan_compiler._EARLY == {}


def test_too_few_cores_start_none(pools, monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    plan_compiler.start_workers_early(0)
    assert pools == []


@pytest.mark.parametrize("cache_exists", [False, True])
def test_the_engine_starts_workers_early_only_without_a_timing_cache_and_ends_them_with_the_study(monkeypatch,
                                                                                                  cache_exists):
    import torch

    from builders.engine import cudnn_backend, cudnn_library

    events: list[str] = []
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 3)
    monkeypatch.setattr(cudnn_library, "import_cudnn", lambda: "cudnn")
    monkeypatch.setattr(cudnn_backend, "hash_triton_in_background", lambda: events.append("triton"))
    monkeypatch.setattr(cudnn_backend, "engine_timing_cache_exists", lambda cudnn: cache_exists)
    monkeypatch.setattr(cudnn_backend, "start_workers_early", lambda device: events.append(f"start {device}"))
    monkeypatch.setattr(cudnn_backend, "close_early_workers", lambda device: events.append(f"close {device}"))
    with pytest.raises(KeyError), cudnn_backend.CudnnBackend.prepared(None):  # type: ignore[arg-type]
        events.append("study")
        raise KeyError("a study that fails before its builds")
    assert events == ["triton", *([] if cache_exists else ["start 3"]), "study", "close 3"]


def test_the_engine_ends_early_workers_no_build_took_once_its_builds_are_done(pools, monkeypatch):
    """A study whose engine builds all failed before sending a graph: the workers end before the rows are timed."""
    from types import SimpleNamespace

    from builders.engine import cudnn_backend

    monkeypatch.setattr(cudnn_backend, "end_compile_workers", lambda: None)
    monkeypatch.setattr(cudnn_backend, "mark_unforeseen", lambda *args: None)
    plan_compiler.start_workers_early(2)
    backend = object.__new__(cudnn_backend.CudnnBackend)
    backend.context = SimpleNamespace(compiler=PlanCompiler(2), cache=SimpleNamespace(save=lambda: None))
    backend._premade, backend._foreseen_builds, backend._built = {}, set(), set()
    backend.builds_done()
    assert pools[0].shut and plan_compiler._EARLY == {}
