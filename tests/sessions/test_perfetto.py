"""`export --format perfetto` (sessions/reports/perfetto.py): Chrome trace event JSON that ui.perfetto.dev opens. The
file is loaded back and held to the format's rules (the JSON object form, complete events with ts / dur / pid / tid,
metadata events naming every process and thread, proper nesting on each thread) and to the session's raw kernel
table, read here without the code under test."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest

from tests.conftest import ROOT, run_cli

H200_SESSION = ROOT / "benchmarks/results/h200/seresnext26d_32x4d-engine.json"
COMMITTED_TRACE = ROOT / "benchmarks/results/h200/perfetto/seresnext26d_32x4d-engine.json"
CPU_SESSION = ROOT / "benchmarks/results/cpu/run-1.json"
METADATA = {"process_name": "name", "thread_name": "name", "process_sort_index": "sort_index",
            "thread_sort_index": "sort_index"}


def export_trace(session: Path) -> dict:
    result = run_cli("export", str(session), "--format", "perfetto")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def check_trace_rules(trace: dict) -> None:
    """The Trace Event Format's rules this file relies on; an AssertionError names the first broken one."""
    assert isinstance(trace, dict) and isinstance(trace["traceEvents"], list) and trace["traceEvents"]
    assert trace.get("displayTimeUnit") in ("ms", "ns")
    named: dict[str, set] = {"process_name": set(), "thread_name": set()}
    slices: dict[tuple[int, int], list[dict]] = defaultdict(list)
    for event in trace["traceEvents"]:
        assert event["ph"] in ("X", "M"), event
        assert isinstance(event["pid"], int) and isinstance(event["name"], str)
        if event["ph"] == "M":
            assert event["name"] in METADATA and METADATA[event["name"]] in event["args"], event
            if event["name"] == "process_name":
                named["process_name"].add(event["pid"])
            elif event["name"] == "thread_name":
                named["thread_name"].add((event["pid"], event["tid"]))
            continue
        assert isinstance(event["tid"], int)
        assert isinstance(event["ts"], (int, float)) and isinstance(event["dur"], (int, float)) and event["dur"] >= 0
        slices[(event["pid"], event["tid"])].append(event)
    for (pid, tid), events in slices.items():
        assert pid in named["process_name"] and (pid, tid) in named["thread_name"]
        stack: list[dict] = []  # complete events on one thread nest: each inside the open one or after it ends
        for event in sorted(events, key=lambda e: (e["ts"], -e["dur"])):
            while stack and event["ts"] >= stack[-1]["ts"] + stack[-1]["dur"] - 1e-9:
                stack.pop()
            if stack:
                assert event["ts"] + event["dur"] <= stack[-1]["ts"] + stack[-1]["dur"] + 1e-9, (stack[-1], event)
            stack.append(event)


def parents(trace: dict) -> dict[int, dict]:
    """Each kernel event (by position) and the complete event of its own thread that most tightly holds it."""
    found = {}
    layers = [e for e in trace["traceEvents"] if e["ph"] == "X" and e.get("cat") == "layer"]
    for n, event in enumerate(trace["traceEvents"]):
        if event["ph"] == "X" and event.get("cat") != "layer":
            holders = [lay for lay in layers if (lay["pid"], lay["tid"]) == (event["pid"], event["tid"])
                       and lay["ts"] <= event["ts"] and event["ts"] + event["dur"] <= lay["ts"] + lay["dur"] + 1e-9]
            found[n] = min(holders, key=lambda lay: lay["dur"]) if holders else None
    return found


