"""One traced call on a time axis (sessions/reports/timeline.py): spans in start order, idle gaps, streams, lanes."""

import copy

import pytest

from sessions.documents import storage
from sessions.documents.model import KernelTable, Layer, TraceSummary, Variant
from sessions.reports.timeline import NO_COPIES, NO_TIMELINE, lanes, summary_lines, timeline_of, timeline_table
from tests.conftest import H200


def variant_of(records):
    """A variant whose kernel table holds `records`: (name, start_ns, duration_ns, stream, call)."""
    names = sorted({r[0] for r in records})
    table = KernelTable(names=names, name=[names.index(r[0]) for r in records], layer=[0] * len(records),
                        call=[r[4] for r in records], start_ns=[r[1] for r in records],
                        duration_ns=[r[2] for r in records], stream=[r[3] for r in records],
                        grid=[[1, 1, 1]] * len(records), block=[[1, 1, 1]] * len(records))
    return Variant(name="v", backend="torch", precision="fp16", device="cuda", layers=[Layer("conv", "Conv2d")],
                   kernels=table, trace=TraceSummary("cupti", "kernel", 2, len(records), 0, 0))


def test_gaps_are_idle_time_of_every_stream_and_overlap_counts_once():
    v = variant_of([("b", 12_000, 3_000, 8, 0), ("a", 1_000, 10_000, 7, 0), ("c", 4_000, 2_000, 8, 0),
                    ("memcpyHtoD", 30_000, 1_000, 7, 0), ("late", 99_000, 1_000, 7, 1)])
    t = timeline_of(v)
    assert [s.name for s in t.spans] == ["a", "c", "b", "memcpyHtoD"]  # start order, call 0 only
    assert [s.start_us for s in t.spans] == [0.0, 3.0, 11.0, 29.0]
    assert [s.gap_us for s in t.spans] == [0.0, 0.0, 1.0, 15.0]  # c runs inside a; b starts 1 us after a (not c) ends
    assert t.length_us == 30.0 and t.busy_us == 14.0 and t.streams == [7, 8] and t.calls == 2
    lines = summary_lines(t)
    assert (lines[1].startswith("1 idle gaps over 5 us, 0.015 ms in all; the largest 15.0 us")
            and "copies: 1" in lines[2])
    assert timeline_of(v, call=1).spans[0].name == "late"


def test_lanes_draw_each_stream_busy_share():
    v = variant_of([("a", 0, 10_000, 7, 0), ("b", 10_000, 10_000, 8, 0)])
    (seven, a), (eight, b) = lanes(timeline_of(v), 4)
    assert (seven, eight) == ("stream 7", "stream 8") and a == "██  " and b == "  ██"
    assert lanes(timeline_of(v), 4, 0.0, 10.0)[0][1] == "████"  # zoomed onto the first half


def test_a_session_without_kernel_start_times_says_no_timeline_recorded():
    session = storage.load(H200 / "senet154-mainjob-warm.json")
    names_only = copy.deepcopy(session.variant("fp16"))
    names_only.kernels = None
    assert timeline_of(names_only) is None and timeline_table(names_only).notes == (NO_TIMELINE,)


def test_the_h200_fp8_call_says_what_it_is():
    session = storage.load(H200 / "senet154-mainjob-warm.json")
    table = timeline_table(session.variant("fp8-all"))
    assert len(table.rows) == 8942 and table.notes[0].startswith("call 1 of 1 of fp8-all: 8942 launches on 9 stream(s)")
    assert NO_COPIES in table.notes and "not the timed replays'" in table.notes[-1]
    starts = [row[0] for row in table.rows]
    assert starts == sorted(starts)


@pytest.mark.parametrize("zoom", [1, 8])
async def test_the_timeline_screen_opens_from_the_overview(zoom):
    from inspector.tui.app import InspectorApp
    from inspector.tui.screens.timeline import TimelineScreen

    path = H200 / "senet154-mainjob-warm.json"
    app = InspectorApp(session=storage.load(path), path=path)
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.press("t", *["plus"] * (zoom.bit_length() - 1))
        screen = app.screen
        assert isinstance(screen, TimelineScreen) and screen.variant_name == "fp8-all" and screen.zoom == zoom
        lanes_text = screen.query_one("#lanes").render().plain
        assert "stream 7" in lanes_text and f"(zoom x{zoom})" in lanes_text
        await pilot.press("right_square_bracket")
        assert screen.variant_name == "fp8-no-se" and screen.timeline.variant == "fp8-no-se"
