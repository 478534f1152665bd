"""Truth tables: every engine of every real set in ../shared/fixtures/trt and ../shared/fixtures/trtexec.

The expected values come from `tests/trt_sets.py` (plain json and regular expressions over the raw
files); the importer and the grouping rules must agree with them. A set that fails to import fails
with its folder name; without ../shared beside the checkout the test skips, which CI turns into a failure.
"""

from __future__ import annotations

import pytest

from profilers.trt_import.importer import ImportFiles, import_variant
from sessions.analyses.groups import load_rules, role_of
from sessions.documents.errors import InputError
from tests.trt_sets import Engine, engines, median_compute_ms, set_folders, summed_profile_ms, truth

RULES = load_rules()
ENGINES = [engine for folder in set_folders() for engine in engines(folder)]


def imported(engine: Engine):
    try:
        return import_variant(ImportFiles.of(layers=engine.layers, profile=engine.profile, times=engine.times,
                                             metadata=list(engine.logs)))
    except InputError as exc:
        raise AssertionError(f"{engine.label} does not import: {exc}") from None


def test_every_set_of_both_folders_is_here():
    if not ENGINES:
        pytest.skip("../shared/fixtures is not beside the checkout")
    folders = {engine.folder.name for engine in ENGINES}
    # folders of trtexec logs alone are read whole by `import DIR` (tests/profilers/test_trt_import_folder.py)
    logs = {folder.name for folder in set_folders() if folder.name not in folders
            and any(path.suffix in (".log", ".txt") for path in folder.iterdir())}
    assert len(folders) >= 24 and folders | logs == {folder.name for folder in set_folders()}, \
        "a set folder with neither an engine the test can find nor trtexec logs"


@pytest.mark.parametrize("engine", ENGINES, ids=[engine.label for engine in ENGINES])
def test_counts_times_and_precisions_agree_with_the_raw_files(engine):
    expected = truth(engine)
    variant = imported(engine).variant
    assert len(variant.layers) == expected.layers
    summed = summed_profile_ms(engine)
    if summed is not None:
        assert sum(layer.time_ms or 0.0 for layer in variant.layers) == pytest.approx(summed, rel=1e-9)
    median = median_compute_ms(engine)
    assert (variant.latency.median_ms if variant.latency else None) == (pytest.approx(median) if median else None)
    precisions = [layer.precision for layer in variant.layers]
    assert all(precisions[i] == "int8" for i in expected.int8_layers)
    assert all(precisions[i] == "fp16" for i in expected.fp16_layers)
    assert all(precisions[i] is not None for i in expected.stated_layers)
    if not expected.stated_layers and not engine.logs:
        assert precisions == [None] * len(precisions)  # names-only: unknown, never guessed per layer


@pytest.mark.parametrize("engine", ENGINES, ids=[engine.label for engine in ENGINES])
def test_roles_agree_with_the_layer_types_the_files_state(engine):
    expected = truth(engine)
    roles = [role_of(layer, RULES) for layer in imported(engine).variant.layers]
    assert roles.count("reformat") + roles.count("DLA") == expected.reformat + expected.dla
    assert roles.count("quantize / dequantize") == expected.qdq
    assert roles.count("shuffle / slice / padding") == expected.shuffle
    assert roles.count("depthwise convolution") == expected.depthwise
    assert roles.count("Myelin region") == expected.myelin
