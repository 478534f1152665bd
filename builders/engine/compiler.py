"""cuDNN plan compilation spread over worker processes, for a first build (and fused regions' Inductor compiles,
`PlanCompiler.submit_regions`, once the plans are chosen).

cuDNN's runtime-fusion plans (every FP8 convolution graph) compile their kernels when built: about half a second a
plan, on one thread (the frontend builds one plan at a time and holds the interpreter lock while it does), so a
first senet154 study spent most of its time there. Workers, spawned processes with a CUDA context and a cuDNN handle
each, build the plans the engine would time and return them serialized; the engine loads and times them in its own
process, on the GPU it measures on, so the choice is made as before and only the compilation moved.

The engine's process takes the answers back one graph at a time (`CompileJobs.take`), loading and timing each while the
workers compile the next; until the first answer is back (workers take seconds to start) it builds the graphs itself. A
build sends each round's graphs ahead (`PlanCompiler.send_ahead`, to a running pool), so the workers compile a step's
graphs while the build times the step's before; a backend's first build sends the first round of every build of the
study (`PlanCompiler.foresee`), fed to the pool at most one per worker, so that a later build's graphs compile while
the builds before it run and a build's own jobs wait behind none of them in the queue. A pool that cannot start or
breaks leaves its work to the caller's process (`take` answers None); a pool that broke is replaced at the next
submit, `RESTARTS` times a study (a worker that dies once, on one job, would otherwise leave every later plan of the
study to the engine's process; what that cost a study: docs/evidence.md ("Grounds of rules in the code")); what is
chosen does not depend on where a plan was compiled.
"""

from __future__ import annotations

import concurrent.futures
import multiprocessing
import multiprocessing.connection
import os
import signal
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, fields
from multiprocessing.reduction import ForkingPickler
from typing import Any, Literal

from builders.engine.kernels import Compiled, ConvSignature, GraphSource, plans_compiled
from sessions.documents.errors import joined_message

MAX_WORKERS = 15  # each holds a CUDA context (about 0.5 GiB of GPU memory); on a 16-core machine, all but one core
# (benchmarks/results/h100/compile-timeline: a first main job 45.2 s with 15 against 47.1 s with 12, one H100 host)
WORKER_NICENESS = 10  # how much nicer than the study's process its workers run (`_YieldingProcess`)
MIN_GRAPHS = 4  # fewer graphs than this compile in the engine's process: a worker takes seconds to start
ANSWER_TIMEOUT_S = 600  # a graph's plans not back by then: the pool is taken as broken, the engine compiles itself
RESTARTS = 1  # pools started again after one broke; past that the study's later plans compile in its own process

_WORKER: dict[str, Any] = {}


@dataclass(frozen=True)
class WorkerAnswer:
    """A graph's answer from a worker: its plans compiled (`plans_compiled`) or why not, and the worker's seconds on
    it."""

    answer: Compiled | str
    seconds: float


@dataclass
class CompileLedger:
    """How this backend's builds made their cuDNN graphs and what that cost, summed over the study: from a plan the
    timing cache held, from plans a worker compiled (loaded and timed in the engine's process), compiled and timed in
    that process, or refused by cuDNN; the workers' side; and the graphs sent ahead that no build asked for. A build's
    note is what it added (`since`, `words`).
    Fused regions' compiles are not in it (the fused tactics' note counts them)."""

    cached: int = 0
    cached_s: float = 0.0
    answered: int = 0
    answered_s: float = 0.0  # loading and timing the workers' plans here
    built: int = 0
    built_s: float = 0.0
    refused: int = 0
    refused_s: float = 0.0
    worker_plans: int = 0  # plans compiled and serialized in the answers taken
    worker_s: float = 0.0  # the workers' seconds on every answer taken (refusals too, a worker's start included)
    waited_s: float = 0.0  # the engine's process waiting for answers not back yet
    # graphs sent ahead that no build asked for (`withdraw_ahead`, also by `close`: the foreseen ones no build took
    # are counted there, after every build's note)
    ahead_unasked: int = 0
    ahead_withdrawn: int = 0  # of those, withdrawn before a worker took them (the others were compiled, unused)

    def record(self, source: GraphSource | Literal["refused"], seconds: float) -> None:
        """A graph made (`build_graph`'s source) or refused in `seconds`."""
        setattr(self, source, getattr(self, source) + 1)
        setattr(self, f"{source}_s", getattr(self, f"{source}_s") + seconds)

    def since(self, before: CompileLedger) -> CompileLedger:
        """What was added after `before` (a `dataclasses.replace` copy taken earlier)."""
        return CompileLedger(**{f.name: getattr(self, f.name) - getattr(before, f.name) for f in fields(self)})

    def words(self) -> str | None:
        """One line for a build's notes, its empty parts left out; None where it made no graph."""
        parts = [f"{count} {what} ({seconds:.1f} s)" for count, what, seconds in (
            (self.answered, "from plans the compile workers built, loaded and timed here", self.answered_s),
            (self.built, "compiled and timed here", self.built_s),
            (self.refused, "refused by cuDNN", self.refused_s),
            (self.cached, "from the timing cache", self.cached_s)) if count]
        if not parts:
            return None
        workers = (f"; the compile workers: {self.worker_plans} plans compiled, {self.worker_s:.1f} s of their time "
                   f"(their start included), {self.waited_s:.1f} s waited for" if self.worker_s or self.waited_s
                   else "")
        unasked = (f"; {self.ahead_unasked} graphs sent ahead and not asked for ({self.ahead_withdrawn} withdrawn "
                   f"before a worker took them)" if self.ahead_unasked else "")
        return f"cuDNN graphs made: {', '.join(parts)}{workers}{unasked}"


