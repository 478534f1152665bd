"""The process a command runs in, shared by the CLI and a sweep's worker: quiet libraries, SIGTERM as Ctrl-C, the
garbage collector held while a study sets up, and the fast exit once the output is out.

Imports nothing heavy: every function is called before or after the command's own work.
"""

from __future__ import annotations

import contextlib
import gc
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import NoReturn

from sessions.documents.gc_pause import freeze_heap, thaw_heap


def quiet_libraries() -> None:
    """Before any library loads: no progress bars, no C++ log lines of torch.profiler, no library warnings."""
    os.environ.setdefault("KINETO_LOG_LEVEL", "5")  # torch.profiler's C++ errors on machines without a GPU
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # transformers' "Loading weights" bars
    show_library_warnings(False)


def show_library_warnings(verbose: bool) -> None:
    """stderr holds our own lines: library warnings (timm, torch, transformers, ModelOpt: FutureWarning,
    UserWarning, ...) and log records below ERROR (torch's, transformers' load reports) are dropped; with -v
    they are shown, each warning once per place."""
    import logging
    import warnings

    warnings.simplefilter("default" if verbose else "ignore")
    logging.disable(logging.NOTSET if verbose else logging.WARNING)


@dataclass
class _Hold:
    """The collector's hold (`collection_held`): whether it holds now, and whether the collector was enabled before
    it."""

    holding: bool = False
    enabled_before: bool = True


_HOLD = _Hold()


@contextlib.contextmanager
def collection_held(active: bool = True) -> Iterator[None]:
    """With `active`, Python's cyclic garbage collector is held off while the block loads its libraries and sets up
    its study, until the study ends the hold (`settle_heap`): as a heap grows from nothing to millions of objects,
    each full collection walks all of it (a warm main job on an H100: nine of them, 0.02 to 0.24 s each, 1.10 s of
    its 22.9 s, six before its builds, each of those freeing at most 20 objects: benchmarks/results/h100/
    regions-wait/gc.txt). After the block the collector is as it was and nothing stays frozen (`gc.unfreeze`): a
    caller in the same process (a test calling `main`) collects as before."""
    if not active or _HOLD.holding:  # a hold inside one is the outer one's
        yield
        return
    _HOLD.holding, _HOLD.enabled_before = True, gc.isenabled()
    try:
        gc.disable()
        yield
    finally:
        thaw_heap()
        if _HOLD.enabled_before:
            gc.enable()
        _HOLD.holding = False


def settle_heap() -> None:
    """Ends `collection_held`'s hold once a study is set up: what the heap holds now (the libraries, the model, the
    set-up's objects; almost no garbage: the set-up's collections freed 0 to 20 objects) is frozen out of every later
    collection (`gc.freeze`), and the collector runs again as before the hold, so the builds' collections walk
    only what came after (a session's save after it neither unfreezes nor freezes more: `sessions.documents.
    gc_pause`). Nothing where no hold is on (the TUI, a sweep's worker)."""
    if not _HOLD.holding:
        return
    _HOLD.holding = False
    freeze_heap()
    if _HOLD.enabled_before:
        gc.enable()


@contextlib.contextmanager
def interrupt_on_sigterm() -> Iterator[None]:
    """While a command runs, SIGTERM (a scheduler's cancel, `kill`) ends it like Ctrl-C: finished variants kept,
    exit 130. The previous handler comes back afterwards: `main` called in-process (tests) leaves none behind."""
    import signal
    import threading

    def handler(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def hold_signals() -> None:
    """Once the command is done (its session saved, its output written), SIGINT and SIGTERM wait: the process ends
    with the command's own code, never killed half-way through the interpreter's teardown (exit 143, no line)."""
    import signal

    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})


def flushed(code: int) -> int:
    """`code` once stdout and stderr are flushed; 120, as Python's own exit returns, where that failed."""
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except OSError:
            code = code or 120
    return code


def holds_cuda() -> bool:
    """Whether this process initialised CUDA (torch loaded and used a GPU)."""
    torch = sys.modules.get("torch")
    return torch is not None and bool(torch.cuda.is_initialized())


def run_exit_finalizers() -> None:
    """Runs the finalizers multiprocessing runs first at a normal exit (priority 0 and up, in its order: each named
    semaphore of a worker pool's queues unlinked and unregistered, each queue closed, a `multiprocessing.Pool`
    terminated, a manager shut down), which `os._exit` skips: without them the resource tracker, outliving this
    process, prints "There appear to be N leaked semaphore objects" after the output, five for a worker pool still
    alive at the exit (locks a library makes in the workers: `builders.engine.compiler._worker_init`).
    Nothing where multiprocessing never loaded; where its private hook is missing (another Python), the warning stays,
    nothing else changes. What the finalizers cost and what the warning counted after studies: docs/evidence.md
    ("Grounds of rules in the code")."""
    util = sys.modules.get("multiprocessing.util")
    finalizers = getattr(util, "_run_finalizers", None)
    if finalizers is not None:
        finalizers(0)


def exit_process(code: int) -> NoReturn:
    """End the process with `code`. Everything is saved by now, and CUDA's and CUPTI's teardown at exit takes seconds
    (what it took: docs/evidence.md ("Grounds of rules in the code")), so a process that holds CUDA ends without it,
    once its output is out, multiprocessing's exit finalizers run (`run_exit_finalizers`)."""
    if holds_cuda():
        try:
            run_exit_finalizers()
        finally:  # a second Ctrl-C among them still ends the process here
            os._exit(flushed(code))
    sys.exit(code)
