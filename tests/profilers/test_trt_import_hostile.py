"""Hostile `import` inputs: a `--dumpProfile` table read past a bad row (H2), cells out of range (M6,
L10), unreadable files and targets (M9), a huge log parsed twice (L2), a huge JSON file read whole to classify (L3).

The tables are the hand-written 10.x log of tests/data/trt_text with one cell or line changed; the expected rows are
read back from the text by a regular expression of this test.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

from profilers.trt_import import documents
from profilers.trt_import.folder import files_of_folder
from profilers.trt_import.record_shapes import Shapes
from sessions.documents import storage
from tests.conftest import TESTS, run_cli

TRT10 = TESTS / "data" / "trt_text" / "trt10-dumplayerinfo-dumpprofile.log"
CONV_ROW = "      50.00       0.0250       0.0248      50.0   /conv1/Conv + /relu1/Relu"
ROW = re.compile(r"\]\s+([-\d.]+)\s+([-\d.]+)\s+[-\d.]+\s+[\d.]+\s+(\S.*)$", re.MULTILINE)


def _import(tmp_path: Path, text: str):
    log = tmp_path / "run.log"
    log.write_text(text)
    return run_cli("import", "--layers", str(log), "--profile", str(log), "--out", str(tmp_path / "s.json"))


def _one_line(result, words: str) -> None:
    assert result.returncode == 2, result.stdout
    assert len(result.stderr.strip().splitlines()) == 1 and words in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize("cell", ["nan", "inf", "-nan", "1e400", "-0.0250"])
def test_a_cell_that_is_not_a_time_is_one_line_never_the_end_of_the_table(tmp_path: Path, cell: str) -> None:
    """H2 (nan, inf, -nan), M6 (1e400: an OverflowError before), L10 (a negative Avg. cell, never checked before)."""
    result = _import(tmp_path, TRT10.read_text().replace(CONV_ROW, CONV_ROW.replace("0.0250", cell)))
    _one_line(result, "profile row")


def test_a_zero_spelled_with_an_exponent_past_any_float_is_read_never_a_traceback(tmp_path: Path) -> None:
    """`0e400` in the Avg. column: its rounding step overflowed a float (an OverflowError before); the row's Time over
    the iterations is then the finer figure."""
    text = TRT10.read_text()
    iterations = int(re.search(r"=== Profile \((\d+) iterations", text).group(1))
    result = _import(tmp_path, text.replace(CONV_ROW, CONV_ROW.replace("0.0250", "0e400")))
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    times = {layer.name: layer.time_ms for layer in storage.load(tmp_path / "s.json").variants[0].layers}
    assert times["/conv1/Conv + /relu1/Relu"] == pytest.approx(50.00 / iterations)


def test_a_table_cut_before_its_total_is_one_line(tmp_path: Path) -> None:
    text = TRT10.read_text()
    cut = text[:text.index("/pool/GlobalAveragePool\n") + len("/pool/GlobalAveragePool\n")]
    _one_line(_import(tmp_path, cut), "ends before its Total row")


def test_a_warning_inside_the_table_is_passed_over_and_every_row_read(tmp_path: Path) -> None:
    warning = "[01/02/2026-10:00:05] [W] [TRT] Profiler: a message another thread printed\n"
    text = TRT10.read_text().replace(CONV_ROW + "\n", CONV_ROW + "\n" + warning)
    result = _import(tmp_path, text)
    assert result.returncode == 0, result.stderr
    rows = {name: float(avg) for _, avg, name in ROW.findall(text) if name != "Total"}
    variant = storage.load(tmp_path / "s.json").variants[0]
    assert {layer.name: layer.time_ms for layer in variant.layers} == pytest.approx(rows) and len(rows) == 4
    assert not any("did not run" in note or "no row" in note for note in variant.notes)


def test_an_unreadable_file_beside_the_engine_is_left_with_its_reason(tmp_path: Path, monkeypatch) -> None:
    shutil.copy(TRT10, tmp_path / "run.log")
    (tmp_path / "private.json").write_text("{}")
    real_open = os.open

    def refusing(path, *args, **kwargs):  # what EACCES does to a user without read permission (tests run as root)
        if Path(path).name == "private.json":
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", refusing)  # the one reader (`read_file_head`) opens files by descriptor
    found = files_of_folder(tmp_path)
    assert found.left == [f"private.json (cannot read {tmp_path / 'private.json'}: Permission denied)"]
    assert len(found.engines) == 1


def test_a_folder_deeper_than_path_max_is_one_line(tmp_path: Path) -> None:
    deep = str(tmp_path) + "/" + "/".join(["d" * 200] * 25)  # 5,000 characters: past PATH_MAX (4096)
    _one_line(run_cli("import", deep, "--out", str(tmp_path / "s.json")), "cannot be read")


def test_an_unwritable_target_is_one_line(tmp_path: Path) -> None:
    shutil.copy(TRT10, tmp_path / "run.log")
    (tmp_path / "file").write_text("a file, not a folder")
    result = run_cli("import", str(tmp_path), "--out", str(tmp_path / "file" / "s.json"))
    _one_line(result, str(tmp_path / "file" / "s.json"))


@pytest.mark.parametrize("target", ["--out", "--into"])
def test_a_target_the_system_refuses_is_one_line(tmp_path: Path, target: str) -> None:
    """A session file name past NAME_MAX (255 bytes): the OS refuses it; exit 1 with a bare OS message before."""
    shutil.copy(TRT10, tmp_path / "run.log")
    _one_line(run_cli("import", str(tmp_path), target, str(tmp_path / ("s" * 300 + ".json"))), "File name too long")


def test_a_large_log_is_classified_without_parsing_its_layers_and_parsed_once(tmp_path: Path, monkeypatch) -> None:
    """L2: classifying a folder reads no layer record; the import parses each record once (twice before)."""
    text = TRT10.read_text()
    record = next(line for line in text.split("\n") if line.startswith("Name: /pool/"))
    many = "\n".join(record.replace("/pool/GlobalAveragePool", f"/pool{i}/GlobalAveragePool") for i in range(2000))
    (tmp_path / "big.log").write_text(text.replace(record, many))
    parsed: list[str] = []
    real = Shapes.read
    monkeypatch.setattr(Shapes, "read", lambda shapes, line: parsed.append(line) or real(shapes, line))
    found = files_of_folder(tmp_path)
    assert parsed == []  # the block's headings tell it is there
    parsed.clear()
    from profilers.trt_import.importer import import_variant

    with pytest.raises(Exception, match="does not pair|profile"):  # the table names 4 of the 2,003 layers
        import_variant(found.engines[0].files)
    assert len([line for line in parsed if "LayerType: " in line]) == 2003  # each layer's record once


def test_a_huge_json_file_is_classified_by_its_opening(tmp_path: Path, monkeypatch) -> None:
    """L3: a 1 GiB sparse file opening `{"Layers": [` beside an engine is never read whole to classify it."""
    shutil.copy(TRT10, tmp_path / "run.log")
    huge = tmp_path / "huge.json"
    with huge.open("wb") as handle:
        handle.write(b'{"Layers": [')
        handle.truncate(1 << 30)
    read: list[str] = []
    real = documents.read_regular_file
    monkeypatch.setattr(documents, "read_regular_file", lambda path, *a, **k: read.append(Path(path).name) or real(
        path, *a, **k))
    found = files_of_folder(tmp_path)
    assert "huge.json" not in read
    (engine,) = found.engines
    assert engine.files.one("layers") == huge  # a JSON layer file ranks above a log's block: the import reads it
    os.unlink(huge)


@pytest.mark.parametrize("value", [1e-9, 5e-324])
def test_a_time_under_a_nanosecond_is_refused_as_it_is_read_not_when_the_session_is_saved(value):
    """A session holds 0 or at least a nanosecond (sessions.documents.codec); an imported time in between is the
    file's fault, named with its place, exit 2."""
    from profilers.trt_import.documents import plain_time_ms, time_ms
    from sessions.documents.errors import InputError

    with pytest.raises(InputError, match="profile.json: layer 0"):
        time_ms(value, "profile.json: layer 0")
    assert plain_time_ms(value) is None and time_ms(0.0, "x") == 0.0 and time_ms(1e-6, "x") == 1e-6
