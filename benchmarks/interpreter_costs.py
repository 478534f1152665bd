"""The interpreter-level costs three of a study's rules rest on, measured on this machine:

- `gc.get_freeze_count()` on a frozen heap (why `sessions.documents.gc_pause` keeps whether the heap is frozen
  itself): seconds a call, for a heap of `--objects` small lists;
- Triton's `triton_key()` alone, and on a thread beside a thread that runs Python all the while, at the interpreter's
  default switch interval and at `region_artifacts.HASHING_SWITCH_S` (why `hash_triton_in_background` shortens it);
- `seeded_weights.weights_digest` (each tensor hashed apart, on threads) against one SHA-256 stream over the same
  bytes, for `--tensors` float32 tensors of one million values.

    python benchmarks/interpreter_costs.py [--objects 5000000] [--tensors 100]
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import statistics
import sys
import threading
import time
from collections.abc import Callable


def freeze_count_s(objects: int) -> float:
    """The median seconds of a `gc.get_freeze_count()` call with `objects` small lists frozen."""
    heap = [[index] for index in range(objects)]
    gc.freeze()
    try:
        times = []
        for _ in range(5):
            start = time.perf_counter()
            gc.get_freeze_count()
            times.append(time.perf_counter() - start)
    finally:
        gc.unfreeze()
    del heap
    return statistics.median(times)


def beside_busy_thread(work: Callable[[], object], interval: float) -> float:
    """Seconds `work` takes on a thread while this thread runs Python, at switch interval `interval`."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(interval)
    took: list[float] = []

    def timed() -> None:
        start = time.perf_counter()
        work()
        took.append(time.perf_counter() - start)

    thread = threading.Thread(target=timed)
    try:
        thread.start()
        while thread.is_alive():  # this thread runs Python all the while
            pass
    finally:
        thread.join()
        sys.setswitchinterval(before)
    return took[0]


def triton_lines() -> list[str]:
    try:
        from triton.runtime.cache import triton_key
    except ImportError:
        return ["triton_key: Triton is not installed here"]
    from builders.engine.region_artifacts import HASHING_SWITCH_S

    def fresh_key() -> object:
        triton_key.cache_clear()
        return triton_key()

    start = time.perf_counter()
    fresh_key()
    alone = time.perf_counter() - start
    lines = [f"triton_key alone: {alone:.2f} s"]
    for interval in (sys.getswitchinterval(), HASHING_SWITCH_S):
        seconds = beside_busy_thread(fresh_key, interval)
        busy = f"triton_key on a thread beside a busy one, switch interval {interval * 1e3:g} ms"
        lines.append(f"{busy}: {seconds:.2f} s")
    return lines


def digest_lines(count: int) -> list[str]:
    import torch

    from builders.models.seeded_weights import DIGEST_THREADS, weights_digest

    tensors = {f"w{index}": torch.randn(1_000_000) for index in range(count)}
    start = time.perf_counter()
    weights_digest(tensors)
    threaded = time.perf_counter() - start
    start = time.perf_counter()
    stream = hashlib.sha256()
    for name in sorted(tensors):
        stream.update(tensors[name].numpy())
    one_stream = time.perf_counter() - start
    megabytes = count * 4
    return [f"weights_digest, {megabytes} MB in {count} tensors, {DIGEST_THREADS} threads: {threaded:.2f} s",
            f"one SHA-256 stream over the same bytes: {one_stream:.2f} s"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", type=int, default=5_000_000)
    parser.add_argument("--tensors", type=int, default=100)
    args = parser.parse_args()
    lines = [f"gc.get_freeze_count() with {args.objects:,} objects frozen: {freeze_count_s(args.objects) * 1e3:.1f} ms"]
    lines += triton_lines()
    lines += digest_lines(args.tensors)
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
