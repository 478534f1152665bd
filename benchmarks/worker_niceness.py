"""What the compile workers' niceness (`builders.engine.compiler.WORKER_NICENESS`) buys the study's process on this
machine: the seconds of a CPU-bound task in this process (random weights drawn and hashed, as a first run's model
load makes its seeded weights: `builders.models.seeded_weights`) alone, beside `--workers` compile workers starting
at the study's priority, and beside as many started by the engine's own pool (`compiler._new_pool`: niced). Each
worker starts as the engine's do (spawned, importing torch and the engine's modules) and answers one trivial job;
the task starts as they are sent. Alternating rounds, medians printed.

    python benchmarks/worker_niceness.py [--workers 4] [--rounds 3] [--values 50000000]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import hashlib
import multiprocessing
import os
import statistics
import time
from collections.abc import Callable

import torch

from builders.engine import compiler


def task_s(values: int) -> float:
    """Seconds to draw `values` float32 normals on the CPU and hash their bytes, in this process."""
    start = time.perf_counter()
    weights = torch.randn(values, generator=torch.Generator().manual_seed(0))
    hashlib.sha256(weights.numpy()).digest()
    return time.perf_counter() - start


def plain_pool(workers: int) -> concurrent.futures.ProcessPoolExecutor:
    """The engine's pool as it was before its workers were niced: spawned at this process's priority."""
    return concurrent.futures.ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"),
                                                  initializer=compiler._worker_init)


def beside(pool_of: Callable[[int], concurrent.futures.ProcessPoolExecutor] | None, workers: int,
           values: int) -> tuple[float, int | None]:
    """The task's seconds while `workers` workers of `pool_of` start (alone where None), and their niceness."""
    if pool_of is None:
        return task_s(values), None
    pool = pool_of(workers)
    try:
        jobs = [pool.submit(os.getpriority, os.PRIO_PROCESS, 0) for _ in range(workers)]
        seconds = task_s(values)
        niceness = {job.result() for job in jobs}
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    return seconds, niceness.pop() if len(niceness) == 1 else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--values", type=int, default=50_000_000)
    args = parser.parse_args()
    kinds: dict[str, Callable[[int], concurrent.futures.ProcessPoolExecutor] | None] = {
        "alone": None, "beside workers at this priority": plain_pool, "beside the engine's niced workers":
        compiler._new_pool}
    seen: dict[str, list[float]] = {kind: [] for kind in kinds}
    nice: dict[str, int | None] = {}
    task_s(args.values // 10)  # torch's CPU kernels and allocator warmed
    for _ in range(args.rounds):
        for kind, pool_of in kinds.items():
            seconds, nice[kind] = beside(pool_of, args.workers, args.values)
            seen[kind].append(seconds)
    print(f"{os.cpu_count()} CPUs (affinity {len(os.sched_getaffinity(0))}), torch {torch.__version__}, "
          f"{args.workers} workers, {args.values} values ({args.values * 4 / 2**20:.0f} MiB), {args.rounds} rounds")
    for kind, times in seen.items():
        niceness = "" if nice[kind] is None else f"  (workers' niceness {nice[kind]})"
        print(f"{kind:36s} median {statistics.median(times):6.2f} s  "
              f"[{', '.join(f'{t:.2f}' for t in times)}]{niceness}")


if __name__ == "__main__":
    main()
