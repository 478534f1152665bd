"""How PyTorch's eager bilinear upsampling and channel concatenation perform by memory layout on the GPU: the
decode head of SegFormer-B0 at 512 (four 256-channel maps of 128, 64, 32 and 16 pixels a side, each upsampled to
128 x 128, then concatenated on the channels), at batch 1 and 32, in fp16. Each op timed over back-to-back calls
with CUDA events; the layout of the input as the model makes it (a linear's output permuted and reshaped), then
made contiguous (NCHW) and channels-last.

    python benchmarks/upsample_layouts.py
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from cuda_timing import mean_ms

SIDES = (128, 64, 32, 16)
CHANNELS, OUT = 256, 128
CALLS = 20


def layout(t: torch.Tensor) -> str:
    if t.is_contiguous():
        return "NCHW"
    return "NHWC" if t.is_contiguous(memory_format=torch.channels_last) else f"strides {t.stride()}"


def main() -> None:
    for batch in (1, 32):
        maps = []
        for side in SIDES:
            tokens = torch.randn(batch, side * side, CHANNELS, device="cuda", dtype=torch.half)
            maps.append(tokens.permute(0, 2, 1).reshape(batch, CHANNELS, side, side))  # as the decode head makes it
        for name, make in (("as made", lambda t: t), ("NCHW", lambda t: t.contiguous()),
                           ("NHWC", lambda t: t.contiguous(memory_format=torch.channels_last))):
            inputs = [make(t) for t in maps]
            ups = [F.interpolate(t, size=(OUT, OUT), mode="bilinear", align_corners=False) for t in inputs]
            times = [mean_ms(lambda t=t: F.interpolate(t, size=(OUT, OUT), mode="bilinear", align_corners=False),
                             CALLS, warmup=3) for t in inputs]
            cat_ms = mean_ms(lambda ups=ups: torch.cat(ups, dim=1), CALLS, warmup=3)
            out = torch.cat(ups, dim=1)
            print(f"batch {batch:2d} {name:8s} inputs {[layout(t) for t in inputs]} -> upsampled {layout(ups[1])}: "
                  f"upsample ms {', '.join(f'{t:.4f}' for t in times)}; cat {cat_ms:.4f} ms -> {layout(out)}")


if __name__ == "__main__":
    main()
