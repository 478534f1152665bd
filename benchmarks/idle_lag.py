"""Does a GPU run a model slower for a while after it idled, and for how long? The question behind the discard that
opens each timing round (profilers/timing.py): the round before is reported while the GPU has nothing to run.

    python benchmarks/idle_lag.py [--models a,b] [--gaps 0,2,10,50,200] [--repeats 12] [--samples 40]
                                  [--windows 0,20,60,100,160]

Per model (timm, random weights, fp16, batch 1, one CUDA graph) and per gap: `--repeats` times, 250 ms of
back-to-back replays (the state every turn starts from), a synchronisation, the host idle for the gap (sleeping),
then `--samples` samples read as the tool reads them (`profilers.timing.clock_for`, each spanning
`inferences_per_sample` replays). The gaps run in a shuffled order each repeat. The table gives, per gap and window
of milliseconds into the samples, the mean of the samples against the steady level (the median of the last quarter
of the samples after the shortest gap, 0 by default) and how many repeats' window means lie over it by more than
0.2 %. A GPU that idles without consequence shows the same small figures for every gap. No figure here is a
TensorRT one.
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this checkout's code

from profilers.timing import clock_for, inferences_per_sample

BUSY_MS = 250.0  # back-to-back replays before each gap: the state every turn starts from
WINDOW_EDGES_MS = "0,20,60,100,160"  # the windows into the samples: between these edges, then past the last
OVER = 0.002  # a window mean this far over the steady level counts as slow


def graphed(name: str) -> Callable[[], None]:
    """timm's `name` (random weights, fp16, batch 1) captured as the benchmarks capture a call (`cuda_timing.captured`);
    the graph's replay."""
    import timm
    import torch
    from cuda_timing import captured

    model = timm.create_model(name, pretrained=False).eval().cuda().half()
    x = torch.randn(1, 3, 224, 224, device="cuda", dtype=torch.half)
    with torch.no_grad():
        return captured(lambda: model(x))


def windows_of(edges: str) -> list[tuple[float, float]]:
    """`--windows`' edges in ms as (start, end) pairs, the last window open-ended."""
    points = [float(edge) for edge in edges.split(",")]
    return list(zip(points, points[1:] + [math.inf], strict=True))


def profile(name: str, gaps: list[float], repeats: int, count: int, windows: list[tuple[float, float]]) -> None:
    import torch

    step = graphed(name)
    clock = clock_for("cuda")  # as a study on the GPU reads its samples
    single = clock.inference_ms(step)
    per = inferences_per_sample(single)
    busy = math.ceil(BUSY_MS / single)
    runs: dict[float, list[list[float]]] = {gap: [] for gap in gaps}
    shuffle = random.Random(0)
    for _ in range(repeats):
        for gap in shuffle.sample(gaps, len(gaps)):
            for _ in range(busy):
                step()
            torch.cuda.synchronize()
            if gap:
                time.sleep(gap / 1e3)
            runs[gap].append(clock.samples(step, count, per))
    steady = statistics.median(s for run in runs[min(gaps)] for s in run[3 * count // 4:])
    span = per * steady  # ms one sample lasts
    print(f"\n## {name}: {single:.3f} ms an inference, {per} a sample ({span:.1f} ms), steady {steady:.4f} ms")
    print("| gap ms | " + " | ".join(f"{lo:g}-{hi:g} ms" if hi < math.inf else f"{lo:g} ms on" for lo, hi in windows)
          + " |")
    print("|---:|" + "---:|" * len(windows))
    for gap in gaps:
        cells = []
        for lo, hi in windows:
            first, last = int(lo // span), count if hi == math.inf else min(count, math.ceil(hi / span))
            means = [statistics.fmean(run[first:last]) / steady - 1 for run in runs[gap] if last > first]
            if not means:
                cells.append("-")
                continue
            slow = sum(m > OVER for m in means)
            cells.append(f"{100 * statistics.fmean(means):+.2f} % ({slow}/{len(means)} slow)")
        print(f"| {gap:g} | " + " | ".join(cells) + " |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="vit_tiny_patch16_224,resnet50,convnext_atto,densenet121")
    parser.add_argument("--gaps", default="0,2,10,50,200", help="ms the GPU idles, comma-separated")
    parser.add_argument("--repeats", type=int, default=12)
    parser.add_argument("--samples", type=int, default=40)
    parser.add_argument("--windows", default=WINDOW_EDGES_MS, help="edges of the windows in ms, comma-separated")
    args = parser.parse_args()
    gaps = [float(g) for g in args.gaps.split(",")]
    print(f"idle lag: {args.repeats} repeats of {args.samples} samples per gap, after {BUSY_MS:g} ms of replays; "
          f"windows over the steady level by more than {100 * OVER:g} % counted slow")
    for name in args.models.split(","):
        profile(name, gaps, args.repeats, args.samples, windows_of(args.windows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
