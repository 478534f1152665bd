"""`trt-inspect import DIR`: the files of one engine found in a folder by name and content, an ambiguous folder refused.

The expected files come from `tests/trt_sets.py` (plain json over the raw files of ../shared/fixtures).
"""

from __future__ import annotations

import pytest

from profilers.trt_import.folder import files_of_folder
from sessions.documents import storage
from sessions.documents.errors import InputError
from tests.conftest import run_cli
from tests.trt_sets import engines, set_folders

SINGLE = [folder for folder in set_folders() if len(engines(folder)) == 1]
MANY = [folder for folder in set_folders() if len(engines(folder)) > 1]


@pytest.mark.parametrize("folder", SINGLE, ids=[f"{f.parent.name}/{f.name}" for f in SINGLE])
def test_a_folder_of_one_engine_gives_its_layer_profile_and_times_files(folder):
    engine = engines(folder)[0]
    found = files_of_folder(folder)
    assert [found.files.one(role) for role in ("layers", "profile", "times")] == [engine.layers, engine.profile,
                                                                                engine.times]
    assert set(engine.logs) <= set(found.files.every("metadata"))
    assert {p.name for p in found.left} >= {"SOURCE.md", "SHA256SUMS"} & {p.name for p in folder.iterdir()}


@pytest.mark.parametrize("folder", MANY, ids=[f.name for f in MANY])
def test_a_folder_of_several_engines_is_refused_naming_them(folder):
    with pytest.raises(InputError, match=f"holds {len(engines(folder))} engines"):
        files_of_folder(folder)


def test_the_command_imports_a_folder_and_says_what_it_took_and_left(tmp_path):
    folder = next((f for f in SINGLE if f.name == "trt8.4-resnet-a100-fp32"), None)
    if folder is None:
        pytest.skip("shared fixtures are not beside the checkout")
    out = tmp_path / "s.json"
    result = run_cli("import", str(folder), "--out", str(out))
    assert result.returncode == 0, result.stderr
    note = storage.load(out).variants[0].notes[0]
    assert note.startswith(f"from {folder}: took resnet.onnx.engine.graph.json, resnet.onnx.engine.profile.json, "
                           "resnet.onnx.engine.timing.json") and "left SHA256SUMS, SOURCE.md" in note
    refused = run_cli("import", str(folder), "--layers", str(folder / "resnet.onnx.engine.graph.json"), "--out", str(out))
    assert refused.returncode == 2 and "not both" in refused.stderr
    if MANY:
        many = run_cli("import", str(MANY[0]), "--out", str(tmp_path / "m.json"))
        assert many.returncode == 2 and "engines (" in many.stderr and len(many.stderr.strip().splitlines()) == 1
