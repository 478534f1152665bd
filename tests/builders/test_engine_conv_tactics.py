"""A convolution's tactics from other libraries than cuDNN, on the CPU: which convolutions may run as a cuBLASLt GEMM
or ATen's depthwise dispatch, and that each computes what `F.conv2d` with the graph's epilogue computes (fp32, fp16,
and FP8 through torch._scaled_mm against the convolution of the dequantized operands)."""

from __future__ import annotations

import dataclasses

import pytest
import torch
import torch.nn.functional as F

from builders.engine.conv_tactics import (
    depthwise_eligible,
    gemm_eligible,
    gemm_rows,
    library_conv,
    nhwc_strides,
    offered,
)
from builders.engine.kernels import ConvSignature
from builders.engine.tactics import CUBLASLT, PYTORCH, PYTORCH_NCHW
from builders.fp8.format import FP8, amax_scale, quantize_weight, scale_from_amax
from builders.fp8.quantizer import Quantizer, quantize

POINTWISE = ConvSignature("fp16", (2, 32, 5, 7), 48, (1, 1), (1, 1), (0, 0), (1, 1), 1, (), False)
DEPTHWISE = ConvSignature("fp16", (2, 32, 9, 9), 32, (7, 7), (1, 1), (3, 3), (1, 1), 32, (), False)


def eager_quantizer() -> Quantizer:
    return Quantizer(quantize, "eager PyTorch")


def _with(sig: ConvSignature, **changes: object) -> ConvSignature:
    return dataclasses.replace(sig, **changes)  # type: ignore[arg-type]


@pytest.mark.parametrize("sig, word", [
    (_with(POINTWISE, kernel=(3, 3)), "kernel"),
    (_with(POINTWISE, stride=(2, 2)), "stride"),
    (_with(POINTWISE, padding=(1, 1)), "padding"),
    (_with(POINTWISE, dilation=(2, 2)), "dilation"),
    (_with(POINTWISE, groups=2), "groups"),
    (_with(POINTWISE, groups=32, out_channels=32), "groups"),  # depthwise 1x1
    (_with(POINTWISE, precision="fp8", input_shape=(2, 24, 5, 7)), "divisible by 16"),
    (_with(POINTWISE, precision="fp8", out_channels=40), "divisible by 16"),
])
def test_convolutions_that_are_not_gemms(sig, word):
    reason = gemm_eligible(sig)
    assert reason is not None and word in reason
    assert CUBLASLT not in offered(sig, 4)


def test_a_non_channels_last_input_is_not_a_gemm():
    nchw = torch.empty(POINTWISE.input_shape).stride()
    assert "channels-last" in str(gemm_eligible(POINTWISE, nchw))
    assert gemm_eligible(POINTWISE, nhwc_strides(POINTWISE.input_shape)) is None
    with pytest.raises(ValueError, match="channels-last"):
        gemm_rows(torch.randn(POINTWISE.input_shape))


@pytest.mark.parametrize("sig", [POINTWISE, _with(POINTWISE, input_shape=(2, 24, 5, 7)),  # fp16 takes any width
                                 _with(POINTWISE, precision="fp8"), _with(POINTWISE, epilogue=("add", "relu"))])
def test_1x1_convolutions_are_gemms(sig):
    assert gemm_eligible(sig) is None
    assert offered(sig, 4) == (CUBLASLT,)
    assert offered(sig, 1) == ()  # --opt-level 0: cuDNN's first plan only


def test_depthwise_convolutions_in_fp16_take_pytorchs_kernel():
    assert depthwise_eligible(DEPTHWISE) is None and offered(DEPTHWISE, 2) == (PYTORCH, PYTORCH_NCHW)
    assert "FP8" in str(depthwise_eligible(_with(DEPTHWISE, precision="fp8")))
    assert "not depthwise" in str(depthwise_eligible(_with(DEPTHWISE, groups=8)))
    assert "not depthwise" in str(depthwise_eligible(POINTWISE))


