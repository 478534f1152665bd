"""Inductor's compile worker processes, ended before anything is timed.

A pool's sidecar process reads the request to shut down only once it has started (it imports torch), so a build
that started a pool and compiled little in it would wait for a start-up it hardly used (measured when loading a fused
region's code still started one: docs/engine.md, "The warm run"; loading starts none now,
`builders.engine.region_artifacts.load_region`). Hence two calls: `begin_ending_compile_workers` asks and returns,
`end_compile_workers` returns once every pool asked to end has ended. Whatever times with CUDA events calls the
second first: the engine's timer (`builders.engine.kernels.time_execution`: plans, quantize shapes, fused regions)
and the backends once every variant is built, before the study's rounds.
"""

from __future__ import annotations

import sys
import threading
from typing import Any

ASYNC_COMPILE = "torch._inductor.async_compile"  # the module that starts and ends Inductor's compile workers
_ending: list[threading.Thread] = []  # each pool's shutdown under way, joined by `end_compile_workers`


def _end(pool: Any) -> None:
    """`pool.shutdown()`; a pool whose shutdown fails has its sidecar killed, so that none stays alive."""
    try:
        pool.shutdown()
    except Exception:  # noqa: BLE001  (any failure to end: the process is killed instead)
        process = getattr(pool, "process", None)
        if process is not None and process.poll() is None:
            process.kill()
            process.wait()


def begin_ending_compile_workers() -> None:
    """Asks each of Inductor's compile worker pools to shut down, each in a thread of its own, and returns at once;
    Inductor forgets the pools (`after_fork`, and its pool-ready future), so a later compile starts a new one. Where
    this torch lacks the pool set or `after_fork`, its own `shutdown_compile_workers`, waited for. Nothing where
    Inductor never loaded (no worker can be alive, and loading it would cost seconds)."""
    async_compile = sys.modules.get(ASYNC_COMPILE)
    if async_compile is None:
        return
    pools, forget = getattr(async_compile, "_pool_set", None), getattr(async_compile, "after_fork", None)
    if pools is None or forget is None:
        async_compile.shutdown_compile_workers()
        return
    asked = list(pools)
    if not asked:
        return
    forget()
    compiler = getattr(async_compile, "AsyncCompile", None)
    if compiler is not None and hasattr(compiler, "_ready_future"):
        compiler._ready_future = None  # the asked pool's: a later compile must not wait on it
    for pool in asked:
        thread = threading.Thread(target=_end, args=(pool,), name="inductor-workers-ending", daemon=True)
        thread.start()
        _ending.append(thread)


def end_compile_workers() -> None:
    """Shuts Inductor's compile worker processes down and returns once every pool has ended, those asked by
    `begin_ending_compile_workers` before included, as the plan compiler's workers are ended before timing
    (`PlanCompiler.close`), so that none is alive while anything is timed; a later compile starts them again.
    Cheap where none is under way (a list checked)."""
    begin_ending_compile_workers()
    while _ending:
        _ending.pop().join()
