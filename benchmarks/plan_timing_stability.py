"""Whether the engine's one-sample plan timing (`kernels.time_execution`: 10 executions after 3, one mean) picks the
same plan each time it is asked, on a quiet GPU and while the plan compiler's worker processes compile other graphs
(as in a first build, where every worker holds a CUDA context on the same GPU); and what each plan takes when its
weights are not in L2 (`cold-w`: each execution reads another copy of the weights, the copies together twice the
L2's size, the input the same tensor each time), as in an engine's graph, where every layer's weights are read once
an inference and only its input was just written.

For senet154's fp16 1x1 shapes as the engine's matmul graphs (the pointwise layers whose chosen plan moved between
two machines) and one grouped 3x3, each of the first plans (the default `--opt-level`'s count) is built once, then
timed SAMPLES times round-robin with the engine's own timer. Printed per plan: the min, median and max of its samples;
per phase: which plan each sample round would have chosen (the engine times one round) and which the medians choose.

    python benchmarks/plan_timing_stability.py [--samples 15] [--workers-graphs 48]   (0: no phase with workers)
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import time

import torch

from builders.engine.compiler import PlanCompiler
from builders.engine.cudnn_library import import_cudnn
from builders.engine.kernels import TENSOR_UIDS, ConvSignature, define_graph, scratch_tensors, time_execution
from builders.engine.plans import PLANS_PER_OPT_LEVEL
from sessions.documents.options import default

SHAPES = ((56, 256, 256), (28, 512, 512), (14, 1024, 1024), (7, 2048, 2048))  # side, in, out channels


def signatures() -> list[ConvSignature]:
    pointwise = [ConvSignature("fp16", (1, cin, side, side), cout, (1, 1), (1, 1), (0, 0), (1, 1), 1, (), False,
                               as_matmul=True) for side, cin, cout in SHAPES]
    grouped = ConvSignature("fp16", (1, 512, 28, 28), 512, (3, 3), (1, 1), (1, 1), (1, 1), 64, ("relu",), False,
                            unit_scale=True)
    return [*pointwise, grouped]


def busy_signatures(count: int) -> list[ConvSignature]:
    """FP8 graphs for the workers to compile (runtime-fusion plans: seconds each), none of them timed here."""
    sigs = []
    for i in range(count):
        side, cin, cout = SHAPES[i % len(SHAPES)]
        sigs.append(ConvSignature("fp8", (1 + i // len(SHAPES), cin, side, side), cout, (1, 1), (1, 1), (0, 0),
                                  (1, 1), 1, ("relu",), bool(i % 2)))
    return sigs


def weight_copies(scratch: dict[int, torch.Tensor]) -> list[dict[int, torch.Tensor]]:
    """`scratch` with the weights replaced by copies that together hold twice the GPU's L2 (at least 16)."""
    weight = scratch[TENSOR_UIDS["w"]]
    l2 = torch.cuda.get_device_properties(weight.device).L2_cache_size
    count = max(16, -(-2 * l2 // (weight.numel() * weight.element_size())))
    return [{**scratch, TENSOR_UIDS["w"]: weight.clone(memory_format=torch.channels_last)} for _ in range(count)]


def plan_timers(sig: ConvSignature, cudnn, handle, limit: int,
                cold_weights: bool = False) -> dict[int, tuple[str, object]]:
    """Each of the first `limit` plans built, with a closure that times it as the engine does (`cold_weights`: each
    call reads the next copy of the weights, `weight_copies`)."""
    graph = define_graph(sig, cudnn, handle)
    scratch = scratch_tensors(sig)
    packs = itertools.cycle(weight_copies(scratch) if cold_weights else [scratch])
    timers = {}
    for index in range(min(limit, graph.get_execution_plan_count())):
        try:
            graph.build_plan_at_index(index)
        except Exception:  # noqa: BLE001, S112  (a plan that does not build is no candidate)
            continue
        workspace = torch.empty(max(graph.get_workspace_size_plan_at_index(index), 1), dtype=torch.uint8,
                                device="cuda")

        def run(index=index, workspace=workspace) -> None:
            graph.execute_plan_at_index(next(packs), workspace, index, handle=handle)

        timers[index] = (graph.get_plan_name_at_index(index), run)
    return timers


def phase(label: str, timers: dict[int, tuple[str, object]], samples: int) -> None:
    times: dict[int, list[float]] = {index: [] for index in timers}
    for _ in range(samples):
        for index, (_, run) in timers.items():
            times[index].append(time_execution(run))
    rounds = [min(times, key=lambda index: times[index][r]) for r in range(samples)]
    by_median = min(times, key=lambda index: statistics.median(times[index]))
    for index, values in times.items():
        print(f"  {label:6} plan {index} {timers[index][0]:28} min {min(values):6.2f}  median "
              f"{statistics.median(values):6.2f}  max {max(values):6.2f} us")
    wins = {index: rounds.count(index) for index in times}
    print(f"  {label:6} one-sample choice over {samples} rounds: {wins}; by median: plan {by_median}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=15)
    parser.add_argument("--workers-graphs", type=int, default=48)
    args = parser.parse_args()
    cudnn = import_cudnn()
    handle = cudnn.create_handle()
    cudnn.set_stream(handle, torch.cuda.current_stream().cuda_stream)
    limit = PLANS_PER_OPT_LEVEL[default("opt_level")]
    prepared = [(sig, plan_timers(sig, cudnn, handle, limit)) for sig in signatures()]
    for sig, timers in prepared:
        print(sig.key())
        phase("quiet", timers, args.samples)
        phase("cold-w", plan_timers(sig, cudnn, handle, limit, cold_weights=True), args.samples)
    if args.workers_graphs == 0:
        return
    compiler = PlanCompiler(torch.cuda.current_device())
    jobs = compiler.submit(busy_signatures(args.workers_graphs), limit)._jobs
    start = time.perf_counter()
    while not any(job.done() for job in jobs.values()) and time.perf_counter() - start < 120:
        time.sleep(0.1)  # the workers started and compiling (the first answer back)
    print(f"workers answering after {time.perf_counter() - start:.1f} s")
    for sig, timers in prepared:
        print(sig.key())
        phase("busy", timers, args.samples)
        print(f"  (jobs outstanding: {sum(not job.done() for job in jobs.values())})")
    compiler.close()
    print(f"GPU {torch.cuda.get_device_name()}, {limit} plans per graph, {args.samples} samples of the engine's timer")


if __name__ == "__main__":
    main()
