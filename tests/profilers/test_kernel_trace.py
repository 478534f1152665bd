"""CUPTI records API calls only where they launch kernels: switched off in CUPTI for the trace, switched back on
after it, and skipped on arrival where CUPTI cannot switch them off."""

from __future__ import annotations

import enum
from pathlib import Path
from typing import Literal

import pytest

from profilers import kernel_trace
from profilers.attribution import LayerIndex, TraceRecords, summarize
from sessions.documents.errors import MissingEnvironment
from tests.fake_cupti import ActivityKind, DriverApiTraceCbid, FakeCupti, RuntimeApiTraceCbid

BOUNDS = {"INVALID", "SIZE", "FORCE_INT"}
RUNTIME_LAUNCHES = {"cudaLaunch_v3020", "cudaLaunchKernel_v7000", "cudaGraphLaunch_v10000",
                    "cudaLaunchKernelExC_v11060"}
DRIVER_LAUNCHES = {"cuLaunchKernel", "cuLaunchKernelEx", "cuGraphLaunch"}
RUNTIME_OTHERS = {m.name for m in RuntimeApiTraceCbid} - BOUNDS - RUNTIME_LAUNCHES
DRIVER_OTHERS = {m.name for m in DriverApiTraceCbid} - BOUNDS - DRIVER_LAUNCHES
API_KINDS = (ActivityKind.RUNTIME, ActivityKind.DRIVER)


def traced(fake: FakeCupti, monkeypatch: pytest.MonkeyPatch, calls: int = 2) -> TraceRecords:
    fake.install(monkeypatch)
    return kernel_trace.trace(fake.run_once, calls, lambda: None)


