"""Which graphs does another process's CUDA context make faster: those made before it appeared, or also those made
while it lives or after it ended? senet154 fp16 graphs captured at each point, each timed pre-queued and back to back.

    python benchmarks/replay_state_order.py   # on a GPU; torch and timm only
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import timm
import torch
from replay_state_probe import capture, report

from profilers.gpu_contexts import _HELPER

# the tool's helper (a context, a memset), held until this process closes its input
HELD = _HELPER + 'print("ready", flush=True)\nsys.stdin.read()\n'


@contextlib.contextmanager
def companion(device_index: int) -> Iterator[str]:
    """Another process holding a CUDA context on the GPU while the block runs."""
    process = subprocess.Popen([sys.executable, "-c", HELD, str(device_index)], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, text=True)
    try:
        yield f"companion: {process.stdout.readline().strip()}"
    finally:
        process.stdin.close()
        process.wait()


def main() -> None:
    torch.zeros(1, device="cuda")
    model = timm.create_model("senet154", pretrained=False).cuda().half().eval()
    x = torch.randn(1, 3, 224, 224, device="cuda", dtype=torch.half)
    with companion(0) as said:
        print(said, flush=True)
        during = capture(model, x)
        report("graph made while a companion lives", during.replay)
    report("that graph, the companion ended", during.replay)
    after = capture(model, x)
    report("graph made after the companion ended", after.replay)
    with companion(0) as said:
        report("a second companion: the graph made after the first", after.replay)
        report("a second companion: the graph made during the first", during.replay)
    fresh = capture(model, x)
    report("graph made after the second companion ended", fresh.replay)


if __name__ == "__main__":
    main()
