"""`trt-inspect import DIR`: the engines of a folder, each file paired with its engine by name and trtexec's options.

The expected files come from `tests/trt_sets.py` (plain json over the raw files of ../shared/fixtures) and, for
folders of trtexec logs, from `_raw_engine` below (a regular expression over each log's command line).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from profilers.trt_import.folder import files_of_folder
from sessions.documents import storage
from sessions.documents.errors import InputError
from tests.conftest import run_cli
from tests.trt_sets import SHARED, engines, set_folders

SINGLE = [folder for folder in set_folders() if len(engines(folder)) == 1]
MANY = [folder for folder in set_folders() if len(engines(folder)) > 1]
LOGS = [folder for folder in set_folders() if not engines(folder)]  # folders of trtexec logs alone
GOOGLENET = SHARED / "trt" / "trt7.1-googlenet-xavier-dla-gpu-profiles"
ENGINE_OPTION = re.compile(r"^&&&& RUNNING .*?--(?:saveEngine|loadEngine)=(\S+)", re.MULTILINE)


def _taken(note: str) -> list[str]:
    """The file names a folder note says it took."""
    took = note.split(": took ", 1)[1].split("; left ", 1)[0]
    return re.findall(r"(?:^|\), )([^ ()]+) \(", took)


@pytest.mark.parametrize("folder", SINGLE, ids=[f"{f.parent.name}/{f.name}" for f in SINGLE])
def test_a_folder_of_one_engine_gives_its_layer_profile_and_times_files(folder):
    engine = engines(folder)[0]
    (found,) = files_of_folder(folder).engines
    assert [found.files.one(role) for role in ("layers", "profile", "times")] == [engine.layers, engine.profile,
                                                                                engine.times]
    assert set(engine.logs) <= set(found.files.every("metadata"))
    left = {entry.split(" (")[0] for entry in files_of_folder(folder).left}
    assert left >= {"SOURCE.md", "SHA256SUMS"} & {p.name for p in folder.iterdir()}


def _raw_engine(log: Path) -> str | None:
    match = ENGINE_OPTION.search(log.read_text(errors="replace")[:20000])
    return Path(match.group(1)).name if match else None


@pytest.mark.parametrize("folder", LOGS, ids=[f.name for f in LOGS])
def test_a_folder_of_one_engines_logs_is_read_whole(folder):
    """Every log of a folder whose logs save or load one engine file is read: none is left."""
    logs = [p for p in sorted(folder.iterdir()) if p.name not in ("SOURCE.md", "SHA256SUMS")]
    named = {_raw_engine(log) for log in logs} - {None}
    assert len(named) <= 1, named
    found = files_of_folder(folder)
    (engine,) = found.engines
    taken = {p for role in ("layers", "profile", "times", "metadata") for p in engine.files.every(role)}
    assert {p.name for p in taken} == {p.name for p in logs}, found.left
    assert engine.name == (re.sub(r"\.(plan|trt|engine)$", "", named.pop()) if named else None)


def test_the_googlenet_folder_is_one_variant_per_engine_named_by_what_their_names_do_not_share():
    if not GOOGLENET.is_dir():
        pytest.skip("shared fixtures are not beside the checkout")
    profiles = sorted(p.name for p in GOOGLENET.glob("*.profile"))
    found = files_of_folder(GOOGLENET)
    expected = [name.removeprefix("googlenet_").removesuffix(".profile") for name in profiles]
    assert [e.name for e in found.engines] == expected and len(expected) == 32 and found.model == "googlenet"
    assert [e.files.one("profile").name for e in found.engines] == profiles
    kept = files_of_folder(GOOGLENET, "gpu_mark_*")
    assert [e.name for e in kept.engines] == [n for n in expected if n.startswith("gpu_mark_")]
    with pytest.raises(InputError, match="matches none"):
        files_of_folder(GOOGLENET, "tpu_*")


def test_the_googlenet_session_compares_its_placements_and_diff_flags_the_dla_slowdown(tmp_path):
    if not GOOGLENET.is_dir():
        pytest.skip("shared fixtures are not beside the checkout")
    out = tmp_path / "g.json"
    result = run_cli("import", str(GOOGLENET), "--out", str(out))
    assert result.returncode == 0, result.stderr
    session = storage.load(out)
    assert len(session.variants) == 32 and session.study.model == "googlenet"
    diff = run_cli("diff", str(out), str(out), "--pair", "gpu_transition_at_-1=dla_mark_at_-1", "--format", "json")
    assert diff.returncode == 1, diff.stderr  # diff's exit status for a regression
    changes = json.loads(diff.stdout)["changes"]
    summed = [c for c in changes if c["what"] == "summed layer time"]
    raw = {name: sum(r["averageMs"] for r in json.loads((GOOGLENET / f"googlenet_{name}.profile").read_text())
                     if "name" in r) for name in ("gpu_transition_at_-1", "dla_mark_at_-1")}
    assert len(summed) == 1 and summed[0]["regression"]
    assert summed[0]["a"] == pytest.approx(raw["gpu_transition_at_-1"]) and summed[0]["b"] == pytest.approx(
        raw["dla_mark_at_-1"])
    assert raw["dla_mark_at_-1"] > 1.05 * raw["gpu_transition_at_-1"]


def test_the_command_imports_a_folder_and_says_what_it_took_and_left(tmp_path):
    folder = next((f for f in SINGLE if f.name == "trt8.4-resnet-a100-fp32"), None)
    if folder is None:
        pytest.skip("shared fixtures are not beside the checkout")
    out = tmp_path / "s.json"
    result = run_cli("import", str(folder), "--out", str(out))
    assert result.returncode == 0, result.stderr
    note = storage.load(out).variants[0].notes[0]
    assert _taken(note) == sorted(p.name for p in folder.iterdir() if p.name not in ("SOURCE.md", "SHA256SUMS"))
    assert "resnet.onnx.engine.graph.json (layers)" in note and "left SHA256SUMS (" in note
    refused = run_cli("import", str(folder), "--layers", str(folder / "resnet.onnx.engine.graph.json"), "--out", str(out))
    assert refused.returncode == 2 and "not both" in refused.stderr
