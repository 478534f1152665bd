"""Inductor's compile workers are ended before rows are timed: by the backends that compile with Inductor, once
every variant is built, and never by loading Inductor where it did not load."""

from __future__ import annotations

import sys
import types

import pytest

from builders.pytorch import inductor_workers


def test_workers_are_shut_down_where_inductor_loaded(monkeypatch):
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
