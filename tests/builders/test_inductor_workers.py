"""Inductor's compile workers are ended before rows are timed: by the backends that compile with Inductor, once
every variant is built, and never by loading Inductor where it did not load."""

from __future__ import annotations

import sys
import threading
import types

import pytest

from builders.pytorch import inductor_workers


class BlockingPool:
    """A pool whose shutdown returns only once `released` is set, as a sidecar still importing torch."""

    def __init__(self) -> None:
        self.released, self.ended = threading.Event(), threading.Event()

    def shutdown(self) -> None:
        self.released.wait(10)
        self.ended.set()


def fake_async_compile(monkeypatch, pools: set) -> types.ModuleType:
    fake = types.ModuleType(inductor_workers.ASYNC_COMPILE)
    fake._pool_set = pools  # type: ignore[attr-defined]
    fake.after_fork = pools.clear  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, inductor_workers.ASYNC_COMPILE, fake)
    return fake


def test_asking_returns_before_a_pool_has_ended_and_inductor_forgets_the_pool(monkeypatch):
    pool = BlockingPool()
    pools = {pool}
    fake_async_compile(monkeypatch, pools)
    inductor_workers.begin_ending_compile_workers()
    assert not pool.ended.is_set() and not pools  # asked, not ended; a later compile starts a new pool
    pool.released.set()
    inductor_workers.end_compile_workers()
    assert pool.ended.is_set()


def test_the_pool_ready_future_is_forgotten_with_the_pool(monkeypatch):
    pool = BlockingPool()
    pool.released.set()
    fake = fake_async_compile(monkeypatch, {pool})
    fake.AsyncCompile = types.SimpleNamespace(_ready_future="the asked pool's")  # type: ignore[attr-defined]
    inductor_workers.end_compile_workers()  # after_fork here clears the set alone, as an older torch's may
    assert fake.AsyncCompile._ready_future is None  # type: ignore[attr-defined]


def test_ending_waits_for_every_pool_asked_before(monkeypatch):
    first, second = BlockingPool(), BlockingPool()
    pools = {first}
    fake_async_compile(monkeypatch, pools)
    inductor_workers.begin_ending_compile_workers()
    pools.add(second)  # a later build's compile started another pool
    threading.Timer(0.2, first.released.set).start()
    second.released.set()
    inductor_workers.end_compile_workers()
    assert first.ended.is_set() and second.ended.is_set()


def test_a_real_inductor_pool_ends_and_is_forgotten():
    async_compile = pytest.importorskip(inductor_workers.ASYNC_COMPILE)
    from torch._inductor import config

    with config.patch(compile_threads=2):
        pool = async_compile.AsyncCompile.process_pool()  # its sidecar starts (it imports torch)
    assert pool in async_compile._pool_set and pool.process.poll() is None
    inductor_workers.begin_ending_compile_workers()
    assert not async_compile._pool_set and async_compile.AsyncCompile._ready_future is None
    inductor_workers.end_compile_workers()
    assert pool.process.poll() is not None  # the sidecar has exited


def test_a_pool_whose_shutdown_fails_is_killed(monkeypatch):
    class Process:
        def __init__(self) -> None:
            self.killed = False

        def poll(self) -> int | None:
            return 0 if self.killed else None

        def kill(self) -> None:
            self.killed = True

        def wait(self) -> int:
            return 0

    class Failing:
        process = Process()

        def shutdown(self) -> None:
            raise OSError("broken pipe")

    pool = Failing()
    fake_async_compile(monkeypatch, {pool})
    inductor_workers.end_compile_workers()
    assert pool.process.killed


def test_the_engines_timer_waits_for_the_workers_before_it_times(monkeypatch):
    kernels = pytest.importorskip("builders.engine.kernels")
    calls: list[str] = []

    class Event:
        def __init__(self, enable_timing: bool) -> None:
            pass

        def record(self) -> None:
            calls.append("event")

        def synchronize(self) -> None:
            pass

        def elapsed_time(self, end: object) -> float:
            return 1.0

    monkeypatch.setattr(kernels, "end_compile_workers", lambda: calls.append("ended"))
    monkeypatch.setattr(kernels.torch.cuda, "Event", Event)
    monkeypatch.setattr(kernels.torch.cuda, "_sleep", lambda cycles: None)
    kernels.time_execution(lambda: calls.append("run"))
    assert calls[0] == "ended" and "event" in calls


def test_a_torch_without_the_pool_set_shuts_down_with_its_own_call(monkeypatch):
    calls: list[str] = []
    fake = types.ModuleType(inductor_workers.ASYNC_COMPILE)
    fake.shutdown_compile_workers = lambda: calls.append("shutdown")  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, inductor_workers.ASYNC_COMPILE, fake)
    inductor_workers.end_compile_workers()
    assert calls == ["shutdown"]


def test_nothing_is_loaded_where_inductor_never_loaded(monkeypatch):
    monkeypatch.delitem(sys.modules, inductor_workers.ASYNC_COMPILE, raising=False)
    inductor_workers.end_compile_workers()
    assert inductor_workers.ASYNC_COMPILE not in sys.modules


@pytest.mark.parametrize("module, backend", [("builders.pytorch.compile_backend", "CompileBackend"),
                                             ("builders.engine.cudnn_backend", "CudnnBackend")])
def test_backends_that_compile_with_inductor_end_its_workers_when_their_builds_are_done(monkeypatch, module,
                                                                                      backend):
    imported = pytest.importorskip(module)
    ended: list[str] = []
    monkeypatch.setattr(imported, "end_compile_workers", lambda: ended.append("ended"))
    instance = object.__new__(getattr(imported, backend))  # no model, no GPU: only the hook runs
    compiler = types.SimpleNamespace(close=lambda: (ended.append("closed"), [])[1], device=0)  # no graph unasked
    instance.context = types.SimpleNamespace(compiler=compiler, cache=types.SimpleNamespace(save=lambda: None))
    instance._foreseen_builds, instance._built, instance._premade = set(), set(), {}
    instance.builds_done()
    assert ended[-1] == "ended"