def test_the_gemm_reads_the_channels_last_tensor_without_a_copy():
    x = torch.randn(POINTWISE.input_shape).contiguous(memory_format=torch.channels_last)
    rows = gemm_rows(x)
    assert rows.shape == (2 * 5 * 7, 32) and rows.data_ptr() == x.data_ptr() and rows.is_contiguous()


def _reference(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, sig: ConvSignature,
               residual: torch.Tensor | None) -> torch.Tensor:
    y = F.conv2d(x, weight, bias, sig.stride, sig.padding, sig.dilation, sig.groups)
    for word in sig.epilogue:
        y = y + residual if word == "add" else torch.relu(y)
    return y


@pytest.mark.parametrize("library, sig", [(CUBLASLT, POINTWISE), (PYTORCH, DEPTHWISE), (PYTORCH_NCHW, DEPTHWISE),
                                          (PYTORCH, _with(DEPTHWISE, stride=(2, 2), dilation=(2, 2), padding=(6, 6))),
                                          (PYTORCH_NCHW, _with(DEPTHWISE, stride=(2, 2), dilation=(2, 2),
                                                               padding=(6, 6)))])
@pytest.mark.parametrize("dtype, tolerance", [(torch.float32, 1e-5), (torch.float16, 3e-2)])
@pytest.mark.parametrize("epilogue", [(), ("relu",), ("add", "relu")])
def test_each_tactic_computes_the_convolution_and_its_epilogue(library, sig, dtype, tolerance, epilogue):
    sig = _with(sig, epilogue=epilogue)
    torch.manual_seed(0)
    weight = torch.randn(sig.out_channels, sig.input_shape[1] // sig.groups, *sig.kernel) * 0.2
    bias = torch.randn(sig.out_channels)
    x = torch.randn(sig.input_shape)
    residual = torch.randn(sig.output_shape()) if "add" in epilogue else None
    run = library_conv(library, sig, weight, bias, None, None, None, eager_quantizer, dtype)
    out = run(x.to(dtype), residual.to(dtype) if residual is not None else None)
    assert out.shape == sig.output_shape() and out.dtype == dtype
    assert out.is_contiguous(memory_format=torch.channels_last)
    torch.testing.assert_close(out.float(), _reference(x, weight, bias, sig, residual), atol=tolerance, rtol=tolerance)


@dataclasses.dataclass
class Fp8Case:
    """An FP8 1x1 convolution with a residual add and ReLU: its operands as the engine holds them (FP8 input with its
    scale, per-output-channel weight scales) and the reference, `F.conv2d` of the dequantized operands in fp32."""

    sig: ConvSignature
    weight: torch.Tensor
    bias: torch.Tensor
    x8: torch.Tensor
    x_scale: float
    w_scale: torch.Tensor
    residual: torch.Tensor
    reference: torch.Tensor


def fp8_case() -> Fp8Case:
    sig = _with(POINTWISE, precision="fp8", epilogue=("add", "relu"))
    torch.manual_seed(1)
    k = sig.out_channels
    weight = torch.randn(k, 32, 1, 1) * torch.linspace(0.05, 1.0, k).reshape(-1, 1, 1, 1)  # channels' ranges differ
    bias = torch.randn(k)
    x = torch.randn(sig.input_shape) * 3
    x_scale = scale_from_amax(float(x.abs().max()))
    x8 = quantize(x, torch.tensor(1.0 / x_scale), True)
    w_scale = amax_scale(weight.abs().amax(dim=(1, 2, 3)))
    residual = torch.randn(sig.output_shape()).half().contiguous(memory_format=torch.channels_last)
    dequantized_w = quantize_weight(weight, w_scale.reshape(-1, 1, 1, 1)).float() * w_scale.reshape(-1, 1, 1, 1)
    reference = _reference(x8.float() * x_scale, dequantized_w, bias.half().float(), sig, residual.float())
    return Fp8Case(sig, weight, bias, x8, x_scale, w_scale, residual, reference)


def test_the_fp8_gemm_computes_the_convolution_of_the_dequantized_operands():
    case = fp8_case()
    run = library_conv(CUBLASLT, case.sig, case.weight, case.bias, case.x_scale, case.w_scale, None, eager_quantizer)
    out = run(case.x8, case.residual)
    assert out.dtype == torch.float16 and out.shape == case.sig.output_shape()
    assert "torch._scaled_mm" in run.path and "rowwise" in run.path
    torch.testing.assert_close(out.float(), case.reference, atol=2e-2, rtol=1e-2)


def test_the_fp8_gemm_writes_fp8_with_its_readers_scale():
    case = fp8_case()
    out_scale = scale_from_amax(float(case.reference.abs().max()))
    run = library_conv(CUBLASLT, _with(case.sig, output_fp8=True), case.weight, case.bias, case.x_scale,
                       case.w_scale, out_scale, eager_quantizer)
    out = run(case.x8, case.residual)
    expected = quantize(case.reference, torch.tensor(1.0 / out_scale), True)
    assert out.dtype == expected.dtype == FP8 and out.is_contiguous(memory_format=torch.channels_last)
    steps = (out.float() - expected.float()).abs() / expected.float().abs().clamp(min=2.0**-6)
    assert steps.max() <= 0.125  # at most one e4m3 step (3 mantissa bits) from the reference's rounding
    assert (out.float() != expected.float()).float().mean() < 0.05  # and nearly every value the same


def test_a_tactic_a_convolution_cannot_take_is_refused():
    case = fp8_case()
    with pytest.raises(ValueError, match="scales"):
        library_conv(CUBLASLT, case.sig, case.weight, case.bias, None, None, None, eager_quantizer)
    with pytest.raises(ValueError, match="divisible by 16"):
        library_conv(CUBLASLT, _with(case.sig, out_channels=40), case.weight[:40], case.bias[:40], case.x_scale,
                     case.w_scale[:40], None, eager_quantizer)
    with pytest.raises(ValueError, match="FP8"):
        library_conv(PYTORCH, _with(DEPTHWISE, precision="fp8"), case.weight, case.bias, case.x_scale, case.w_scale,
                     None, eager_quantizer)


@pytest.mark.parametrize("captures", [True, False])
def test_a_tactic_is_timed_by_its_captured_graphs_replays_and_is_no_tactic_where_it_does_not_capture(monkeypatch,
                                                                                                      captures):
    """`time_captured` times the replay of the graph `capture_graph` made (one launch, whatever the tactic enqueues
    from Python); where capture fails it raises, so that the tactic is not offered (no eager time in its place)."""
    from builders.backend import TimingStep
    from builders.engine import kernels
    from builders.pytorch.graph_capture import Captured

    timed: list[str] = []

    def capture(forward, eager):
        forward()  # the tactic itself, run once on a side stream, then captured
        step = TimingStep(lambda: timed.append("replay"), True) if captures else TimingStep(eager, False, "no capture")
        return Captured(step, None, None)

    def time_execution(run):
        run()
        return 7.0

    monkeypatch.setattr(kernels, "capture_graph", capture)
    monkeypatch.setattr(kernels, "time_execution", time_execution)
    if captures:
        assert kernels.time_captured(lambda: timed.append("tactic")) == 7.0
        assert timed == ["tactic", "replay"]
    else:
        with pytest.raises(RuntimeError, match="no capture"):
            kernels.time_captured(lambda: timed.append("tactic"))


def test_a_library_tactic_is_timed_as_the_engine_runs_it(monkeypatch):
    """`time_library` hands `time_captured` the tactic bound to its scratch tensors (on the CPU here: the timer stands
    in), and its time is the timer's."""
    from builders.engine import conv_tactics

    ran: list[torch.Tensor] = []
    monkeypatch.setattr(conv_tactics, "time_captured", lambda run: (ran.append(run()), 4.0)[1])
    assert conv_tactics.time_library(CUBLASLT, POINTWISE, eager_quantizer, "cpu") == 4.0
    (out,) = ran
    assert out.shape == POINTWISE.output_shape() and out.dtype == torch.float16
