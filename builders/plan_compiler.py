"""cuDNN plan compilation spread over worker processes, for a first build.

cuDNN's runtime-fusion plans (every FP8 convolution graph) compile their kernels when built: about half a second a
plan, on one thread (the frontend builds one plan at a time and holds the interpreter lock while it does), so a
first senet154 study spent most of its time there. Workers, spawned processes with a CUDA context and a cuDNN handle
each, build the plans the engine would time and return them serialized; the engine loads and times them in its own
process, on the GPU it measures on, so the choice is made as before and only the compilation moved.

A pool that cannot start or breaks leaves the work to the caller's process (`compile` answers nothing); what is
chosen does not depend on where a plan was compiled.
"""

from __future__ import annotations

import concurrent.futures
import multiprocessing
import multiprocessing.connection
import os
import signal
import threading
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from builders.engine_kernels import Compiled, ConvSignature, plans_compiled
from builders.fp8_kernels import one_line

MAX_WORKERS = 12  # each holds a CUDA context (about 0.5 GiB of GPU memory)
MIN_GRAPHS = 4  # fewer graphs than this compile in the engine's process: a worker takes seconds to start
ANSWER_TIMEOUT_S = 600  # a graph's plans not back by then: the pool is taken as broken, the engine compiles itself

_WORKER: dict[str, Any] = {}


def _worker_init() -> None:
    """In a worker, first: Ctrl-C is the engine's process's to handle (the terminal sends it to every process of
    its group), and the worker ends when that process does, however it ends (an exit that skips Python's exit
    hooks leaves no worker holding a CUDA context)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    parent = multiprocessing.parent_process()
    if parent is not None:
        sentinel = parent.sentinel
        threading.Thread(target=lambda: (multiprocessing.connection.wait([sentinel]), os._exit(0)), daemon=True).start()


def _new_pool(workers: int) -> concurrent.futures.ProcessPoolExecutor:
    return concurrent.futures.ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"),
                                                  initializer=_worker_init)


def _worker_cudnn(device: int) -> tuple[Any, Any]:
    """In a worker: cuDNN and a handle on `device`, made at the worker's first job."""
    if "handle" not in _WORKER:
        import torch

        from builders.fp8_kernels import import_cudnn

        torch.cuda.set_device(device)
        cudnn = import_cudnn()
        _WORKER.update(cudnn=cudnn, handle=cudnn.create_handle())
    return _WORKER["cudnn"], _WORKER["handle"]


def _compile(device: int, sig: ConvSignature, limit: int) -> Compiled | str:
    """In a worker: `sig`'s plans compiled and serialized (plans_compiled), or why not (cuDNN has no engine for the
    graph, or the worker has no cuDNN): the engine's process then builds that graph itself and says why."""
    try:
        return plans_compiled(sig, *_worker_cudnn(device), limit)
    except Exception as exc:  # noqa: BLE001  (any reason: the work falls back to the engine's process)
        return one_line(exc, 300)


def worker_count(graphs: int) -> int:
    """Workers for `graphs` graphs: one a graph, at most MAX_WORKERS and one fewer than the cores this process may
    use; 0 (compile in process) below MIN_GRAPHS graphs or two cores."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    workers = min(MAX_WORKERS, cores - 1, graphs)
    return workers if graphs >= MIN_GRAPHS and workers >= 2 else 0


class PlanCompiler:
    """Worker processes for one engine backend, started at its first large compile and kept until `close` (which the
    backend calls when the study's builds are done: never from a finalizer, where stopping a pool can deadlock)."""

    def __init__(self, device: int) -> None:
        self.device = device
        self._pool: concurrent.futures.ProcessPoolExecutor | None = None
        self._broken = False

    def compile(self, sigs: list[ConvSignature], limit: int) -> dict[ConvSignature, Compiled]:
        """The plans of `sigs` compiled by the workers, for the graphs cuDNN could build; empty where the work is
        too small to spread or the pool cannot run (the caller then compiles in its process)."""
        workers = worker_count(len(sigs))
        if self._broken or not sigs or (workers == 0 and self._pool is None):
            return {}
        try:
            if self._pool is None:
                self._pool = _new_pool(workers)
            jobs = {sig: self._pool.submit(_compile, self.device, sig, limit) for sig in sigs}
            answers = {sig: job.result(timeout=ANSWER_TIMEOUT_S) for sig, job in jobs.items()}
        except (BrokenProcessPool, OSError, RuntimeError):  # OSError includes TimeoutError
            self._broken = True
            if self._pool is not None:
                self._pool.shutdown(wait=False, cancel_futures=True)
                self._pool = None
            return {}
        return {sig: answer for sig, answer in answers.items() if not isinstance(answer, str)}

    def close(self) -> None:
        """Stops the workers (idle once `compile` returned) and waits for them; a later `compile` starts new ones."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
