"""What the tool writes it can read back; what it cannot write it says before any work."""

from __future__ import annotations

import dataclasses
import os
import time

import pytest

import tests.fake_backend
from inspector.study import run_study
from sessions.documents import storage
from sessions.documents.errors import InputError, InspectError
from tests.conftest import H200
from tests.inspector.test_study_fake import fake_plan

REAL = H200 / "senet154-h200.json"


def test_a_session_with_nan_is_refused_and_the_old_file_stays(tmp_path):
    path = tmp_path / "s.json"
    session = storage.load(REAL)
    storage.save(session, path)
    before = path.read_bytes()
    session.variants[0].latency.median_ms = float("nan")
    with pytest.raises(InspectError, match=r"latency\.median_ms: expected a number"):
        storage.save(session, path)
    assert path.read_bytes() == before and not list(tmp_path.glob(".*.tmp"))


def test_pipes_and_oversized_files_are_refused_without_reading(tmp_path):
    fifo = tmp_path / "x.json"
    os.mkfifo(fifo)
    with pytest.raises(InputError, match="not a regular file"):
        storage.load(fifo)  # would block forever if it were opened
    entries, problems = storage.list_sessions(tmp_path)
    assert entries == [] and "not a regular file" in problems[0]
    with pytest.raises(InputError, match="over the 0 MiB"):
        storage.read_regular_file(REAL, "session file", limit=1000)


def test_orphaned_temporaries_of_killed_saves_are_cleaned(tmp_path):
    path = tmp_path / "s.json"
    orphan, fresh = tmp_path / ".s.json.abc.tmp", tmp_path / ".s.json.def.tmp"
    orphan.write_bytes(b"{")
    fresh.write_bytes(b"{")
    old = time.time() - 3600
    os.utime(orphan, (old, old))
    storage.save(storage.load(REAL), path)
    assert not orphan.exists() and fresh.exists()  # a save in flight elsewhere is left alone


def test_an_unwritable_output_fails_before_any_work(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    loaded = []
    monkeypatch.setattr(tests.fake_backend.FakeBackend, "load_inputs", classmethod(lambda cls, plan: loaded.append(1)))
    with pytest.raises(InputError, match="cannot write a session at"):
        run_study(fake_plan(tmp_path, out=str(blocker / "s.json")), [], lambda p: None)
    assert loaded == []


def test_two_studies_writing_one_file_are_refused(tmp_path):
    path = tmp_path / "s.json"
    with storage.session_lock(path), pytest.raises(InputError, match="being written by another trt-inspect command"):
        run_study(fake_plan(tmp_path, out=str(path)), [], lambda p: None)
    run_study(fake_plan(tmp_path, out=str(path)), [], lambda p: None)  # the lock is released after use


@pytest.mark.parametrize(("change", "message"), [
    ({"batch": 0}, "batch must be between"),
    ({"trace_calls": 18446744073709551616}, "trace-calls must be between"),
    ({"timing": {"warmup_s": float("inf"), "rounds": 1, "iters": 1}},
     "--warmup must be between 0 and 3600 seconds, not inf"),
    ({"timing": {"warmup_s": 0.0, "rounds": 0, "iters": 1}}, "rounds must be between"),
])
def test_a_plan_out_of_range_is_refused_before_any_work(tmp_path, change, message):
    from sessions.documents.plan import TimingPlan

    if "timing" in change:
        change = {"timing": TimingPlan(**change["timing"])}
    with pytest.raises(InputError, match=message):
        run_study(dataclasses.replace(fake_plan(tmp_path), **change), [], lambda p: None)


def test_a_failing_trace_keeps_the_measured_variant(tmp_path, monkeypatch):
    def full_disk(self, run_once, calls, device, synchronize):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(tests.fake_backend.FakeTracer, "trace", full_disk)
    _session, path = run_study(fake_plan(tmp_path), [], lambda p: None)
    fp32 = storage.load(path).variant("fp32")
    assert fp32.quality is not None and fp32.latency is not None and fp32.kernels is None
    assert any("kernel trace failed" in note and "No space left" in note for note in fp32.notes)