def lower_median_call(kernels: dict) -> int:
    sums: dict[int, int] = defaultdict(int)
    for call, duration in zip(kernels["call"], kernels["duration_ns"], strict=False):
        sums[call] += duration
    ordered = sorted((total, call) for call, total in sums.items())
    return ordered[(len(ordered) - 1) // 2][1]


@pytest.mark.parametrize("session", [H200_SESSION, CPU_SESSION], ids=["h200", "cpu"])
def test_one_call_per_variant_kernels_on_their_streams_under_their_layers(session):
    trace = export_trace(session)
    check_trace_rules(trace)
    raw = json.loads(session.read_text())
    holder = parents(trace)
    for pid, variant in enumerate(raw["variants"], start=1):
        kernels, names = variant["kernels"], [layer["name"] for layer in variant["layers"]]
        call = lower_median_call(kernels)
        rows = sorted((i for i, c in enumerate(kernels["call"]) if c == call), key=lambda i: kernels["start_ns"][i])
        origin = kernels["start_ns"][rows[0]]
        drawn = [(n, e) for n, e in enumerate(trace["traceEvents"])
                 if e["pid"] == pid and e["ph"] == "X" and e.get("cat") != "layer"]
        assert len(drawn) == len(rows)  # every record of the one call, no other call's
        title = next(e for e in trace["traceEvents"] if e["pid"] == pid and e["name"] == "process_name")
        assert title["args"]["name"].startswith(variant["name"]) and f"call {call + 1} of " in title["args"]["name"]
        for (n, event), i in zip(sorted(drawn, key=lambda d: (d[1]["ts"], d[0])), rows, strict=False):
            assert event["name"] == kernels["names"][kernels["name"][i]] and event["tid"] == kernels["stream"][i]
            assert event["ts"] == pytest.approx((kernels["start_ns"][i] - origin) / 1e3, abs=1e-3)
            assert event["args"]["duration_ns"] == kernels["duration_ns"][i]
            owner = names[kernels["layer"][i]] if kernels["layer"][i] >= 0 else "(outside layers)"
            assert holder[n] is not None and holder[n]["name"] == owner == event["args"]["layer"]


def test_overlapping_records_on_one_stream_still_nest(tmp_path):
    """Timer jitter: a record that ends after the next one on its stream starts is drawn up to that start."""
    raw = json.loads(H200_SESSION.read_text())
    kernels = raw["variants"][0]["kernels"]
    call = lower_median_call(kernels)
    kept = [i for i, c in enumerate(kernels["call"]) if c == call]  # that call alone: the longer record cannot move it
    for column in ("name", "layer", "call", "start_ns", "duration_ns", "stream", "grid", "block"):
        kernels[column] = [kernels[column][i] for i in kept]
    raw["variants"][0]["trace"].update(calls=1, records=len(kept))
    rows = sorted(range(len(kept)), key=lambda i: kernels["start_ns"][i])
    first, second = rows[0], rows[1]
    kernels["duration_ns"][first] = kernels["start_ns"][second] - kernels["start_ns"][first] + 500  # 0.5 us past
    path = tmp_path / "jitter.json"
    path.write_text(json.dumps(raw))
    trace = export_trace(path)
    check_trace_rules(trace)
    kernel = next(e for e in trace["traceEvents"] if e["ph"] == "X" and e.get("cat") == "kernel" and e["pid"] == 1)
    assert kernel["args"]["duration_ns"] == kernels["duration_ns"][first]
    assert kernel["dur"] == pytest.approx((kernels["start_ns"][second] - kernels["start_ns"][first]) / 1e3, abs=1e-3)


def test_the_rules_check_catches_broken_traces():
    trace = export_trace(H200_SESSION)
    kernel = next(e for e in trace["traceEvents"] if e["ph"] == "X" and e.get("cat") == "kernel")
    for breakage in ("partial overlap", "no dur", "unnamed thread"):
        broken = json.loads(json.dumps(trace))
        events = broken["traceEvents"]
        if breakage == "partial overlap":
            events.append({**kernel, "name": "late", "ts": kernel["ts"] + kernel["dur"] / 2, "dur": 1e6})
        elif breakage == "no dur":
            next(e for e in events if e["ph"] == "X").pop("dur")
        else:
            events[:] = [e for e in events if e["name"] != "thread_name"]
        with pytest.raises((AssertionError, KeyError)):
            check_trace_rules(broken)


def test_the_committed_h200_trace_is_the_export_of_its_session_and_keeps_the_rules():
    committed = json.loads(COMMITTED_TRACE.read_text())
    check_trace_rules(committed)
    assert committed == export_trace(H200_SESSION)


def test_a_session_without_any_kernel_trace_is_one_line(tmp_path):
    raw = json.loads(CPU_SESSION.read_text())
    for variant in raw["variants"]:
        variant["kernels"] = None
    path = tmp_path / "untraced.json"
    path.write_text(json.dumps(raw))
    result = run_cli("export", str(path), "--format", "perfetto")
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.strip().endswith("no variant of this session has a kernel trace (start times and streams): "
                                          "nothing to draw") and len(result.stderr.strip().splitlines()) == 1