def test_while_tracing_every_api_but_the_launches_is_switched_off(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeCupti()
    seen: list[tuple[set[str], set[str]]] = []

    def run_once() -> None:
        seen.append((fake.switched_off(ActivityKind.RUNTIME), fake.switched_off(ActivityKind.DRIVER)))
        fake.run_once()

    fake.install(monkeypatch)
    records = kernel_trace.trace(run_once, 1, lambda: None)
    assert seen == [(RUNTIME_OTHERS, DRIVER_OTHERS)]
    arrived = {a.cbid for a in fake.delivered if a.kind in API_KINDS}
    assert arrived == {RuntimeApiTraceCbid.cudaLaunchKernel_v7000, DriverApiTraceCbid.cuLaunchKernelEx}
    assert records.note == f"API records: kernel launches only (CUPTI switched {len(RUNTIME_OTHERS | DRIVER_OTHERS)} " \
                           "other APIs off)"


def test_the_apis_are_switched_back_on_before_their_kinds_go_off(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeCupti()
    traced(fake, monkeypatch)
    off = {(kind, cbid) for kind, cbid, on in fake.switch_log if not on}
    back_on = {(kind, cbid) for kind, cbid, on in fake.switch_log if on}
    assert len(off) == len(RUNTIME_OTHERS | DRIVER_OTHERS) and back_on == off
    fake.run_once()  # CUPTI's kinds are off again: an API switched on after that would still be recorded
    assert [a for a in fake.buffered if a.kind in API_KINDS] == []


@pytest.mark.parametrize("filter_calls", ["missing", "refused", "broken"])
def test_without_the_switches_every_api_is_recorded_and_tracing_works_as_before(
    monkeypatch: pytest.MonkeyPatch, filter_calls: Literal["missing", "refused", "broken"]
) -> None:
    fake = FakeCupti(filter_calls=filter_calls)
    records = traced(fake, monkeypatch)
    assert fake.api_switches == {} and fake.switch_log == []
    arrived = {a.cbid for a in fake.delivered if a.kind == ActivityKind.RUNTIME}
    assert RuntimeApiTraceCbid.cudaGetLastError_v3020 in arrived
    assert [k.name for k in records.kernels] == ["conv1_kernel", "fc_kernel"] * 2
    _, summary = summarize(records, LayerIndex())
    assert (summary.records, summary.unattributed) == (4, 0)
    assert summary.note.startswith("API records: all, those of no launch skipped on arrival (CUPTI switched none off: ")


@pytest.mark.parametrize("filter_calls, refused_apis", [
    ("work", frozenset()), ("missing", frozenset()), ("refused", frozenset()),
    ("work", frozenset({"cudaGetLastError_v3020", "cuCtxGetCurrent"})),
])
def test_api_records_of_no_launch_never_become_launches(
    monkeypatch: pytest.MonkeyPatch, filter_calls: Literal["work", "missing", "refused"], refused_apis: frozenset[str]
) -> None:
    fake = FakeCupti(filter_calls=filter_calls, refused_apis=refused_apis)
    records = traced(fake, monkeypatch)
    assert sorted(launch.correlation for launch in records.launches) == sorted(fake.launch_correlations)
    assert len(fake.launch_correlations) == 4


def test_apis_cupti_will_not_switch_off_are_counted_in_the_note(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeCupti(refused_apis=frozenset({"cudaGetLastError_v3020", "cuCtxGetCurrent"}))
    records = traced(fake, monkeypatch)
    assert fake.switched_off(ActivityKind.RUNTIME) == set()  # switched back on after the trace
    assert {RuntimeApiTraceCbid(c).name for k, c, on in fake.switch_log if k == ActivityKind.RUNTIME and not on} == \
        RUNTIME_OTHERS - {"cudaGetLastError_v3020"}
    switched = len(RUNTIME_OTHERS | DRIVER_OTHERS) - 2
    assert records.note.startswith(f"API records: kernel launches only (CUPTI switched {switched} other APIs off; "
                                   "2 it would not are skipped on arrival: ")


def test_an_id_is_a_launch_when_any_of_its_names_is() -> None:
    class Cbids(enum.IntEnum):
        INVALID = 0
        cuLaunch = 1
        cuGridOld = 1  # an alias of the launch's id under a name of no launch
        cuStreamQuery = 2
        cuMemcpy = 3
        SIZE = 4

    assert kernel_trace.non_launch_cbids(Cbids) == {2, 3}


RUNTIME_HEADER = """typedef enum CUpti_runtime_api_trace_cbid_enum {
    CUPTI_RUNTIME_TRACE_CBID_INVALID                       = 0,
    CUPTI_RUNTIME_TRACE_CBID_cudaDriverGetVersion_v3020    = 1,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000        = 211,
    CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020              = 20,
    CUPTI_RUNTIME_TRACE_CBID_SIZE                          = 523,
    CUPTI_RUNTIME_TRACE_CBID_FORCE_INT                     = 0x7fffffff
} CUpti_runtime_api_trace_cbid;
"""


def test_without_cupti_pythons_ids_the_headers_beside_libcupti_name_them(tmp_path) -> None:
    """cupti-python 13.0 names no callback ids: they are read from CUPTI's header next to the library NVTX loads."""
    (tmp_path / "lib").mkdir()
    (tmp_path / "include").mkdir()
    (tmp_path / "include" / "cupti_runtime_cbid.h").write_text(RUNTIME_HEADER)
    library = str(tmp_path / "lib" / "libcupti.so.13")
    apis = kernel_trace.NonLaunchApis.of(object(), library)
    assert apis.runtime == {1, 20} and apis.driver == frozenset()
    assert kernel_trace.NonLaunchApis.of(object(), str(tmp_path / "a" / "lib" / "libcupti.so")).runtime == frozenset()


def test_the_installed_cupti_headers_agree_with_the_launch_rule() -> None:
    """On the CUDA build of torch the tests install, nvidia-cuda-cupti's own headers give the ids (read here with a
    plain text search, not the parser): the launch APIs stay on, the rest go off."""
    pathfinder = pytest.importorskip("cuda.pathfinder")
    try:
        library = pathfinder.load_nvidia_dynamic_lib("cupti").abs_path
    except Exception as exc:  # noqa: BLE001
        pytest.skip(f"no libcupti here: {exc}")
    apis = kernel_trace.NonLaunchApis.of(object(), library)
    header = (Path(library).parent.parent / "include" / "cupti_runtime_cbid.h").read_text()

    def cbid(name: str) -> int:
        line = header[header.index(f"CUPTI_RUNTIME_TRACE_CBID_{name} "):].split("\n", 1)[0]
        return int(line.split("=")[1].strip().rstrip(","))

    assert cbid("cudaLaunchKernel_v7000") not in apis.runtime and cbid("cudaMalloc_v3020") in apis.runtime
    assert len(apis.driver) > 100


def test_cupti_is_detached_after_each_trace_once_its_records_are_read(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeCupti()
    first = traced(fake, monkeypatch)
    assert not fake.attached and fake.events[-1] == "finalize"
    assert fake.events.count("finalize") == 1 and fake.events.index("finalize") > max(
        i for i, event in enumerate(fake.events) if event in ("flush", "disable"))
    second = kernel_trace.trace(fake.run_once, 1, lambda: None)  # attached again by the next trace
    assert not fake.attached and fake.events.count("finalize") == 2
    assert [k.name for k in first.kernels] == ["conv1_kernel", "fc_kernel"] * 2
    assert [k.name for k in second.kernels] == ["conv1_kernel", "fc_kernel"]
    assert "stayed attached" not in first.note + second.note


def test_a_detach_that_fails_leaves_the_trace_and_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeCupti(finalize_error=RuntimeError("CUPTI_ERROR_NOT_SUPPORTED\nmore"))
    records = traced(fake, monkeypatch)
    assert [k.name for k in records.kernels] == ["conv1_kernel", "fc_kernel"] * 2
    assert records.note.endswith("; CUPTI stayed attached after the trace (CUPTI_ERROR_NOT_SUPPORTED): later "
                                 "CUDA-graph replays may run slower")


def test_a_failing_call_is_synchronized_before_cupti_is_detached(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeCupti()
    fake.install(monkeypatch)

    def failing() -> None:
        fake.run_once()
        fake.events.append("failed call")
        raise RuntimeError("out of memory")

    with pytest.raises(RuntimeError, match="out of memory"):
        kernel_trace.trace(failing, 1, lambda: fake.events.append("synchronize"))
    assert not fake.attached
    after_call = fake.events[fake.events.index("failed call"):]
    assert "synchronize" in after_call[:after_call.index("finalize")]


def test_unread_records_or_refused_kinds_still_detach_cupti_and_say_where_it_stayed(
        monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeCupti(walk_stops_after=1, walk_status=21, finalize_error=RuntimeError("CUPTI_ERROR_UNKNOWN"))
    fake.install(monkeypatch)
    with pytest.raises(MissingEnvironment, match=r"could not be read: .*; CUPTI stayed attached after the trace "
                                                 r"\(CUPTI_ERROR_UNKNOWN\)"):
        kernel_trace.trace(fake.run_once, 1, lambda: None)
    fake = FakeCupti(refused_kinds=frozenset({ActivityKind.RUNTIME}))
    fake.install(monkeypatch)
    with pytest.raises(MissingEnvironment, match="CUPTI refused to trace"):
        kernel_trace.trace(fake.run_once, 1, lambda: None)
    assert not fake.attached and "finalize" in fake.events
    fake = FakeCupti(layers=(), finalize_error=RuntimeError("CUPTI_ERROR_UNKNOWN"))  # no kernel delivered
    fake.install(monkeypatch)
    with pytest.raises(MissingEnvironment, match=r"delivered no kernel .*; CUPTI stayed attached after the trace"):
        kernel_trace.trace(fake.run_once, 1, lambda: None)
    fake = FakeCupti(disable_error=RuntimeError("CUPTI_ERROR_INVALID_KIND"))  # stop itself fails
    fake.install(monkeypatch)
    with pytest.raises(RuntimeError, match="CUPTI_ERROR_INVALID_KIND"):
        kernel_trace.trace(fake.run_once, 1, lambda: None)
    assert not fake.attached and fake.events[-1] == "finalize"


def test_callbacks_refused_detach_nothing_another_profiler_may_hold(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeCupti(register_status=1)
    fake.install(monkeypatch)
    with pytest.raises(MissingEnvironment, match="refused the activity buffer callbacks"):
        kernel_trace.trace(fake.run_once, 1, lambda: None)
    assert "finalize" not in fake.events


def test_the_detach_can_be_switched_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kernel_trace, "DETACH_AFTER_TRACE", False)
    fake = FakeCupti()
    records = traced(fake, monkeypatch)
    assert fake.attached and "finalize" not in fake.events and "stayed attached" not in records.note