def _worker_init() -> None:
    """In a worker, first: Ctrl-C is the engine's process's to handle (the terminal sends it to every process of
    its group), and the worker ends when that process does, however it ends (an exit that skips Python's exit
    hooks leaves no worker holding a CUDA context).

    Locks a library makes in the worker with multiprocessing's default context (tqdm's, made when Inductor traces
    a region) are unnamed: the default is fork here, not the pool's spawn. A spawn-context lock is a named semaphore
    the engine's process's resource tracker is told of, which a worker ended by `close` (SIGTERM) or by that
    process's exit never unlinks: the tracker then printed "There appear to be N leaked semaphore objects" after a
    study's output, one per worker. The worker starts no process of its own (Inductor compiles in it on one thread)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if "fork" in multiprocessing.get_all_start_methods():  # every POSIX system; Windows has spawn alone
        multiprocessing.set_start_method("fork", force=True)
    parent = multiprocessing.parent_process()
    if parent is not None:
        sentinel = parent.sentinel
        threading.Thread(target=lambda: (multiprocessing.connection.wait([sentinel]), os._exit(0)), daemon=True).start()


class _YieldingProcess(multiprocessing.context.SpawnProcess):
    """A spawned worker made `WORKER_NICENESS` nicer than the study's process as it starts, so that where both want
    the CPU the study's process has it: 15 workers starting beside a first run's model load (each importing torch and
    making a CUDA context) took it from 2.3 s to 4.0 s (benchmarks/results/h100/early-workers/); on this project's
    2-core machine a CPU-bound task of 0.37 s alone took 1.00 s beside 4 starting workers at its priority, 0.39 s
    beside 4 niced ones (benchmarks/results/cpu/worker-niceness.txt). Where the system has no priorities, or refuses,
    the worker keeps the study's."""

    def start(self) -> None:
        super().start()
        try:
            os.setpriority(os.PRIO_PROCESS, self.pid, os.getpriority(os.PRIO_PROCESS, 0) + WORKER_NICENESS)
        except (AttributeError, OSError):  # no priorities here (Windows), or the process is gone already
            pass


class _YieldingContext(multiprocessing.context.SpawnContext):
    """The spawn context, its processes `_YieldingProcess`es."""

    Process = _YieldingProcess


def _new_pool(workers: int) -> concurrent.futures.ProcessPoolExecutor:
    return concurrent.futures.ProcessPoolExecutor(workers, mp_context=_YieldingContext(), initializer=_worker_init)


def _worker_cudnn(device: int) -> tuple[Any, Any]:
    """In a worker: cuDNN and a handle on `device`, made at the worker's first job."""
    if "handle" not in _WORKER:
        import torch

        from builders.engine.cudnn_library import import_cudnn

        torch.cuda.set_device(device)
        cudnn = import_cudnn()
        _WORKER.update(cudnn=cudnn, handle=cudnn.create_handle())
    return _WORKER["cudnn"], _WORKER["handle"]


