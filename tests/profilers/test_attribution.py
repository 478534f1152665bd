from collections import Counter

from profilers import raw_trace
from profilers.attribution import (
    CALL_RANGE_PREFIX,
    KernelRecord,
    Launch,
    LayerIndex,
    Range,
    TraceRecords,
    attribute,
    summarize,
)
from sessions.documents import storage
from tests.conftest import H200


def kernel(corr, start=0, stream=7, name="k"):
    return KernelRecord(name=name, start=start, end=start + 10, correlation=corr, stream=stream)


def test_innermost_range_at_launch_time_wins():
    ranges = [
        Range(f"{CALL_RANGE_PREFIX}0", 1, 0, 1000),
        Range("(model)", 1, 5, 995),
        Range("layer1", 1, 10, 500),
        Range("layer1.conv", 1, 20, 100),
        Range("layer2", 1, 600, 900),
    ]
    launches = [Launch(1, 1, 50), Launch(2, 1, 200), Launch(3, 1, 700), Launch(4, 1, 950)]
    # kernels run much later than their launches: only the launch time may decide
    kernels = [kernel(c, start=5000 + c) for c in (1, 2, 3, 4)]
    result = attribute(kernels, launches, ranges)
    assert result.owners == ["layer1.conv", "layer1", "layer2", "(model)"]
    assert result.calls == [0, 0, 0, 0]


def test_ranges_of_other_threads_do_not_own_a_launch():
    ranges = [Range("a", 1, 0, 100), Range("b", 2, 0, 100)]
    result = attribute([kernel(1), kernel(2)], [Launch(1, 2, 50), Launch(2, 3, 50)], ranges)
    assert result.owners == ["b", None]


def test_unmatched_correlation_and_outside_launches_are_counted():
    ranges = [Range(f"{CALL_RANGE_PREFIX}0", 1, 0, 100), Range("conv", 1, 10, 20)]
    kernels = [kernel(1), kernel(2), kernel(99)]
    result = attribute(kernels, [Launch(1, 1, 15), Launch(2, 1, 500)], ranges)
    assert result.owners == ["conv", None, None]
    assert result.calls == [0, -1, -1]
    assert result.unmatched_launch == 1


def test_calls_are_numbered_in_time_order_and_streams_kept():
    ranges = [Range(f"{CALL_RANGE_PREFIX}{i}", 1, i * 100, i * 100 + 90) for i in range(3)]
    ranges += [Range("conv", 1, i * 100 + 10, i * 100 + 20) for i in range(3)]
    launches = [Launch(i, 1, i * 100 + 15) for i in range(3)]
    kernels = [kernel(i, stream=10 + i) for i in range(3)]
    records = TraceRecords("cupti", "kernel", 3, kernels, launches, ranges)
    table, summary = summarize(records, LayerIndex())
    assert table.call == [0, 1, 2]
    assert table.stream == [10, 11, 12]
    assert summary.per_call == 1 and summary.unattributed == 0 and not summary.note


def test_summary_reports_dropped_records_and_missing_calls():
    records = TraceRecords("cupti", "kernel", 2, [kernel(1)], [Launch(1, 1, 5)], [Range("a", 1, 0, 10)], dropped=17)
    _, summary = summarize(records, LayerIndex())
    assert summary.dropped == 17
    assert "expected 2 call ranges, found 0" in summary.note


def test_a_record_that_ends_before_it_starts_is_left_out_and_counted_as_dropped():
    """A kernel record the tracer never completed (end 0): not a negative duration in the session (which a session
    file may not hold), one more dropped record, and a note."""
    ranges = [Range(f"{CALL_RANGE_PREFIX}0", 1, 0, 100), Range("conv", 1, 10, 20)]
    kernels = [KernelRecord("k", 50, 60, 1), KernelRecord("k", 70, 0, 2)]
    records = TraceRecords("cupti", "kernel", 1, kernels, [Launch(1, 1, 15), Launch(2, 1, 16)], ranges, dropped=3)
    table, summary = summarize(records, LayerIndex())
    assert table.duration_ns == [10] and summary.records == 1 and summary.dropped == 4
    assert "1 kernel records ended before they started" in summary.note


def test_layer_time_is_own_kernel_time_per_call():
    ranges = [Range(f"{CALL_RANGE_PREFIX}{i}", 1, i * 100, i * 100 + 90) for i in range(2)]
    ranges += [Range("conv", 1, i * 100 + 10, i * 100 + 20) for i in range(2)]
    kernels = [KernelRecord("k", 0, 3_000_000, 0), KernelRecord("k", 5, 1_000_005, 1)]
    records = TraceRecords("cupti", "kernel", 2, kernels, [Launch(0, 1, 15), Launch(1, 1, 115)], ranges)
    index = LayerIndex()
    summarize(records, index)
    (conv,) = index.layers
    assert conv.time_ms == 2.0  # (3 ms + 1 ms) / 2 calls


# --- real traces recorded on the H200 (benchmarks/h200_record.sh) ---------------------------


def test_real_senet154_trace_is_fully_attributed():
    records = raw_trace.load(H200 / "senet154-fp16.trace.json")
    assert records.tracer == "cupti" and records.dropped == 0
    result = attribute(records.kernels, records.launches, records.ranges)
    assert result.unmatched_launch == 0
    assert all(owner is not None for owner in result.owners)
    counts = Counter(result.owners)
    # cuDNN lowers the 64-group 3x3 convolution of the first block into one kernel per group
    assert counts["layer1.0.conv2"] == 64
    # a squeeze-excitation block: its mean lands in the parent, the 1x1 convolutions in fc1 / fc2
    assert counts["layer1.0.se"] >= 1 and counts["layer1.0.se.fc1"] >= 1 and counts["layer1.0.se.fc2"] >= 1


def test_real_trace_agrees_with_the_session_written_from_it():
    records = raw_trace.load(H200 / "senet154-fp16.trace.json")
    table, summary = summarize(records, LayerIndex())
    session_variant = storage.load(H200 / "senet154-h200.json").variant("fp16")
    assert summary.records == session_variant.trace.records == len(records.kernels)
    ours = Counter(table.layer)
    per_layer = {index: count for index, count in ours.items()}
    session_counts = Counter(session_variant.kernels.layer)
    by_name_session = {session_variant.layers[i].name: n for i, n in session_counts.items()}
    index = LayerIndex()
    summarize(records, index)
    by_name_ours = {index.layers[i].name: n for i, n in per_layer.items()}
    assert by_name_ours == by_name_session


def test_cupti_and_torch_profiler_count_the_same_kernels():
    cupti = storage.load(H200 / "senet154-h200.json").variant("fp16").trace
    torch_profiler = storage.load(H200 / "senet154-h200-torchprof.json").variant("fp16").trace
    assert (cupti.tracer, torch_profiler.tracer) == ("cupti", "torch-profiler")
    assert cupti.records == torch_profiler.records
    assert cupti.unattributed == torch_profiler.unattributed == 0


def test_real_fp8_trace_puts_quantize_kernels_in_quantizers():
    records = raw_trace.load(H200 / "resnet18-fp8-all.trace.json")
    result = attribute(records.kernels, records.launches, records.ranges)
    fake_quant = Counter(owner for k, owner in zip(records.kernels, result.owners, strict=False)
                         if "fake_e4m3fy" in k.name)
    # one ModelOpt fake-quant kernel per enabled quantizer (19 convolutions after the stem, input + weight)
    assert len(fake_quant) == 38
    assert set(fake_quant.values()) == {1}
    assert all(owner.endswith(("input_quantizer", "weight_quantizer")) for owner in fake_quant)
