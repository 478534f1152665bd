"""The registry of TensorRT file kinds (`profilers.trt_import.kinds`): every role is a flag of `import`, every
JSON kind is named by `file_kind`, and a kind registered by one module alone (here, by this test) is found in a
folder by its name and content, taken from its own flag, and put into the imported variant."""

from __future__ import annotations

import shutil
from pathlib import Path

import orjson
import pytest

from inspector.cli import build_parser, main
from profilers.trt_import import kinds
from profilers.trt_import.documents import read_json
from profilers.trt_import.folder import files_of_folder
from profilers.trt_import.importer import Reading, import_variant
from profilers.trt_import.metadata import engine_stem
from sessions.documents import storage
from tests.conftest import fixture_dir

MOBILENET = "trt10-mobilenetv2-fp16-trtexec"
STEM = "mobilenet_v2_fp16"


def test_every_role_is_a_flag_of_import_with_its_help(capsys: pytest.CaptureFixture[str]) -> None:
    args = vars(build_parser().parse_args(["import", "folder"]))
    with pytest.raises(SystemExit):
        build_parser().parse_args(["import", "--help"])
    helps = " ".join(capsys.readouterr().out.split())
    for role in kinds.roles():
        assert args[role.name] == ([] if role.repeatable else None), role.name
        assert role.flag in helps and " ".join(role.help.split()) in helps, role.name


def test_every_json_kind_names_the_role_it_fills_and_parts_its_file_names() -> None:
    assert {kind.role for kind in kinds.json_kinds()} <= {role.name for role in kinds.roles()}
    for kind in kinds.json_kinds():
        for suffix in kind.suffixes:
            assert engine_stem(Path(f"engine.onnx{suffix}")) == "engine.onnx", suffix


def _peak_memory(paths: list[Path], reading: Reading) -> None:
    reading.notes.append(f"peak memory {read_json(paths[0], 'memory report')['peakMemoryMiB']} MiB")


@pytest.fixture
def memory_kind(monkeypatch: pytest.MonkeyPatch) -> kinds.FileKind:
    """A kind of file no module reads, registered here as its own module would register it."""
    kinds.roles()  # every module's kinds registered first
    monkeypatch.setattr(kinds, "_ROLES", dict(kinds._ROLES))
    monkeypatch.setattr(kinds, "_KINDS", list(kinds._KINDS))
    kinds.register_role(kinds.Role("memory", "peak memory report", order=5, apply=_peak_memory))
    return kinds.register_kind(kinds.FileKind(
        "a peak memory report: pass it as --memory", "memory", rank=80, suffixes=(".memory.json",),
        recognise=lambda doc: isinstance(doc, dict) and "peakMemoryMiB" in doc))


def _engine_folder(tmp_path: Path) -> Path:
    for suffix in (".graph.json", ".profile.json"):
        shutil.copy(fixture_dir(MOBILENET) / f"{STEM}{suffix}", tmp_path / f"{STEM}{suffix}")
    (tmp_path / f"{STEM}.memory.json").write_bytes(orjson.dumps({"peakMemoryMiB": 321}))
    (tmp_path / "other.memory.json").write_bytes(orjson.dumps({"peakMemoryMiB": 999}))
    return tmp_path


def test_a_kind_registered_alone_is_found_in_a_folder_and_put_into_the_variant(memory_kind: kinds.FileKind,
                                                                              tmp_path: Path) -> None:
    folder = _engine_folder(tmp_path)
    assert kinds.file_kind(read_json(folder / f"{STEM}.memory.json", "m")) == memory_kind.description
    found = files_of_folder(folder)
    (engine,) = found.engines
    assert engine.files.every("memory") == [folder / f"{STEM}.memory.json"]  # the file of the same engine name
    assert any(entry.startswith("other.memory.json (of engine other") for entry in found.left)
    assert "peak memory 321 MiB" in import_variant(engine.files).variant.notes


def test_a_kind_registered_alone_is_taken_from_its_flag(memory_kind: kinds.FileKind, tmp_path: Path) -> None:
    folder = _engine_folder(tmp_path)
    out = tmp_path / "s.json"
    assert main(["import", "--layers", str(folder / f"{STEM}.graph.json"),
                 "--memory", str(folder / "other.memory.json"), "--out", str(out)]) == 0
    assert "peak memory 999 MiB" in storage.load(out).variants[0].notes
    assert main(["import", str(folder), "--memory", str(folder / "other.memory.json")]) == 2  # a folder, or the files


def test_two_files_for_a_one_file_role_are_one_line_not_a_traceback(tmp_path):
    from profilers.trt_import.kinds import ImportFiles
    from sessions.documents.errors import InputError

    with pytest.raises(InputError, match="--times takes one file; got 2: a.json, b.json"):
        ImportFiles.of(times=[tmp_path / "a.json", tmp_path / "b.json"])
    assert ImportFiles.of(metadata=[tmp_path / "a.json", tmp_path / "b.json"]).every("metadata")  # a repeatable role
