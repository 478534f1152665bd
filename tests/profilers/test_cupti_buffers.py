"""libcupti's buffers read in bulk (profilers.cupti_buffers): every record of a wanted kind decoded with its layout,
in order, names read from the C strings they point to; what cannot be read is said, never decoded wrongly."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from profilers import kernel_trace
from profilers.cupti_buffers import ActivityBuffers
from sessions.documents.errors import MissingEnvironment
from tests.fake_cupti import DTYPES, KERNEL_DTYPE, Activity, ActivityKind, FakeCupti


def reader(fake: FakeCupti, dtypes=None) -> tuple[ActivityBuffers, list[tuple[int, list[dict]]]]:
    """A reader on the fake library whose handler keeps each batch as plain values (names read while live)."""
    got: list[tuple[int, list[dict]]] = []

    def handler(kind, records, strings) -> None:
        names = strings(records["name"]) if "name" in records.dtype.names else [None] * len(records)
        got.append((kind, [dict(zip(records.dtype.names, row.tolist(), strict=True)) | {"text": name}
                           for row, name in zip(records, names, strict=True)]))

    buffers = ActivityBuffers(fake.library(), {int(k): d for k, d in (dtypes or DTYPES).items()})
    assert buffers.register(handler) == 0
    return buffers, got


def kernel(name: str, start: int) -> Activity:
    return Activity(ActivityKind.CONCURRENT_KERNEL, name=name, start=start, end=start + 5, correlation_id=start,
                    grid_x=3, block_x=64)


def test_each_kind_arrives_as_one_batch_in_buffer_order_with_its_names() -> None:
    fake = FakeCupti()
    buffers, got = reader(fake)
    marker = Activity(ActivityKind.MARKER, name="layer1", flags_=2, id=9, timestamp=40)
    launch = Activity(ActivityKind.RUNTIME, correlation_id=7, thread_id=11, cbid=4, start=30)
    fake.hand_back([kernel("a", 100), marker, launch, kernel("b", 200), Activity(ActivityKind.MARKER, flags_=4, id=9)])
    assert buffers.errors == []
    by_kind = dict(got)
    kernels = by_kind[ActivityKind.CONCURRENT_KERNEL]
    assert [(r["text"], r["start"], r["end"], r["grid_x"], r["block_x"]) for r in kernels] \
        == [("a", 100, 105, 3, 64), ("b", 200, 205, 3, 64)]
    assert [(r["text"], r["id"], r["flags_"], r["timestamp"]) for r in by_kind[ActivityKind.MARKER]] \
        == [("layer1", 9, 2, 40), ("", 9, 4, 0)]
    assert [(r["correlation_id"], r["thread_id"], r["cbid"], r["start"]) for r in by_kind[ActivityKind.RUNTIME]] \
        == [(7, 11, 4, 30)]


def test_kinds_without_a_layout_are_skipped() -> None:
    fake = FakeCupti()
    buffers, got = reader(fake, {ActivityKind.CONCURRENT_KERNEL: KERNEL_DTYPE})
    fake.hand_back([kernel("a", 1), Activity(ActivityKind.RUNTIME, correlation_id=2, cbid=4)])
    assert [kind for kind, _ in got] == [ActivityKind.CONCURRENT_KERNEL] and buffers.errors == []


def test_records_shorter_than_their_layout_are_not_decoded_and_say_so() -> None:
    fake = FakeCupti()
    longer = np.dtype(KERNEL_DTYPE.descr + [("added_by_a_newer_layout", "<u8", (4,))])
    buffers, got = reader(fake, {ActivityKind.CONCURRENT_KERNEL: longer})
    fake.hand_back([kernel("a", 1), kernel("b", 2)])
    assert got == []
    assert len(buffers.errors) == 1 and "shorter than the" in buffers.errors[0]


def test_a_handler_failure_is_kept_not_lost_in_cuptis_thread() -> None:
    fake = FakeCupti()

    def failing(kind, records, strings) -> None:
        raise ValueError("broken handler")

    buffers = ActivityBuffers(fake.library(), {int(k): d for k, d in DTYPES.items()})
    buffers.register(failing)
    fake.hand_back([kernel("a", 1)])
    assert buffers.errors == ["ValueError: broken handler"]


def test_a_trace_whose_records_could_not_be_read_fails_with_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeCupti()
    fake.install(monkeypatch)
    monkeypatch.setattr(kernel_trace.CuptiTracer, "_records", lambda *args: (_ for _ in ()).throw(KeyError("x")))
    with pytest.raises(MissingEnvironment, match="CUPTI's records could not be read: KeyError"):
        kernel_trace.trace(fake.run_once, 1, lambda: None)


def test_the_tracer_keeps_every_kernel_launch_and_range_across_buffers(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeCupti(layers=("conv1", "relu", "fc"))
    fake.install(monkeypatch)
    tracer = kernel_trace.CuptiTracer()
    tracer.start()
    fake.run_once()
    fake._flush(1)  # a first buffer, as when one fills mid-trace
    fake.run_once()
    tracer.stop()
    assert [k.name for k in tracer.kernels] == ["conv1_kernel", "relu_kernel", "fc_kernel"] * 2
    assert [k.correlation for k in tracer.kernels] == fake.launch_correlations
    emitted = [a for a in fake.delivered if a.kind == ActivityKind.CONCURRENT_KERNEL]
    assert [(k.start, k.end, k.stream, k.grid, k.block) for k in tracer.kernels] == [
        (a.start, a.end, a.stream_id, (a.grid_x, a.grid_y, a.grid_z), (a.block_x, a.block_y, a.block_z))
        for a in emitted]
    assert sorted(launch.correlation for launch in tracer.launches) == sorted(fake.launch_correlations)
    assert [r.name for r in tracer.ranges] == ["conv1", "relu", "fc", "trt-inspect/call/0",
                                               "conv1", "relu", "fc", "trt-inspect/call/1"]
    assert tracer.open_markers == {}


def test_a_walk_cupti_ends_with_an_error_keeps_the_records_before_it_and_says_so() -> None:
    fake = FakeCupti(walk_stops_after=1, walk_status=21)  # CUPTI_ERROR_INVALID_KIND after the first record
    buffers, got = reader(fake)
    fake.hand_back([kernel("a", 1), kernel("b", 2)])
    assert [r["text"] for _, batch in got for r in batch] == ["a"]
    assert buffers.errors == ["CUPTI stopped reading a buffer after 1 records (status 21)"]


def test_records_arriving_after_the_handlers_turn_are_dropped() -> None:
    fake = FakeCupti()
    buffers, got = reader(fake)
    assert buffers.release() == []
    fake.hand_back([kernel("late", 1)])
    assert got == [] and buffers.handler is None and buffers.errors == []  # dropped, not an error


def test_a_range_whose_end_arrives_in_a_later_buffer_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeCupti()
    fake.install(monkeypatch)
    tracer = kernel_trace.CuptiTracer()
    tracer.start()
    opened = fake._marker("layer1")
    fake._flush(1)  # the buffer fills between the range's start and its end
    fake._end(opened)
    tracer.stop()
    assert [(r.name, r.start < r.end) for r in tracer.ranges] == [("layer1", True)] and tracer.open_markers == {}


def test_refused_callbacks_or_kinds_end_the_trace_with_one_line_and_leave_nothing_on(
        monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeCupti(register_status=1)
    fake.install(monkeypatch)
    with pytest.raises(MissingEnvironment, match=r"refused the activity buffer callbacks \(status 1\)"):
        kernel_trace.trace(fake.run_once, 1, lambda: None)
    fake = FakeCupti(refused_kinds=frozenset({ActivityKind.RUNTIME}))
    fake.install(monkeypatch)
    with pytest.raises(MissingEnvironment, match="CUPTI refused to trace"):
        kernel_trace.trace(fake.run_once, 1, lambda: None)
    assert fake.enabled == set()  # the kinds switched on before the refusal are off again


def test_a_failing_call_is_the_error_reported_and_the_records_are_switched_off(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeCupti()
    fake.install(monkeypatch)
    monkeypatch.setattr(kernel_trace.CuptiTracer, "_records", lambda *args: (_ for _ in ()).throw(KeyError("x")))

    def failing() -> None:
        fake.run_once()
        raise RuntimeError("out of memory")

    with pytest.raises(RuntimeError, match="out of memory"):  # not the records' failure the stop then meets
        kernel_trace.trace(failing, 1, lambda: None)
    assert fake.enabled == set()


def test_a_trace_that_delivers_no_kernel_fails_with_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeCupti()
    fake.install(monkeypatch)
    with pytest.raises(MissingEnvironment, match="no kernel of 2 traced call"):
        kernel_trace.trace(lambda: None, 2, lambda: None)  # calls that launch nothing CUPTI records


@pytest.mark.parametrize("layout, field", [("activity_kernel10_dtype", "correlation_id"),
                                           ("activity_marker2_dtype", "object_id"),
                                           ("activity_api_dtype", "cbid")])
def test_a_cupti_python_whose_layouts_lack_a_field_the_tracer_reads_is_refused_with_one_line(
        monkeypatch: pytest.MonkeyPatch, layout: str, field: str) -> None:
    fake = FakeCupti()
    fake.install(monkeypatch)
    inner = sys.modules["cupti"].cupti
    dtype = getattr(inner, layout)
    kept = [(name, dtype.fields[name][0]) for name in dtype.names if name != field]
    monkeypatch.setattr(inner, layout, np.dtype(kept))
    with pytest.raises(MissingEnvironment, match=f"cupti-python's {layout} lacks {field}"):
        kernel_trace.trace(fake.run_once, 1, lambda: None)
