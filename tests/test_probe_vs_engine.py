"""benchmarks/probe_vs_engine.py pairs the engine's layers with the probe's of the same name and precision, and says
which lie within 15 %: on hand-made sessions whose ratios the test states."""

from __future__ import annotations

import pytest

from benchmarks.probe_vs_engine import pair, summary, traced_summary
from sessions.documents.model import Environment, Layer, Session, Study, TimingMethod, TraceSummary, Variant
from sessions.reports.probe_summary import FP8_VARIANT, FP16_VARIANT


def session(*variants: Variant) -> Session:
    made = Session(study=Study("m", "timm", [3, 8, 8], 1, ["trt-inspect"], "2026-01-01T00:00:00+00:00", "cudnn",
                               "cuda", "0.1.0"),
                   environment=Environment("host", "linux", "cpu", 2, "3.12", {}),
                   method=TimingMethod("cuda-events", "whole", True, 0.2, 5, 20, True, False, True, "", ""))
    made.variants = list(variants)
    return made


def layer(name: str, op: str, ms: float, precision: str = "fp16", epilogue: tuple[str, ...] = (),
          fp8_out: bool = False, traced: float | None = None) -> Layer:
    attrs: dict = {"epilogue": list(epilogue)}
    if traced is not None:
        attrs["traced_kernel_ms"] = traced
    if fp8_out:
        attrs["output"] = "fp8 (quantized with b's input scale)"
    return Layer(name, "k", op, ms, precision=precision, attrs=attrs)  # type: ignore[arg-type]


ENGINE = session(
    Variant("fp16", "torch", "fp16", "cuda", layers=[layer("a", "conv", 0.010)]),  # PyTorch's: not the engine
    Variant("cudnn-fp16", "cudnn", "fp16", "cuda", layers=[
        layer("a", "conv", 0.010, epilogue=("relu",)), layer("pool", "pooling", 0.001), layer("b", "conv", 0.020),
        layer("fc", "linear", 0.005)]),
    Variant("cudnn-fp8-all", "cudnn", "fp8", "cuda", layers=[
        layer("a.input_quantizer", "quantize", 0.002, "fp8"), layer("a", "conv", 0.008, "fp8", fp8_out=True),
        layer("b", "conv", 0.020), layer("c", "conv", 0.005, "fp8"), layer("fc.input_quantizer", "quantize", 0.001,
                                                                          "fp8"),
        layer("fc", "linear", 0.004, "fp8")]))
PROBE = session(
    Variant(FP16_VARIANT, "torch", "fp16", "cuda", layers=[
        layer("a", "conv", 0.0105), layer("b", "conv", 0.030), layer("fc", "linear", 0.005)]),
    Variant(FP8_VARIANT, "torch", "fp8", "cuda", layers=[
        layer("a.input_quantizer", "quantize", 0.0021, "fp8"), layer("a", "conv", 0.0085, "fp8"),
        layer("b", "conv", 0.030), layer("c", "conv", 0.009), layer("fc", "linear", 0.0047, "fp8")]))


def test_each_layer_pairs_with_the_probes_of_its_name_and_precision():
    """b runs fp16 in the engine's FP8 variant, c has no FP8 kernel in the probe: neither pairs in FP8."""
    rows = pair(ENGINE, PROBE)
    assert [(r.layer, r.precision) for r in rows] == [("a", "fp16"), ("b", "fp16"), ("fc", "fp16"),
                                                      ("a.input_quantizer", "quantize"), ("a", "fp8"), ("fc", "fp8")]
    assert [r.ratio for r in rows] == pytest.approx([1.05, 1.5, 1.0, 1.05, 1.0625, 1.175])
    assert [r.within for r in rows] == [True, False, True, True, True, False]
    assert [r.epilogue for r in rows] == ["relu", "-", "-", "-", "fp8 out", "-"]
    assert [r.plain for r in rows] == [False, True, True, True, False, True]


def test_the_summary_counts_the_layers_within_15_percent():
    rows = pair(ENGINE, PROBE)
    assert summary(rows, "fp16").startswith("fp16: 2 of 3 layers within 15%; median probe / engine 1.05")
    assert summary(rows, "fp16", plain_only=True).startswith("fp16 (no epilogue): 1 of 2 layers within 15%")
    assert summary(rows, "fp8").endswith("sums 0.013 / 0.012 ms = 1.10")
    assert summary([], "fp8") == "fp8: no layer"


def test_the_traced_kernel_times_are_counted_apart_and_layers_without_one_are_left_out():
    probe = session(
        Variant(FP16_VARIANT, "torch", "fp16", "cuda", layers=[
            layer("a", "conv", 0.008, traced=0.0114), layer("b", "conv", 0.030, traced=0.024), layer("fc", "linear",
                                                                                                  0.005)]),
        Variant(FP8_VARIANT, "torch", "fp8", "cuda", layers=[layer("a", "conv", 0.0085, "fp8", traced=0.0090)]))
    rows = pair(ENGINE, probe)
    assert [r.traced_within for r in rows] == [True, False, None, True]  # 1.14, 1.2; fc untraced; 1.125
    assert traced_summary(rows).endswith(": 2 of 3 within 15% (fp16 1 of 2, fp8 1 of 1, quantize 0 of 0)")


def test_a_probe_that_times_layers_by_their_traced_kernels_is_compared_by_its_own_times():
    timed = layer("a", "conv", 0.0112)
    timed.attrs["isolated"] = {"ms": 0.008}  # the isolated figure kept beside the traced time
    fp16 = Variant(FP16_VARIANT, "torch", "fp16", "cuda", layers=[timed])
    fp16.trace = TraceSummary(tracer="cupti", unit="kernel", calls=7, records=1, unattributed=0, dropped=0)
    probe = session(fp16, Variant(FP8_VARIANT, "torch", "fp8", "cuda", layers=[]))
    (row,) = pair(ENGINE, probe)
    assert row.probe_ms == row.probe_traced_ms == pytest.approx(0.0112) and row.within and row.traced_within
    fp16.trace = None  # an untraced variant: its times are the isolated ones, none of them traced
    (row,) = pair(ENGINE, probe)
    assert row.probe_traced_ms is None and row.traced_within is None
