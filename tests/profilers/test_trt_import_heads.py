"""A folder's JSON files classified by their first HEAD_BYTES, checked against every real JSON file of
../shared/fixtures (trt and trtexec, read where they lie): the head names the kind the whole document is, a
benchmark script's result never ties with the IProfiler samples or the layer file beside it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from profilers.trt_import.folder import files_of_folder
from profilers.trt_import.kinds import HEAD_BYTES, kind_of, kind_of_head
from profilers.trt_import.text_layers import opens_as_json
from tests.trt_sets import SHARED, set_folders

TORCH_TRT = SHARED / "trt" / "trt10-mobilenetv2-fp16-torchtrt-api"  # a benchmark result beside samples and layers


def json_files() -> list[Path]:
    """Every fixture file that opens as a JSON document (a double-encoded one too), as the folder reader tells."""
    found = []
    for folder in set_folders():
        for path in sorted(folder.iterdir()):
            head = path.read_bytes()[:HEAD_BYTES].decode("utf-8", "replace")
            if opens_as_json(head) or head.lstrip().startswith('"'):
                found.append(path)
    return found


JSON_FILES = json_files()


def whole(path: Path) -> object:
    """The document of `path` read whole with plain `json`, a double-encoded one decoded."""
    doc = json.loads(path.read_text())
    return json.loads(doc) if isinstance(doc, str) else doc


@pytest.mark.parametrize("path", JSON_FILES, ids=[f"{p.parent.name}/{p.name}" for p in JSON_FILES])
def test_the_head_of_every_real_json_file_names_the_kind_its_whole_document_is(path: Path) -> None:
    head = path.read_bytes()[:HEAD_BYTES].decode("utf-8", "replace")
    assert kind_of_head(head) == kind_of(whole(path))


def test_the_fixtures_hold_every_json_kind_the_heads_tell_apart() -> None:
    """The check above covers a file of each kind, large ones (their kind decided in the first 4 KiB of MiBs) too."""
    if not JSON_FILES:
        pytest.skip("shared fixtures are not beside the checkout")
    kinds = {kind_of_head(p.read_bytes()[:HEAD_BYTES].decode("utf-8", "replace")) for p in JSON_FILES}
    assert len(kinds - {None}) == 8
    assert max(p.stat().st_size for p in JSON_FILES) > 100 * HEAD_BYTES


def test_a_benchmark_result_beside_samples_and_layers_fills_its_own_role() -> None:
    if not TORCH_TRT.is_dir():
        pytest.skip("shared fixtures are not beside the checkout")
    (engine,) = files_of_folder(TORCH_TRT).engines
    assert engine.files.one("layers") == TORCH_TRT / "trt_engine_info.json"
    assert engine.files.one("profile") == TORCH_TRT / "trt_layer_latency.json"
    assert engine.files.every("benchmark") == [TORCH_TRT / "mobilenet_v2_tensorrt_20241025-082821.json"]
