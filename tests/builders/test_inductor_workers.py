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


def test_the_real_inductor_pools_end(monkeypatch):
    pytest.importorskip(inductor_workers.ASYNC_COMPILE)
    inductor_workers.begin_ending_compile_workers()
    inductor_workers.end_compile_workers()
    assert not sys.modules[inductor_workers.ASYNC_COMPILE]._pool_set


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
    instance.context = types.SimpleNamespace(compiler=types.SimpleNamespace(close=lambda: ended.append("closed")))
    instance.builds_done()
    assert ended[-1] == "ended"
