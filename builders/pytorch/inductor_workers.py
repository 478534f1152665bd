"""Inductor's compile worker processes, ended before anything is timed."""

from __future__ import annotations

import sys

ASYNC_COMPILE = "torch._inductor.async_compile"  # the module that starts and ends Inductor's compile workers


def end_compile_workers() -> None:
    """Shuts Inductor's compile worker processes down (`torch._inductor.async_compile.shutdown_compile_workers`),
    as the plan compiler's workers are ended before timing (`PlanCompiler.close`), so that none is alive while
    anything is timed; a later compile starts them again. Nothing where Inductor never loaded (no worker can be
    alive, and loading it would cost seconds)."""
    if ASYNC_COMPILE not in sys.modules:
        return
    from torch._inductor.async_compile import shutdown_compile_workers

    shutdown_compile_workers()
