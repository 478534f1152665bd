"""The Triton quantize kernel's indexing, run by Triton's interpreter on the CPU against the eager kernels.

The interpreter emulates FP8 conversion inexactly (values between e4m3 steps, NaN), so the inputs here are values
whose scaled result e4m3 holds exactly, and values that saturate: what is checked is which element lands where (every
layout and stride pattern) and the scale and saturation; the cast itself is checked on the GPU by `make_quantizer`.
"""

from __future__ import annotations

import importlib
import sys

import pytest
import torch

from builders.fp8_kernels import E4M3_MAX, quantize

pytest.importorskip("triton")


@pytest.fixture
def interpreted(monkeypatch):
    """builders.fp8_quantize with its kernel run by Triton's interpreter; the compiled module is restored after."""
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    sys.modules.pop("builders.fp8_quantize", None)
    module = importlib.import_module("builders.fp8_quantize")
    yield module
    sys.modules.pop("builders.fp8_quantize", None)


def _exact_inputs(shape: tuple[int, ...]) -> torch.Tensor:
    """Even integers in [-32, 32] (halved: integers e4m3 holds exactly); two in every seven saturate."""
    generator = torch.Generator().manual_seed(len(shape))
    values = torch.randint(-16, 17, shape, generator=generator).to(torch.float16) * 2
    flat = values.view(-1)
    flat[::7], flat[3::7] = 4000.0, -4000.0
    return values


def _inputs() -> list[torch.Tensor]:
    base = _exact_inputs((3, 20, 5, 7))
    return [base, base.contiguous(memory_format=torch.channels_last), base[:, 3:17, 1:, ::2], base.transpose(2, 3),
            base[:1, :, :1, :1], _exact_inputs((1, 24, 1, 1)), _exact_inputs((6, 40)),
            _exact_inputs((2, 9, 16)).transpose(0, 1), _exact_inputs((11,))]


@pytest.mark.parametrize("channels_last", [True, False])
@pytest.mark.parametrize("index", range(9))
def test_each_element_lands_where_the_eager_kernels_put_it(interpreted, channels_last, index):
    x = _inputs()[index]
    inverse = torch.tensor(0.5)
    fused, reference = interpreted.quantize_triton(x, inverse, channels_last), quantize(x, inverse, channels_last)
    assert fused.dtype == torch.float8_e4m3fn and fused.shape == x.shape and fused.stride() == reference.stride()
    assert torch.equal(fused.float(), reference.float())
    assert fused.float().abs().max() == E4M3_MAX  # the saturating values were saturated, not turned to NaN


def test_an_empty_tensor_launches_nothing(interpreted):
    x = torch.empty(0, 16, 4, 4, dtype=torch.float16)
    assert interpreted.quantize_triton(x, torch.tensor(1.0), True).shape == x.shape


@pytest.mark.parametrize(("shape", "channels_last_input", "same"), [
    ((1, 24, 1, 1), False, True),  # pooled features: strides of size-1 dimensions differ, the layout does not
    ((2, 24, 5, 3), True, True),
    ((2, 24, 5, 3), False, False),  # NCHW into channels-last: read through strides
])
def test_the_single_pass_read_is_taken_wherever_the_layouts_agree(interpreted, monkeypatch, shape, channels_last_input,
                                                                  same):
    launched: list[bool] = []
    kernel = interpreted.quantize_e4m3_kernel

    class Recording:
        def __getitem__(self, grid):
            def launch(*args, **kwargs):
                launched.append(kwargs["SAME_LAYOUT"])
                return kernel[grid](*args, **kwargs)
            return launch

    monkeypatch.setattr(interpreted, "quantize_e4m3_kernel", Recording())
    x = _exact_inputs(shape)
    x = x.contiguous(memory_format=torch.channels_last) if channels_last_input else x
    assert torch.equal(interpreted.quantize_triton(x, torch.tensor(0.5), True).float(),
                       quantize(x, torch.tensor(0.5), True).float())
    assert launched == [same]
