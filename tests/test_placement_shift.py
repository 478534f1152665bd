"""benchmarks/placement_shift.py reads its runs' sessions from a folder or a .tar.gz of them, and counts the pairs of
runs whose latency bands do not meet, at the same pad and at different pads: on a real session's samples, scaled."""

from __future__ import annotations

import dataclasses
import tarfile

from benchmarks.placement_shift import judged, runs_in
from sessions.documents.storage import encode, load
from tests.conftest import H200

SESSION = H200 / "senet154-mainjob-warm.json"


def scaled_session(factor: float) -> bytes:
    """The committed session, every time of every variant's latency (samples, round medians, statistics)
    times `factor`."""
    session = load(SESSION)
    for variant in session.variants:
        if variant.latency is not None:
            times = {field.name: getattr(variant.latency, field.name) for field in dataclasses.fields(variant.latency)
                     if field.name.endswith("_ms")}
            variant.latency = dataclasses.replace(variant.latency, **{
                name: [v * factor for v in value] if isinstance(value, list) else None if value is None
                else value * factor for name, value in times.items()})
    return encode(session)


def runs(tmp_path):
    folder = tmp_path / "runs"
    folder.mkdir()
    for name, factor in [("pad-0-1.json", 1.0), ("pad-0-2.json", 1.0), ("pad-64-1.json", 1.01)]:
        (folder / name).write_bytes(scaled_session(factor))
    (folder / "notes.json").write_bytes(scaled_session(2.0))  # not a pad-PAD-N.json: left out
    return folder


def test_runs_are_read_by_pad_and_run_from_a_folder_and_from_its_tar_gz(tmp_path):
    folder = runs(tmp_path)
    archive = tmp_path / "runs.sessions.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for path in sorted(folder.iterdir()):
            tar.add(path, arcname=path.name)
    from_folder, from_archive = runs_in(folder), runs_in(archive)
    assert [(pad, index) for pad, index, _ in from_folder] == [(0, 1), (0, 2), (64, 1)]
    assert from_archive == from_folder
    names = [variant.name for variant in load(SESSION).variants if variant.latency is not None]
    assert all(list(bands) == names for _, _, bands in from_folder)


def test_pairs_are_counted_apart_at_the_same_pad_and_at_different_pads(tmp_path, capsys):
    judged(runs(tmp_path))
    lines = capsys.readouterr().out.splitlines()
    summaries = [line for line in lines if "pairs that differ" in line]
    assert summaries and all(line.endswith("0 of 1 at the same pad, 2 of 2 at different pads") for line in summaries)
    assert all("(1.00 % apart) over 3 runs" in line for line in summaries)
