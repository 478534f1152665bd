"""What a build pays to get fused regions' compiled functions, the old way and the engine's way, each in a fresh
process (as a study is one): `torch.compile` of the region (dynamo, then Inductor; warm: from Inductor's on-disk
caches) against Inductor's standalone artifacts (`builders.engine.region_artifacts`: compiled once from the ATen
graph, then loaded from their bytes).

Regions: squeeze-excitation blocks of distinct widths, the regions a senet154 build fuses most (one signature a
width). Each mode runs in its own process; each way has an Inductor cache folder of its own, empty at the start, so
"cold" means a first study and "warm" / "loaded" what a second study finds. Figures: seconds from the first compile
or load to the last region's first call returning, excluding the process's start and torch's import.

    python benchmarks/region_load_cost.py [--regions 8] [--device cpu|cuda]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODES = ("torch.compile, cold", "standalone, cold (bytes kept)", "torch.compile, warm", "standalone, loaded")


def _regions(count: int, device: str):
    import torch
    import torch.nn.functional as F

    class Gate(torch.nn.Module):
        def forward(self, x, w1, w2):
            s = F.relu(F.conv2d(x.mean((2, 3), keepdim=True), w1))
            return x * torch.sigmoid(F.conv2d(s, w2))

    dtype = torch.float16 if device == "cuda" else torch.float32
    for k in range(count):
        channels = 64 + 16 * k
        args = [torch.randn(1, channels, 14, 14), torch.randn(channels // 4, channels, 1, 1),
                torch.randn(channels, channels // 4, 1, 1)]
        yield torch.fx.symbolic_trace(Gate()), [a.to(device=device, dtype=dtype) for a in args]


def _child(mode: str, count: int, device: str, blobs: Path) -> float:
    """Seconds to have every region's function called once, in this process, the way `mode` says."""
    import torch

    from builders.engine.region_artifacts import compile_region, load_region

    regions = list(_regions(count, device))
    started = time.perf_counter()
    with torch.no_grad():
        for k, (module, args) in enumerate(regions):
            if mode.startswith("torch.compile"):
                torch.compile(module, dynamic=False, fullgraph=True)(*args)
            elif mode.endswith("loaded"):
                load_region((blobs / f"{k}.bin").read_bytes())(*args)
            else:
                function, blob = compile_region(module, args)
                function(*args)
                assert blob is not None
                (blobs / f"{k}.bin").write_bytes(blob)
    if device == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--regions", type=int, default=8)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--blobs", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(_child(args.child, args.regions, args.device, Path(args.blobs))))
        return
    with tempfile.TemporaryDirectory() as compiled, tempfile.TemporaryDirectory() as standalone, \
            tempfile.TemporaryDirectory() as blobs:
        print(f"{args.regions} squeeze-excitation regions of distinct widths on {args.device}, each mode in a fresh "
              f"process; seconds until every region's function has run once")
        for mode in MODES:
            inductor = compiled if mode.startswith("torch.compile") else standalone  # each way its own caches
            env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": inductor, "PYTHONPATH": str(ROOT)}
            out = subprocess.run([sys.executable, __file__, "--child", mode, "--regions", str(args.regions),
                                  "--device", args.device, "--blobs", blobs], env=env, check=True,
                                 capture_output=True, text=True).stdout
            print(f"  {mode:32s} {json.loads(out.splitlines()[-1]):7.2f} s")


if __name__ == "__main__":
    main()