def _ready(device: int) -> None:
    """In a worker started early (`start_workers_early`): its CUDA context and cuDNN handle made before any job."""
    _worker_cudnn(device)


def _compile(device: int, sig: ConvSignature, limit: int) -> WorkerAnswer:
    """In a worker: `sig`'s plans compiled and serialized (plans_compiled), or why not (cuDNN has no engine for the
    graph, or the worker has no cuDNN: the engine's process then builds that graph itself and says why), with the
    seconds it took."""
    started = time.perf_counter()
    answer: Compiled | str
    try:
        answer = plans_compiled(sig, *_worker_cudnn(device), limit)
    except Exception as exc:  # noqa: BLE001  (any reason: the work falls back to the engine's process)
        answer = joined_message(exc, 300)
    return WorkerAnswer(answer, time.perf_counter() - started)


def _compile_region(device: int, pickled: bytes, specs: list[Any]) -> bytes | str:
    """In a worker: a fused region's function (`pickled`, as `submit_regions` sends it) compiled by Inductor on
    scratch tensors of `specs` (`region_artifacts.compile_region`, its compile threads the worker's own: the workers
    are the parallelism), as the compiled code's bytes; or why not (the engine's process then compiles the region
    itself). The function is unpickled here, not by the pool: a function that does not rebuild (unpickling a
    `GraphModule` traces its code again) is this region's answer, where a pool that unpickles a job's arguments
    loses the worker, and the pool with it, to such a job."""
    try:
        import torch
        from torch._inductor import config

        from builders.engine.region_artifacts import compile_region

        scratch = [spec.scratch() for spec in specs]  # on the devices the specs name
        if any(tensor.is_cuda for tensor in scratch):
            torch.cuda.set_device(device)
        config.compile_threads = 1
        _, blob = compile_region(ForkingPickler.loads(pickled), scratch)
        return blob if blob is not None else "Inductor could not serialize the compiled region"
    except Exception as exc:  # noqa: BLE001  (any reason: the region compiles in the engine's process)
        return joined_message(exc, 300)


def _pickled(module: Any) -> bytes | None:
    """A region's function as a worker's job carries it, in the pool's own transport (multiprocessing's
    `ForkingPickler`, in memory between this process and its workers: nothing is written or read from a file); None
    where it does not pickle (the engine's process then compiles that region)."""
    try:
        return bytes(ForkingPickler.dumps(module))
    except Exception:  # noqa: BLE001  (PicklingError, or what a module's own __reduce__ raises)
        return None


