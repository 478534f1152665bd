"""What makes one process's CUDA-graph replays 9-11 % faster than another's with the same kernels?

senet154 in fp16 (random weights, batch 1, one CUDA graph of about 1,300 kernels) is timed in one process, in a
sequence of states: fresh; beside idle processes that hold a CUDA context (as the engine's plan-compiler workers
do); after they end; while and after CPU-busy processes run (as a cold build's compilers do); after seconds of
in-process GPU work (as cuDNN's plan timing is). In each state three figures:

- back to back: events recorded around back-to-back replays with the stream already busy (the tool's method), so a
  sample holds any gap while the host is still submitting the graph's work;
- pre-queued: a sleep kernel first holds the GPU while the host submits every replay of the sample, so the events
  time the GPU's own work alone;
- host enqueue: the host's wall time per `replay()` call while the GPU is held (the CPU cost of submitting one).

Back to back above pre-queued means the host's submission sets the pace; a state that moves back to back but not
pre-queued is a host state, not the GPU's.

    python benchmarks/replay_state_probe.py            # on a GPU; torch and timm only
    python benchmarks/replay_state_probe.py --settle   # the tool's settle (profilers.gpu_contexts) after "fresh"
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's profilers: its clock, --settle

import timm
import torch

HOLD = "import time, torch; torch.zeros(1, device='cuda'); print('ready', flush=True); time.sleep(600)"
SPIN = "import time; print('ready', flush=True); t = time.time()\nwhile time.time() - t < {s}: pass"
SLEEP_CYCLES = 200_000_000  # about 0.1 s at the H200's 1.98 GHz: longer than the host needs to submit a sample


def back_to_back_ms(replay: Callable[[], None], replays: int, samples: int = 20) -> float:
    """The tool's own clock (`profilers.timing.EventClock`): events around `replays` back-to-back replays, the stream
    already busy with three more; the median per replay."""
    from profilers.timing import clock_for

    for _ in range(3):
        replay()
    return statistics.median(clock_for("cuda").samples(replay, samples, replays))


def prequeued_ms(replay: Callable[[], None], replays: int, samples: int = 20) -> tuple[float, float]:
    """(GPU ms per replay with the host's submission done before the GPU starts, host ms per replay() call)."""
    gpu, host = [], []
    for _ in range(samples):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(SLEEP_CYCLES)
        start.record()
        t0 = time.perf_counter()
        for _ in range(replays):
            replay()
        host.append((time.perf_counter() - t0) * 1e3 / replays)
        end.record()
        end.synchronize()
        gpu.append(start.elapsed_time(end) / replays)
    return statistics.median(gpu), statistics.median(host)


def clocks() -> str:
    try:
        import pynvml

        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        sm = pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM)
        mem = pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_MEM)
        return f"SM {sm} MHz, memory {mem} MHz"
    except Exception as error:  # noqa: BLE001 - a probe's side figure; the timing stands without it
        return f"clocks unread ({error})"


def report(state: str, replay: Callable[[], None]) -> None:
    b2b = back_to_back_ms(replay, replays=2)
    queued, host = prequeued_ms(replay, replays=4)
    print(
        f"{state:<44} back to back {b2b:6.3f} ms  pre-queued {queued:6.3f} ms  host enqueue {host:6.3f} ms/replay  "
        f"({clocks()})",
        flush=True,
    )


def start(code: str, count: int) -> list[subprocess.Popen]:
    procs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True) for _ in range(count)]
    for proc in procs:
        proc.stdout.readline()
    return procs


def end(procs: list[subprocess.Popen]) -> None:
    for proc in procs:
        proc.kill()
        proc.wait()


def capture(model: torch.nn.Module, x: torch.Tensor) -> torch.cuda.CUDAGraph:
    """One forward of `model` on `x` in a CUDA graph, after warm-up calls on a side stream."""
    with torch.no_grad():
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                model(x)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            model(x)
    return graph


def main() -> None:
    model = timm.create_model("senet154", pretrained=False).cuda().half().eval()
    x = torch.randn(1, 3, 224, 224, device="cuda", dtype=torch.half)
    graph = capture(model, x)
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, CUDA {torch.version.cuda}", flush=True)
    report("fresh process", graph.replay)
    report("fresh process, again", graph.replay)
    if "--settle" in sys.argv:  # the tool's own step (profilers.gpu_contexts): a helper's context made and ended
        from profilers.device import study_device

        print(study_device("cuda").settle(), flush=True)
        report("after the tool's settle", graph.replay)
    holders = start(HOLD, 4)
    report("beside 4 idle CUDA contexts", graph.replay)
    end(holders)
    report("after they ended", graph.replay)
    spinners = start(SPIN.format(s=30), 8)
    report("while 8 CPU-busy processes run", graph.replay)
    end(spinners)
    report("after they ended", graph.replay)
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.half)
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < 5:
        a @ a
    torch.cuda.synchronize()
    report("after 5 s of in-process matrix products", graph.replay)
    spinners = start(SPIN.format(s=8), 8)
    time.sleep(8)
    end(spinners)
    report("after 8 s of 8 CPU-busy processes", graph.replay)
    report("graph's replay launched with the GIL held", lambda: graph.replay())


if __name__ == "__main__":
    main()
