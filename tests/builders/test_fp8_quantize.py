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

from builders.fp8.format import E4M3_MAX
from builders.fp8.quantizer import agrees_with_eager, quantize, same_values

pytest.importorskip("triton")


@pytest.fixture
def interpreted(monkeypatch):
    """builders.fp8.quantize with its kernel run by Triton's interpreter; the compiled module is restored after."""
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    sys.modules.pop("builders.fp8.quantize", None)
    module = importlib.import_module("builders.fp8.quantize")
    yield module
    sys.modules.pop("builders.fp8.quantize", None)


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


def test_an_empty_tensor_launches_nothing(interpreted, monkeypatch):
    monkeypatch.setattr(interpreted, "quantize_e4m3_kernel", None)  # a launch would fail: None is not subscriptable
    x = torch.empty(0, 16, 4, 4, dtype=torch.float16)
    y = interpreted.quantize_triton(x, torch.tensor(1.0), True)
    assert y.shape == x.shape and y.dtype == torch.float8_e4m3fn


@pytest.mark.parametrize("x", [
    torch.empty(2, 3, 4, 5, 6, dtype=torch.float16, device="meta"),  # five dimensions
    torch.empty(2**16, 2**15 + 1, dtype=torch.float16, device="meta"),  # offsets past 32 bits
])
def test_what_the_kernel_cannot_index_is_refused_before_anything_is_allocated(interpreted, monkeypatch, x):
    monkeypatch.setattr(torch, "empty_like", None)  # an allocation would fail with TypeError, not ValueError
    with pytest.raises(ValueError, match="32-bit offsets"):
        interpreted.quantize_triton(x, torch.tensor(1.0), True)


def _fp16_product(x: torch.Tensor, inverse: torch.Tensor, channels_last: bool) -> torch.Tensor:
    """The quantize rounded twice, to fp16 and then to e4m3 (PyTorch's eager arithmetic on a 0-dim scale)."""
    layout = torch.channels_last if channels_last and x.dim() == 4 else torch.contiguous_format
    return (x * inverse).clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn, memory_format=layout)


def test_the_eager_quantize_rounds_once_from_fp32_as_tensorrts_q():
    x = torch.randn(100_000, generator=torch.Generator().manual_seed(3)).to(torch.float16) * 3
    inverse = torch.tensor(1.7)
    once = (x.float() * 1.7).clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn)  # fp32 product, one rounding
    assert torch.equal(quantize(x, inverse, False).float(), once.float())
    assert not torch.equal(_fp16_product(x, inverse, False).float(), once.float())  # the two can be told apart
    assert quantize(torch.tensor(2.0, dtype=torch.float16), inverse, False).shape == ()


def _contiguous_always(x: torch.Tensor, inverse: torch.Tensor, channels_last: bool) -> torch.Tensor:
    return quantize(x, inverse, False)


def _nan_dropped(x: torch.Tensor, inverse: torch.Tensor, channels_last: bool) -> torch.Tensor:
    return quantize(x.nan_to_num(0.0), inverse, channels_last)


@pytest.mark.parametrize(("fused", "agrees"), [(quantize, True), (_fp16_product, False), (_contiguous_always, False),
                                               (_nan_dropped, False)])
def test_a_fused_quantize_is_used_only_where_it_gives_the_eager_values_and_layout(fused, agrees):
    assert agrees_with_eager(fused, "cpu") is agrees


@pytest.mark.parametrize("seed", range(12))
def test_the_check_rejects_a_quantize_that_rounds_twice_whatever_the_global_generator_drew(seed):
    """Its samples are its own: with random ones drawn from the global generator, 7 of 30 seeds let a quantize that
    rounds the product to fp16 first pass."""
    torch.manual_seed(seed)
    assert agrees_with_eager(_fp16_product, "cpu") is False


def test_same_values_puts_nan_against_nan_and_reads_no_sign_of_zero():
    a = torch.tensor([1.0, float("nan"), 0.0])
    assert same_values(a, torch.tensor([1.0, float("nan"), -0.0]))
    assert not same_values(a, torch.tensor([1.0, 0.0, 0.0]))
    assert not same_values(a, torch.tensor([1.0, float("nan"), 0.5]))


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


def test_a_call_the_fused_kernel_refuses_runs_the_eager_kernels_and_says_why():
    from builders.fp8.quantizer import _falling_back

    def refusing(x: torch.Tensor, inverse: torch.Tensor, channels_last: bool) -> torch.Tensor:
        raise ValueError("the Triton quantize takes up to 4 dimensions and 32-bit offsets")

    refused: list[str] = []
    x = _exact_inputs((2, 3, 4))
    out = _falling_back(refusing, refused)(x, torch.tensor(0.5), False)
    assert torch.equal(out.float(), quantize(x, torch.tensor(0.5), False).float())
    assert refused == ["(2, 3, 4): ValueError: the Triton quantize takes up to 4 dimensions and 32-bit offsets"]