def worker_count(graphs: int) -> int:
    """Workers for `graphs` graphs: one a graph, at most MAX_WORKERS and one fewer than the cores this process may
    use; 0 (compile in process) below MIN_GRAPHS graphs or two cores."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    workers = min(MAX_WORKERS, cores - 1, graphs)
    return workers if graphs >= MIN_GRAPHS and workers >= 2 else 0


# device -> a pool started before any build (`start_workers_early`), its workers and their ready-up jobs, until a
# compiler takes it
_EARLY: dict[int, tuple[concurrent.futures.ProcessPoolExecutor, int, list[concurrent.futures.Future[None]]]] = {}


def start_workers_early(device: int) -> None:
    """The most workers this machine gives a study (`worker_count`), started now for `device`, each making its CUDA
    context and cuDNN handle at once (`_ready`), for the first `PlanCompiler` of `device` to take (`_pool_for`). A
    worker takes seconds to start (on an H100 a first main job's pool started at 11.1 s and its first job ran at
    13.6 s: benchmarks/results/h100/regions-wait/new.report.events.jsonl), which then pass while the study loads its
    model. For a study whose first build will compile its graphs (the caller knows: an empty timing cache).
    Nothing where workers were started early already or the machine has too few cores; `close_early_workers` ends
    them where no compiler took them."""
    workers = worker_count(MAX_WORKERS)
    if device in _EARLY or workers == 0:
        return
    pool: concurrent.futures.ProcessPoolExecutor | None = None
    try:
        pool = _new_pool(workers)
        readies = [pool.submit(_ready, device) for _ in range(workers)]
    except (BrokenProcessPool, OSError, RuntimeError, NotImplementedError):  # the first build starts its own
        if pool is not None:
            _end(pool)
        return
    _EARLY[device] = (pool, workers, readies)


def close_early_workers(device: int) -> None:
    """The workers `start_workers_early` started for `device` ended, where no compiler took them; nothing otherwise."""
    early = _EARLY.pop(device, None)
    if early is not None:
        _end(early[0])


def _end(pool: concurrent.futures.ProcessPoolExecutor) -> None:
    """`pool`'s workers ended, and `pool` shut down once they are gone: jobs not started are dropped, a running one
    ends with its worker."""
    # CPython has no public way to end running workers before 3.14 (`terminate_workers`)
    for process in list((getattr(pool, "_processes", None) or {}).values()):
        process.terminate()
    pool.shutdown(wait=True, cancel_futures=True)


def _ended(pool: concurrent.futures.ProcessPoolExecutor, feeder: concurrent.futures.ThreadPoolExecutor | None) -> None:
    """`pool` ended (`_end`), then the threads of its `feeder` (`PlanCompiler.foresee`): those waiting for a job in
    `pool` end with it, those held were let go (`PlanCompiler.begin_close`)."""
    try:
        _end(pool)
    finally:
        if feeder is not None:
            feeder.shutdown(wait=True, cancel_futures=True)


def _warms(jobs: Iterable[concurrent.futures.Future[Any]], warm: threading.Event) -> None:
    """`warm` set by the first of `jobs` a worker answers (a withdrawn job answers nothing)."""
    def answered(job: concurrent.futures.Future[Any]) -> None:
        if not job.cancelled():
            warm.set()

    for job in jobs:
        job.add_done_callback(answered)


class CompileJobs:
    """The graphs sent to the workers, taken back one at a time in the engine's process (`take`), so that it loads
    and times each answer while the workers compile the next ones, and builds a graph itself while the workers are
    still starting (a cold pool: no answer back yet), instead of waiting seconds for them."""

    def __init__(self, jobs: dict[ConvSignature, concurrent.futures.Future[WorkerAnswer]], compiler: PlanCompiler,
                 warm: threading.Event, pool: int) -> None:
        """`warm`: set once a worker of the pool that runs `jobs` has answered (one event per pool); `pool`: that
        pool's number (`PlanCompiler.pools`)."""
        self._jobs, self._compiler, self._warm, self._pool = jobs, compiler, warm, pool
        _warms(jobs.values(), warm)

    def take(self, sig: ConvSignature) -> Compiled | None:
        """`sig`'s plans as a worker compiled them; None where this process is to build the graph: no worker of the
        pool has answered yet (the job is withdrawn where no worker has taken it: a pool hands out up to one job per
        worker and one more at once, and a taken job finishes in its worker, its answer unused), `sig` was not sent,
        the worker could not build it (cuDNN's reason is found again here), the job was withdrawn by `close`, or the
        pool broke, did not answer in time or sent back what does not read."""
        job = self._jobs.pop(sig, None)
        if job is None or self._compiler.has_broken(self._pool):
            return None
        if not job.done() and not self._warm.is_set():
            job.cancel()
            return None
        waiting_from = time.perf_counter()
        try:
            answered = job.result(timeout=ANSWER_TIMEOUT_S)
        except concurrent.futures.CancelledError:
            return None
        except Exception:  # noqa: BLE001  (BrokenProcessPool, TimeoutError, an answer that does not unpickle)
            self._compiler.break_pool(self._pool)
            return None
        finally:
            self._compiler.ledger.waited_s += time.perf_counter() - waiting_from
        ledger = self._compiler.ledger
        ledger.worker_s += answered.seconds
        if isinstance(answered.answer, str):
            return None
        ledger.worker_plans += sum(isinstance(plan, bytes) for plan in answered.answer[1].values())
        return answered.answer


