"""`region_artifacts.hash_triton_in_background`: Triton's key made on a thread of its own, with a short switch
interval while it runs and the caller's back after, once per process; nothing where Triton is absent."""

from __future__ import annotations

import sys
import threading
import types

import pytest

from builders.engine import region_artifacts


@pytest.fixture
def fake_triton(monkeypatch):
    """A `triton.runtime.cache` whose `triton_key` records the thread it ran on and the switch interval it saw."""
    seen: list[tuple[str, float]] = []
    release = threading.Event()

    def triton_key() -> str:
        release.wait(5)
        seen.append((threading.current_thread().name, sys.getswitchinterval()))
        return "key"

    cache = types.ModuleType("triton.runtime.cache")
    cache.triton_key = triton_key  # type: ignore[attr-defined]
    for name, module in {"triton": types.ModuleType("triton"), "triton.runtime": types.ModuleType("triton.runtime"),
                         "triton.runtime.cache": cache}.items():
        monkeypatch.setitem(sys.modules, name, module)
    monkeypatch.setattr(region_artifacts, "_triton_hashing", None)
    interval = sys.getswitchinterval()
    yield seen, release
    sys.setswitchinterval(interval)


def test_the_key_is_made_on_a_thread_with_a_short_switch_interval_then_the_callers_comes_back(fake_triton):
    seen, release = fake_triton
    before = sys.getswitchinterval()
    thread = region_artifacts.hash_triton_in_background()
    assert thread is not None and thread is not threading.current_thread()
    assert sys.getswitchinterval() == region_artifacts.HASHING_SWITCH_S  # while it hashes
    assert region_artifacts.hash_triton_in_background() is None  # once per process
    release.set()
    thread.join(5)
    assert seen == [(thread.name, region_artifacts.HASHING_SWITCH_S)]
    assert sys.getswitchinterval() == before


def test_a_key_that_fails_still_gives_the_switch_interval_back(fake_triton, monkeypatch):
    def fails() -> str:
        raise OSError("libtriton unreadable")

    monkeypatch.setattr(sys.modules["triton.runtime.cache"], "triton_key", fails)
    before = sys.getswitchinterval()
    thread = region_artifacts.hash_triton_in_background()
    assert thread is not None
    thread.join(5)
    assert sys.getswitchinterval() == before


def test_without_triton_nothing_starts(monkeypatch):
    monkeypatch.setattr(region_artifacts, "_triton_hashing", None)
    for name in ("triton", "triton.runtime", "triton.runtime.cache", "triton.compiler", "triton.compiler.compiler"):
        monkeypatch.setitem(sys.modules, name, None)  # an import of it raises ImportError
    before = sys.getswitchinterval()
    assert region_artifacts.hash_triton_in_background() is None
    assert sys.getswitchinterval() == before


def test_a_thread_that_cannot_start_gives_the_switch_interval_back(fake_triton, monkeypatch):
    class Unstartable(threading.Thread):
        def start(self) -> None:
            raise RuntimeError("can't start new thread")

    monkeypatch.setattr(region_artifacts.threading, "Thread", Unstartable)
    before = sys.getswitchinterval()
    assert region_artifacts.hash_triton_in_background() is None
    assert sys.getswitchinterval() == before
