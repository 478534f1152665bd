"""The host load a diff weighs holds what the session measured (the three load averages, the cores, the threads) and
derives the rest; a stored session, written before this record changed, gives it as it recorded it. Expected figures
are worked out here from the averages."""

from __future__ import annotations

from dataclasses import fields

from sessions.analyses.noise import HostLoad, contention_bound
from sessions.documents import storage
from sessions.documents.model import Environment
from tests.conftest import H200


def _environment(averages: list[float] | None, cores: int = 2, threads: int | None = 1) -> Environment:
    return Environment(host="h", os="linux", cpu="cpu", cpu_count=cores, python="3.11", versions={},
                       torch_threads=threads, load_average=averages)


def test_the_record_holds_only_what_was_measured():
    assert [f.name for f in fields(HostLoad)] == ["averages", "cores", "threads"]


def test_the_peak_the_load_per_core_and_the_span_come_from_the_averages():
    load = HostLoad.of(_environment([3.0, 1.0, 2.0]))
    assert load is not None
    assert (load.averages, load.cores, load.threads) == ((3.0, 1.0, 2.0), 2, 1)
    assert (load.peak, load.per_core, load.span) == (3.0, 1.5, (0.5, 1.5))
    assert HostLoad.of(_environment(None)) is None and HostLoad.of(_environment([1.0, 1.0, 1.0], cores=0)) is None


def test_a_stored_session_gives_the_load_it_recorded():
    session = storage.load(H200 / "senet154-study-b1.json")
    load = HostLoad.of(session.environment)
    assert load is not None
    one, five, fifteen = 1.30810546875, 0.57958984375, 0.220703125  # as the file holds them
    assert load.averages == (one, five, fifteen) and (load.cores, load.threads) == (16, 16)
    assert load.span == (fifteen / 16, one / 16)
    assert contention_bound(load, load) > 1.0  # 1.3 other tasks and 16 threads on 16 cores: past a core each
