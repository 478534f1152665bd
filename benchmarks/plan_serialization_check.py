"""Whether a cuDNN plan chosen by timing can be kept as bytes and run again without compiling it (H200).

For a few convolution graphs of senet154's kinds (FP8 and fp16, grouped 3x3 and 1x1 with fused epilogues), each
plan the engine would time: seconds to build it, bytes serialized, seconds to deserialize it into an empty graph,
its kernel time built and deserialized (the same method as the engine's tactic timing), and whether the two give
bitwise the same output. Then the same graphs' plans compiled in worker processes (spawned, one CUDA context each)
and serialized back: the wall time against one process compiling them all, and each worker's start-up.

    python benchmarks/plan_serialization_check.py [--workers N] [--limit PLANS]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import multiprocessing
import time
from typing import Any

import torch

from builders.engine.cudnn_library import import_cudnn
from builders.engine.kernels import (
    TENSOR_UIDS,
    ConvSignature,
    define_graph,
    load_plan,
    plans_compiled,
    scratch_tensors,
    time_execution,
)

SIGNATURES = [
    ConvSignature("fp8", (1, 256, 56, 56), 256, (3, 3), (1, 1), (1, 1), (1, 1), 64, ("relu",), True),
    ConvSignature("fp8", (1, 256, 56, 56), 256, (1, 1), (1, 1), (0, 0), (1, 1), 1, ("add", "relu"), False),
    ConvSignature("fp8", (1, 512, 28, 28), 1024, (1, 1), (1, 1), (0, 0), (1, 1), 1, ("relu",), True),
    ConvSignature("fp16", (1, 256, 56, 56), 256, (3, 3), (1, 1), (1, 1), (1, 1), 64, ("relu",), False),
    ConvSignature("fp8", (32, 512, 28, 28), 512, (3, 3), (2, 2), (1, 1), (1, 1), 64, ("relu",), True),
    ConvSignature("fp8", (32, 256, 56, 56), 128, (1, 1), (1, 1), (0, 0), (1, 1), 1, ("relu",), True),
]
_WORKER: dict[str, Any] = {}


def compile_in_worker(sig: ConvSignature, limit: int) -> tuple[float, float, list[bytes | str]]:
    """In a worker: its start-up seconds (0 after its first job), the seconds `plans_compiled` took, its plans."""
    started = time.perf_counter()
    if "handle" not in _WORKER:
        cudnn = import_cudnn()
        _WORKER.update(cudnn=cudnn, handle=cudnn.create_handle())
    startup = time.perf_counter() - started
    started = time.perf_counter()
    _, plans = plans_compiled(sig, _WORKER["cudnn"], _WORKER["handle"], limit)
    return startup, time.perf_counter() - started, list(plans.values())


def in_process(limit: int) -> None:
    cudnn = import_cudnn()
    handle = cudnn.create_handle()
    cudnn.set_stream(handle, torch.cuda.current_stream().cuda_stream)
    for sig in SIGNATURES:
        graph = define_graph(sig, cudnn, handle)
        scratch = scratch_tensors(sig)
        output = scratch[TENSOR_UIDS["y"]]
        print(f"\n{sig.key()}: {graph.get_execution_plan_count()} plans offered")
        for index in range(min(limit, graph.get_execution_plan_count())):
            name = graph.get_plan_name_at_index(index)
            started = time.perf_counter()
            try:
                graph.build_plan_at_index(index)
            except Exception as exc:  # noqa: BLE001
                print(f"  [{index}] {name}: does not build ({' '.join(str(exc).split())[:120]})")
                continue
            built_s = time.perf_counter() - started
            workspace = torch.empty(max(graph.get_workspace_size_plan_at_index(index), 1), dtype=torch.uint8,
                                    device="cuda")
            built_us = time_execution(lambda: graph.execute_plan_at_index(scratch, workspace, index, handle=handle))  # noqa: B023
            expected = output.contiguous().view(torch.uint8).clone()
            started = time.perf_counter()
            blob = bytes(graph.serialize(as_bytes=True))
            serialize_s = time.perf_counter() - started
            started = time.perf_counter()
            loaded = load_plan(cudnn, handle, blob)
            load_s = time.perf_counter() - started
            space = torch.empty(max(loaded.get_workspace_size(), 1), dtype=torch.uint8, device="cuda")
            output.zero_()
            loaded_us = time_execution(lambda: loaded.execute(scratch, space, handle=handle))  # noqa: B023
            same = torch.equal(output.contiguous().view(torch.uint8), expected)
            print(f"  [{index}] {name}: build {built_s:.3f} s, serialize {serialize_s * 1e3:.1f} ms "
                  f"({len(blob):,} bytes), deserialize {load_s * 1e3:.1f} ms; kernel {built_us:.1f} us built, "
                  f"{loaded_us:.1f} us deserialized; output bitwise equal: {same}")


def in_workers(workers: int, limit: int) -> None:
    context = multiprocessing.get_context("spawn")
    started = time.perf_counter()
    with concurrent.futures.ProcessPoolExecutor(workers, mp_context=context) as pool:
        answers = [job.result() for job in [pool.submit(compile_in_worker, sig, limit) for sig in SIGNATURES]]
    wall = time.perf_counter() - started
    starts = [startup for startup, _, _ in answers if startup]
    plans = [plan for _, _, found in answers for plan in found]
    refused = [plan for plan in plans if isinstance(plan, str)]
    print(f"\n{workers} workers ({len(starts)} started, start-up {min(starts):.2f}-{max(starts):.2f} s): "
          f"{len(plans)} plans compiled and serialized, {sum(s for _, s, _ in answers):.2f} s of compilation, "
          f"{wall:.2f} s wall from the pool's creation; {len(refused)} refused {refused[:2]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--workers", type=int, default=6)
    parser.add_argument("--limit", type=int, default=4)
    args = parser.parse_args()
    print(f"{torch.cuda.get_device_name()}, cuDNN {import_cudnn().backend_version()}")
    in_process(args.limit)
    in_workers(args.workers, args.limit)


if __name__ == "__main__":
    main()
