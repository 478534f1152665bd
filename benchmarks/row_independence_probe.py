"""Does another process's CUDA context change a PyTorch CUDA-graph replay's time? senet154 in fp16 (random weights,
batch 1) timed alone, beside N idle processes that each hold a CUDA context on the same GPU (as the engine's plan
compiler workers do), and after they end; each figure the median of 5 samples of 200 replays timed by CUDA events.

    python benchmarks/row_independence_probe.py   # on a GPU; needs torch and timm only
"""

from __future__ import annotations

import statistics
import subprocess
import sys

import timm
import torch

HOLD = "import sys, time, torch; torch.zeros(1, device='cuda'); print('ready', flush=True); time.sleep(600)"


def replay_ms(graph: torch.cuda.CUDAGraph, replays: int = 200, samples: int = 5) -> float:
    for _ in range(20):
        graph.replay()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    found = []
    for _ in range(samples):
        start.record()
        for _ in range(replays):
            graph.replay()
        end.record()
        end.synchronize()
        found.append(start.elapsed_time(end) / replays)
    return statistics.median(found)


def main() -> None:
    model = timm.create_model("senet154", pretrained=False).cuda().half().eval()
    x = torch.randn(1, 3, 224, 224, device="cuda", dtype=torch.half)
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
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}")
    print(f"alone: {replay_ms(graph):.3f} ms")
    for count in (1, 4, 12):
        holders = [subprocess.Popen([sys.executable, "-c", HOLD], stdout=subprocess.PIPE, text=True)
                   for _ in range(count)]
        for holder in holders:
            holder.stdout.readline()
        print(f"beside {count} idle CUDA context(s): {replay_ms(graph):.3f} ms")
        for holder in holders:
            holder.kill()
            holder.wait()
        print(f"after they ended: {replay_ms(graph):.3f} ms")


if __name__ == "__main__":
    main()
