"""How the ops of SegFormer-B0's decode head at 512 perform run eagerly, compiled by Inductor as one function, and
with their linears written three ways, on the GPU, at batch 1 and 32, in fp16. What the engine's fused tactics can
offer for that head (`builders.engine.fusion_regions`) depends on which of these wins.

The head: four stage outputs (NCHW, 32 / 64 / 160 / 256 channels, 128 / 64 / 32 / 16 pixels a side) each flattened
to tokens, projected to 256 channels by a linear, put back as a map (channels-last, as the permute makes it),
upsampled bilinearly to 128 x 128, concatenated on the channels; then a 1x1 convolution to 256 channels, ReLU and a
1x1 classifier. Each candidate captured in a CUDA graph (as the engine runs its steps) and its replays timed with
CUDA events; the kernels of one replay listed by torch.profiler, longest first.

    python benchmarks/decode_head_fusion.py [--batches 1,32] [--kernels 6]
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import torch
import torch.nn.functional as F
from cuda_timing import captured, longest_kernels, mean_ms

STAGES = ((32, 128), (64, 64), (160, 32), (256, 16))  # (channels, side) of each stage output
HIDDEN, CLASSES, OUT = 256, 150, 128
REPLAYS = 50


def layout(t: torch.Tensor) -> str:
    if t.is_contiguous(memory_format=torch.channels_last) and not t.is_contiguous():
        return "NHWC"
    return "NCHW" if t.is_contiguous() else f"strides {t.stride()}"


def linear_as_module(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return F.linear(x, w, b)  # eager: a transposed 3-D input is copied, multiplied, and the bias added after


def linear_addmm(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    flat = x.reshape(-1, x.shape[-1])  # a copy where x is a transposed view
    return torch.addmm(b, flat, w.t()).view(*x.shape[:-1], w.shape[0])  # the bias in the GEMM's epilogue


LINEARS = {"F.linear": linear_as_module, "addmm of the reshaped tokens": linear_addmm}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", default="1,32")
    parser.add_argument("--kernels", type=int, default=6)
    args = parser.parse_args()
    torch.manual_seed(0)
    half = {"device": "cuda", "dtype": torch.half}
    weights = [(torch.randn(HIDDEN, c, **half) / c**0.5, torch.randn(HIDDEN, **half)) for c, _ in STAGES]
    fuse = torch.randn(HIDDEN, 4 * HIDDEN, 1, 1, **half).div(32).to(memory_format=torch.channels_last)
    fuse_bias = torch.randn(HIDDEN, **half)
    classifier = torch.randn(CLASSES, HIDDEN, 1, 1, **half).div(16).to(memory_format=torch.channels_last)
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}")
    for batch in (int(b) for b in args.batches.split(",")):
        stages = [torch.randn(batch, c, side, side, **half) for c, side in STAGES]  # NCHW, as `.contiguous()` makes

        def maps(linear: Callable[..., torch.Tensor], stages: list[torch.Tensor] = stages,
                 batch: int = batch) -> list[torch.Tensor]:
            out = []
            for x, (w, b), (_, side) in zip(stages, weights, STAGES, strict=True):
                tokens = linear(x.flatten(2).transpose(1, 2), w, b)
                out.append(tokens.permute(0, 2, 1).reshape(batch, HIDDEN, side, side))
            return out

        made = [m.clone() for m in maps(linear_as_module)]  # the projected maps as the head makes them

        def upsample_cat(*m: torch.Tensor) -> torch.Tensor:
            ups = [F.interpolate(t, size=(OUT, OUT), mode="bilinear", align_corners=False) for t in m]
            return torch.cat(ups[::-1], dim=1)

        def upsample_cat_nchw(*m: torch.Tensor) -> torch.Tensor:
            return upsample_cat(*m).contiguous()

        def head(linear: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
            def run(*s: torch.Tensor) -> torch.Tensor:
                return upsample_cat(*maps(linear, list(s)))
            return run

        def whole(*s: torch.Tensor) -> torch.Tensor:
            x = F.relu(F.conv2d(head(linear_as_module)(*s), fuse, fuse_bias))
            return F.conv2d(x, classifier)

        candidates: list[tuple[str, Callable[..., torch.Tensor], list[torch.Tensor]]] = [
            ("upsample + cat, eager (the engine's steps)", upsample_cat, made),
            ("upsample + cat, Inductor", torch.compile(upsample_cat, dynamic=False, fullgraph=True), made),
            ("upsample + cat, Inductor, NCHW output",
             torch.compile(upsample_cat_nchw, dynamic=False, fullgraph=True), made),
        ]
        for word, linear in LINEARS.items():
            candidates.append((f"linears ({word}) + upsample + cat, eager", head(linear), stages))
            candidates.append((f"linears ({word}) + upsample + cat, Inductor",
                               torch.compile(head(linear), dynamic=False, fullgraph=True), stages))
        candidates.append(("whole head to the classifier, eager", whole, stages))
        candidates.append(("whole head to the classifier, Inductor",
                           torch.compile(whole, dynamic=False, fullgraph=True), stages))
        for word, linear in LINEARS.items():
            for x, (w, b), (c, side) in zip(stages, weights, STAGES, strict=True):
                tokens = x.flatten(2).transpose(1, 2)
                candidates.append((f"linear {c}->{HIDDEN} at {side}x{side}, {word}, eager",
                                   lambda t, w=w, b=b, linear=linear: linear(t, w, b), [tokens]))
        with torch.no_grad():
            reference = upsample_cat(*made)
            for name, fn, inputs in candidates:
                try:
                    out = fn(*inputs)
                    replay = captured(lambda fn=fn, inputs=inputs: fn(*inputs))
                    ms = mean_ms(replay, REPLAYS)
                except Exception as exc:  # noqa: BLE001  (a candidate that fails is reported, the others go on)
                    print(f"batch {batch:2d}  {name}: failed: {type(exc).__name__}: {str(exc)[:200]}")
                    continue
                agree = ""
                if out.shape == reference.shape:
                    agree = f", max diff to eager {float((out.float() - reference.float()).abs().max()):.3g}"
                print(f"batch {batch:2d}  {ms:8.4f} ms  {name}: output {layout(out)}{agree}")
                for us, kernel in longest_kernels(replay, args.kernels):
                    print(f"              {us:9.1f} us  {kernel[:110]}")


if __name__ == "__main__":
    main()