class PlanCompiler:
    """Worker processes for one engine backend, started at its first large compile (or foresight, `foresee`) and kept
    until `close` (which the backend calls when the study's builds are done: never from a finalizer, where stopping a
    pool can deadlock)."""

    def __init__(self, device: int) -> None:
        self.device = device
        self._pool: concurrent.futures.ProcessPoolExecutor | None = None
        self._workers = 0  # the current pool's
        self.pools = 0  # pools started; the current one's number
        self._broken: set[int] = set()  # the numbers of the pools that broke
        self._warm = threading.Event()  # the current pool's: a worker has answered (for every later submit too)
        self._ahead: dict[ConvSignature, concurrent.futures.Future[WorkerAnswer]] = {}  # the current pool's
        self._foreseen: set[ConvSignature] = set()  # those of `_ahead` no build has sent yet (`foresee`)
        self._feeder: concurrent.futures.ThreadPoolExecutor | None = None  # the current pool's foresight (`_fed`)
        self._feeding = threading.Condition()  # guards `_held` and `_in_pool`
        self._held = False  # whether the feeder sends no foreseen job to the pool (`hold_foreseen`)
        self._in_pool: set[concurrent.futures.Future[WorkerAnswer]] = set()  # foreseen jobs the feeder has in the pool
        self.ledger = CompileLedger()
        self._unasked: list[ConvSignature] = []  # withdrawn by `begin_close`, returned by the next `close`
        self._ending: list[concurrent.futures.Future[None]] = []  # each pool `begin_close` is ending (`_ended`)

    @property
    def broken(self) -> bool:
        """No pool is started again: more than `RESTARTS` broke (later compiles run in the caller's process)."""
        return len(self._broken) > RESTARTS

    @property
    def running(self) -> bool:
        """A pool is started and not closed: `send_ahead` sends to it (what a build sends ahead starts none)."""
        return self._pool is not None

    def has_broken(self, pool: int) -> bool:
        """Whether pool number `pool` broke (its answers are not used), or none may run any more."""
        return pool in self._broken or self.broken

    def submit(self, sigs: list[ConvSignature], limit: int) -> CompileJobs:
        """`sigs` to compile, each taken back by `CompileJobs.take`: one sent ahead (`send_ahead`) and still waiting
        is that job (one foreseen and not yet in the pool is sent now, `_claim`), the others are sent now; none sent
        where the work is too small to spread or the pool cannot run (the caller then compiles in its process).
        Every job of the answer is the current pool's: where sending found the pool broken and replaced it, the jobs
        sent ahead went with it (`close`) and are the caller's to build."""
        self._claim(sigs)
        jobs = self._compiles(sigs, limit, start=True)
        ahead = {sig: self._ahead.pop(sig) for sig in sigs if sig in self._ahead}  # after: a pool replaced took them
        return CompileJobs({**ahead, **(jobs or {})}, self, self._warm, self.pools)

    def send_ahead(self, sigs: list[ConvSignature], limit: int) -> None:
        """`sigs` sent to the workers now, in this order, for a later `submit` that asks for them: the workers
        compile the graphs a build will ask for next while it loads and times the ones before (one batch instead of
        a pause at each step that asks). Only to a running pool: a build's work that may never be asked for starts
        no workers (a `submit` or `foresee` starts them), so a build whose graphs the timing cache holds starts none.
        A signature sent ahead and still waiting for its `submit` is not sent again; one foreseen becomes the
        caller's (`_claim`). Jobs never asked for are withdrawn by `withdraw_ahead` or `close`."""
        self._claim(sigs)
        jobs = self._compiles(sigs, limit, start=False)
        if jobs:
            _warms(jobs.values(), self._warm)
            self._ahead.update(jobs)

    def foresee(self, sigs: list[ConvSignature], limit: int) -> None:
        """`sigs`, graphs the study's later builds are foreseen to ask for, compiled by the workers while the builds
        before them run, a pool started for them where they are enough to spread (`worker_count`). A feeder keeps at
        most one foreseen job per worker in the pool, in order (jobs its threads send side by side may swap: `_fed`),
        so a job a build sends waits for at most one foreseen job a worker is compiling, and none is queued ahead of
        it. No build's `withdraw_ahead` withdraws a foreseen job until a build sends it ahead or asks for it
        (`_claim`); `close` withdraws those left."""
        fresh = self._not_ahead(sigs)
        pool = self._pool_for(len(fresh))
        if pool is None:
            return
        if self._feeder is None:
            self._feeder = concurrent.futures.ThreadPoolExecutor(self._workers, thread_name_prefix="foreseen-plans")
        feeder = self._feeder
        jobs = {sig: feeder.submit(self._fed, pool, sig, limit) for sig in fresh}
        _warms(jobs.values(), self._warm)
        self._ahead.update(jobs)
        self._foreseen.update(jobs)

    def _fed(self, pool: concurrent.futures.ProcessPoolExecutor, sig: ConvSignature, limit: int) -> WorkerAnswer:
        """In a feeder thread: `sig`'s job sent to `pool` once the feeder is not held (`hold_foreseen`), its answer
        waited for there (the feeder's threads, one per worker, bound the foreseen jobs in the pool)."""
        with self._feeding:
            self._feeding.wait_for(lambda: not self._held or self._pool is not pool)
            if self._pool is not pool:
                raise RuntimeError("the compile workers were closed before this foreseen graph was sent")
            job = pool.submit(_compile, self.device, sig, limit)
            self._in_pool.add(job)
        try:
            return job.result()
        finally:
            with self._feeding:
                self._in_pool.discard(job)

    def pause_foreseen(self) -> None:
        """No foreseen job sent to the pool until `resume_foreseen` (those in it go on): a build whose regions'
        compiles have begun to answer pauses them, so that the ones running end while it loads the regions and its
        `hold_foreseen` then finds none to wait for."""
        with self._feeding:
            self._held = True

    def hold_foreseen(self) -> None:
        """No foreseen job sent to the pool until `resume_foreseen`, and those in it waited for (at most
        ANSWER_TIMEOUT_S in all; past it the workers are taken as hung and their pool broken), so that no worker
        compiles while a build times what it cannot time beside them (its fused regions)."""
        self.pause_foreseen()
        with self._feeding:
            running = list(self._in_pool)
        if running and concurrent.futures.wait(running, timeout=ANSWER_TIMEOUT_S).not_done:
            self.break_pool()

    def resume_foreseen(self) -> None:
        """The feeder sends foreseen jobs again (`hold_foreseen`)."""
        with self._feeding:
            self._held = False
            self._feeding.notify_all()

    def _claim(self, sigs: Iterable[ConvSignature]) -> None:
        """Those of `sigs` foreseen (`foresee`) made the calling build's: its `withdraw_ahead` withdraws them, and one
        not yet in the pool leaves the feeder (withdrawn, uncounted), for the caller to send it with its own jobs."""
        for sig in sigs:
            if sig in self._foreseen:
                self._foreseen.discard(sig)
                if self._ahead[sig].cancel():
                    del self._ahead[sig]

    def submit_regions(self, jobs: dict[str, tuple[Any, list[Any]]]) -> dict[str, concurrent.futures.Future[Any]]:
        """Fused regions sent to the workers to compile (`jobs`: signature -> the region's function and the
        `TensorSpec`s of its arguments), each answer the compiled code's bytes or why there is none; {} where the work
        is too small to spread or the pool cannot run, and no answer for a function that does not pickle (the caller
        compiles those in its process)."""
        sendable = {signature: (blob, specs) for signature, (module, specs) in jobs.items()
                    if (blob := _pickled(module)) is not None}
        sent = self._sent(len(sendable), lambda pool: {
            signature: pool.submit(_compile_region, self.device, blob, specs)
            for signature, (blob, specs) in sendable.items()})
        return sent or {}

    def _compiles(self, sigs: list[ConvSignature], limit: int,
                  start: bool) -> dict[ConvSignature, concurrent.futures.Future[WorkerAnswer]] | None:
        """A compile job for each of `sigs` not sent ahead and waiting (`_sent`; `start`: whether a pool may be
        started for them)."""
        fresh = self._not_ahead(sigs)
        return self._sent(len(fresh), lambda pool: {sig: pool.submit(_compile, self.device, sig, limit)
                                                    for sig in fresh}, start)

    def _not_ahead(self, sigs: list[ConvSignature]) -> list[ConvSignature]:
        """`sigs` without repeats and without those already sent ahead or foreseen, in their order."""
        return [sig for sig in dict.fromkeys(sigs) if sig not in self._ahead]

    def withdraw_ahead(self) -> list[ConvSignature]:
        """The jobs sent ahead and not asked for withdrawn, where no worker has taken them yet (one that has finishes,
        its answer unused), each counted in the ledger (`ahead_unasked`, `ahead_withdrawn`): a build whose graphs are
        all made leaves the workers free for what comes next (its fused regions, the study's timing), not queued
        behind graphs it did not need. Jobs foreseen for later builds (`foresee`) and no build's yet stay. Returns
        the graphs withdrawn."""
        return self._withdraw([sig for sig in self._ahead if sig not in self._foreseen])

    def _withdraw(self, sigs: list[ConvSignature]) -> list[ConvSignature]:
        """The jobs of `sigs` sent ahead withdrawn where no worker has taken them, each counted in the ledger;
        `sigs`."""
        for sig in sigs:
            self._foreseen.discard(sig)
            self.ledger.ahead_unasked += 1
            self.ledger.ahead_withdrawn += int(self._ahead.pop(sig).cancel())
        return sigs

    def _sent(self, count: int, send: Callable[[concurrent.futures.ProcessPoolExecutor], dict[Any, Any]],
              start: bool = True) -> dict[Any, Any] | None:
        """`send(pool)`'s jobs, `count` of them, on the pool (`_pool_for`, which starts one only with `start`); a pool
        found broken while sending is replaced and sent to again, as `RESTARTS` allows; None where no pool takes
        them."""
        while (pool := self._pool_for(count, start)) is not None:
            try:
                return send(pool)
            except (BrokenProcessPool, OSError, RuntimeError):
                self.break_pool()
        return None

    def _pool_for(self, jobs: int, start: bool = True) -> concurrent.futures.ProcessPoolExecutor | None:
        """The pool to send `jobs` jobs to, started (with `start`) where there is none: the workers started early for
        this device (`start_workers_early`), for any number of jobs, else a pool where the jobs are enough to spread
        (`worker_count`); None where the pool is broken, there is no job, or none runs and none is started. Early
        workers count as answered (`take` waits for them) once one of them is ready."""
        if self.broken or jobs == 0:
            return None
        if self._pool is None and start:
            early = _EARLY.pop(self.device, None)
            readies: list[concurrent.futures.Future[None]] = []
            if early is not None:
                pool, workers, readies = early
            else:
                workers = worker_count(jobs)
                if workers == 0:
                    return None
                pool = _new_pool(workers)
            self._pool, self._warm, self._workers = pool, threading.Event(), workers
            _warms(readies, self._warm)
            self.pools += 1
        return self._pool

    def break_pool(self, pool: int | None = None) -> None:
        """Pool number `pool` (None: the current one) is taken as broken: its jobs are dropped, its workers ended
        (`close`: one that hangs holds a core and a CUDA context); the next submit starts another unless more than
        `RESTARTS` broke. Only the running pool can break: one already closed or replaced (its workers ended by
        `close`, so its jobs fail as a broken pool's do) is left as it is."""
        number = self.pools if pool is None else pool
        if number != self.pools or self._pool is None:
            return  # a pool already replaced or closed: its jobs end as a closed pool's do, which breaks nothing
        self._broken.add(number)
        withdrawn_before = len(self._unasked)
        self._closed()
        del self._unasked[withdrawn_before:]  # a broken pool's jobs are not graphs the builds left unasked

    def begin_close(self) -> None:
        """`close` begun, not waited for: the graphs sent ahead or foreseen that no build asked for withdrawn (`close`
        returns them), the feeder's held threads let go without sending (`_fed`), and the workers ended on a thread of
        their own (`_ended`: a CUDA context each, most of a second for a pool), which `close` waits for. A later
        `submit` starts new workers, their feeder not held."""
        self._unasked += self._withdraw(list(self._ahead))
        pool, self._pool = self._pool, None
        feeder, self._feeder = self._feeder, None
        if pool is None:
            return
        with self._feeding:
            self._held = False
            self._feeding.notify_all()
        ended: concurrent.futures.Future[None] = concurrent.futures.Future()

        def end() -> None:
            try:
                _ended(pool, feeder)
            except BaseException as exc:  # noqa: BLE001  (`close` raises it)
                ended.set_exception(exc)
            else:
                ended.set_result(None)

        try:
            threading.Thread(target=end, name="plan-workers-ending", daemon=True).start()
        except RuntimeError:  # no thread to be had: ended here
            end()
        self._ending.append(ended)

    def close(self) -> list[ConvSignature]:
        """Stops the workers and returns once they are gone (those `begin_close` told to end before too): jobs not
        started are dropped, a job still running (one this process built itself, its answer unused) is ended with
        its worker, so nothing compiles, holds a CUDA context or a core while the study times its variants; a later
        `submit` starts new workers. Returns the graphs sent ahead or foreseen that no build asked for, withdrawn
        (`_withdraw`) by this call or by `begin_close` since the last `close`."""
        self._closed()
        unasked, self._unasked = self._unasked, []
        return unasked

    def _closed(self) -> None:
        """`begin_close`, and every pool it began to end waited for; raises what ending one raised."""
        self.begin_close()
        while self._ending:
            self._ending.pop().result()
