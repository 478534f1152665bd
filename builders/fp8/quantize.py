"""The activation quantize as one Triton kernel: scale, saturate to the e4m3 range, cast to FP8, in a single pass
that also writes the layout the FP8 kernel reads (channels-last or contiguous) from an input of any strides.

Its arithmetic is `builders.fp8.quantizer.quantize`'s (ONNX's QuantizeLinear with the product in fp32,
saturated, cast to e4m3 rounding to nearest even, NaN kept), so its output holds the eager kernels' values (which
`make_quantizer` checks on the GPU before using it). Triton keeps compiled kernels in its own cache folder
(`TRITON_CACHE_DIR`, by default under the home folder), so a later process loads them instead of compiling: the
reason for a hand-written kernel where `torch.compile` would trace and guard the same function again in every
process.

Imports Triton; import this module only where a CUDA GPU is in use.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from builders.fp8.format import E4M3_MAX, FP8

BLOCK = 1024
RANK = 4  # dimensions the kernel indexes: tensors of fewer are padded with leading dimensions of 1


@triton.jit(do_not_specialize=["numel", "size1", "size2", "size3", "stride0", "stride1", "stride2", "stride3"])
def quantize_e4m3_kernel(x_ptr, inverse_ptr, y_ptr, numel, size1, size2, size3, stride0, stride1, stride2, stride3,
                         BLOCK: tl.constexpr, SAME_LAYOUT: tl.constexpr, LIMIT: tl.constexpr):
    """y (dense, in the order of its own dimensions size0..size3) = e4m3(clamp(x * inverse)); x read through its
    strides, given in the order of y's dimensions; where SAME_LAYOUT, x is laid out as y and read at y's offsets.
    Offsets are 32-bit (the caller sees to it that they fit)."""
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < numel
    if SAME_LAYOUT:
        source = offsets
    else:
        i3 = offsets % size3
        rest = offsets // size3
        i2 = rest % size2
        rest = rest // size2
        source = (rest // size1) * stride0 + (rest % size1) * stride1 + i2 * stride2 + i3 * stride3
    scaled = tl.load(x_ptr + source, mask=mask).to(tl.float32) * tl.load(inverse_ptr)
    saturated = tl.clamp(scaled, -LIMIT, LIMIT, propagate_nan=tl.PropagateNan.ALL)
    tl.store(y_ptr + offsets, saturated.to(tl.float8e4nv), mask=mask)


def quantize_triton(x: torch.Tensor, inverse_scale: torch.Tensor, channels_last: bool) -> torch.Tensor:
    """`builders.fp8.quantizer.quantize` in one kernel: x (fp16, bf16 or fp32, on the GPU) scaled by the
    0-dimensional fp32 `inverse_scale`, saturated and cast to e4m3, written channels-last where asked (4-D x) else
    contiguous.
    ValueError for more than four dimensions or offsets past 32 bits (the caller then runs the eager kernels)."""
    numel = x.numel()
    span = max(numel, 1 + sum((n - 1) * abs(s) for n, s in zip(x.shape, x.stride(), strict=True)))
    if x.dim() > RANK or span >= 2**31:
        raise ValueError(f"the Triton quantize takes up to {RANK} dimensions and 32-bit offsets")
    layout = torch.channels_last if channels_last and x.dim() == 4 else torch.contiguous_format
    y = torch.empty_like(x, dtype=FP8, memory_format=layout)
    if numel == 0:
        return y
    order = sorted(range(x.dim()), key=lambda d: -int(y.stride(d)))  # y's dimensions, outermost first
    sizes = [1] * (RANK - x.dim()) + [x.shape[d] for d in order]
    strides = [0] * (RANK - x.dim()) + [x.stride(d) for d in order]
    same = all(x.stride(d) == y.stride(d) for d in range(x.dim()) if x.shape[d] > 1)  # size-1 strides are free
    quantize_e4m3_kernel[(triton.cdiv(numel, BLOCK),)](
        x, inverse_scale, y, numel, *sizes[1:], *strides, BLOCK=BLOCK, SAME_LAYOUT=same, LIMIT=E4M3_MAX)
    return y
