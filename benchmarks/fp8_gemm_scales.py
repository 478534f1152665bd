"""How fast `torch._scaled_mm` runs senet154's 1x1 convolutions at batch 32 as GEMMs on the GPU, by how the weights
are scaled, against the fp16 GEMM: (N*H*W, Cin) @ (Cin, Cout), bias fused, fp16 out. The engine's FP8 GEMM tactic
scales the weights per output channel (rowwise scales: a different kernel path from per-tensor scales); this shows
what that choice costs per shape. Each GEMM captured in a CUDA graph, its replays timed with CUDA events; the kernel
of one replay named by torch.profiler.

    python benchmarks/fp8_gemm_scales.py [--batch 32]
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

import torch
from cuda_timing import captured, longest_kernels, mean_ms

# (side, Cin, Cout) of senet154's 1x1 convolutions (its squeeze-excitation ones aside), one of each shape
SHAPES = ((56, 128, 128), (56, 256, 256), (56, 256, 128), (56, 128, 256), (28, 512, 256), (28, 512, 512),
          (28, 256, 256), (14, 1024, 512), (14, 1024, 1024), (14, 512, 512), (7, 2048, 1024), (7, 2048, 2048),
          (7, 1024, 1024))
REPLAYS = 200
FP8 = torch.float8_e4m3fn


def replay_us(fn: Callable[[], object]) -> tuple[float, str]:
    """Microseconds per replay of `fn` captured in a CUDA graph, and the name of the longest kernel of one replay."""
    replay = captured(fn)
    longest = longest_kernels(replay, 1)
    return mean_ms(replay, REPLAYS, warmup=10) * 1000, longest[0][1] if longest else "-"


def gemms(rows: int, cin: int, cout: int) -> dict[str, Callable[[], torch.Tensor]]:
    """The GEMMs timed for one shape, by label: random operands, unit scales, an fp16 bias."""
    a16 = torch.randn(rows, cin, device="cuda", dtype=torch.half)
    w16 = torch.randn(cout, cin, device="cuda", dtype=torch.half) / cin**0.5
    bias = torch.randn(cout, device="cuda", dtype=torch.half)
    bias_bf16 = bias.to(torch.bfloat16)
    a8, w8 = a16.to(FP8), w16.to(FP8).t()  # the weight column-major, as _scaled_mm takes it
    one = torch.ones((), device="cuda")
    row_a, row_b = torch.ones(rows, 1, device="cuda"), torch.ones(1, cout, device="cuda")
    return {
        "fp16 addmm": lambda: torch.addmm(bias, a16, w16.t()),
        "FP8 rowwise": lambda: torch._scaled_mm(a8, w8, scale_a=row_a, scale_b=row_b, bias=bias,
                                                out_dtype=torch.half),
        "FP8 per-tensor": lambda: torch._scaled_mm(a8, w8, scale_a=one, scale_b=one, bias=bias, out_dtype=torch.half),
        "FP8 rowwise bf16": lambda: torch._scaled_mm(a8, w8, scale_a=row_a, scale_b=row_b,
                                                     bias=bias_bf16, out_dtype=torch.bfloat16),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=32)
    args = parser.parse_args()
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}, batch {args.batch}")
    print("rows x Cin -> Cout: fp16 addmm | FP8 rowwise (per-channel weights) | FP8 per-tensor | FP8 rowwise, bf16 "
          "out  (us per GEMM; best FP8 against fp16)")
    kernel_names: dict[str, str] = {}
    for side, cin, cout in SHAPES:
        rows = args.batch * side * side
        candidates = gemms(rows, cin, cout)
        times = {}
        for label, fn in candidates.items():
            try:
                times[label], kernel_names[f"{label} {rows}x{cin}->{cout}"] = replay_us(fn)
            except Exception as exc:  # noqa: BLE001  (a path this torch refuses is reported, the others go on)
                times[label] = float("nan")
                kernel_names[f"{label} {rows}x{cin}->{cout}"] = f"failed: {type(exc).__name__}: {str(exc)[:120]}"
        best = min(t for label, t in times.items() if label.startswith("FP8") and not math.isnan(t))
        print(f"{rows:>7} x {cin:>4} -> {cout:>4}: " + " | ".join(f"{t:7.1f}" for t in times.values())
              + f"   best FP8 {times['fp16 addmm'] / best:.2f}x fp16")
    print("kernels (the longest of one replay):")
    for key, name in kernel_names.items():
        print(f"  {key}: {name[:150]}")


if __name__ == "__main__":
    main()
