"""Layouts of real trtexec logs the importer reads: 8.6's names-only `--dumpLayerInfo` block (TensorRT's
warning between its headings), and 10.x tables whose Myelin layers are one row a kernel beside a verbose
build's layer list that names each Myelin layer once.

The fixtures are hand-written in the layouts of public logs (tests/data/trt_text/README.md names them);
expected figures come from plain regular expressions over the fixtures, never from the importer's code.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from profilers.trt_import.importer import ImportFiles, import_variant
from sessions.documents.errors import InputError
from tests.conftest import TESTS

TEXT = TESTS / "data" / "trt_text"
NAMES_ONLY = TEXT / "trt8-namesonly-dumplayerinfo.log"
MYELIN = TEXT / "trt10-verbose-myelin-dumpprofile.log"
PASTED = TEXT / "trt7-pasted-dumpprofile.log"
BRACKETED = TEXT / "trt8-verbose-bracketed-tensors.log"
ROW = re.compile(r"^\[[^\]]*\] \[I\] +[\d.]+ +([\d.]+) +[\d.]+ +[\d.]+ +(.+)$", re.MULTILINE)  # Avg.(ms), Layer


def test_a_names_only_dump_with_tensorrts_warning_between_its_headings_gives_its_names() -> None:
    text = NAMES_ONLY.read_text()
    block = re.search(r"\] Layers:\n(.*?)\n\nBindings:\n", text, re.DOTALL)
    summary = re.search(r"GPU Compute Time: .*?median = ([\d.]+) ms", text)
    assert block is not None and summary is not None
    imported = import_variant(ImportFiles.of(layers=NAMES_ONLY, profile=None, find_metadata=False))
    assert [layer.name for layer in imported.variant.layers] == block.group(1).split("\n")
    assert len(imported.variant.layers) == 4
    assert imported.facts.gpu_compute_median_ms == float(summary.group(1))
    assert imported.facts.tensorrt == "8.6.0" and imported.batch == 4


def _expected_times(text: str) -> list[tuple[str, float]]:
    """Each layer of the `Layer(...)` lines with its Avg.(ms): its own row, else (a Myelin layer at index i) the
    rows `..._myl<i>_<k>`, else 0 (a layer that did not run has no row)."""
    layers = re.findall(r"^Layer\((\w+)\): (.*?), Tactic: ", text, re.MULTILINE)
    rows = {name: float(avg) for avg, name in ROW.findall(text) if name != "Total"}
    expected = []
    for index, (kind, name) in enumerate(layers):
        kernels = [avg for row, avg in rows.items() if re.search(rf"_myl{index}_\d+$", row)] if kind == "Myelin" else []
        expected.append((name, rows.get(name, sum(kernels))))
    return expected


def test_myelin_kernel_rows_sum_into_the_myelin_layer_their_index_names() -> None:
    text = MYELIN.read_text()
    expected = _expected_times(text)
    total = re.search(r"\[I\] +[\d.]+ +([\d.]+) +[\d.]+ +[\d.]+ +Total$", text, re.MULTILINE)
    assert total is not None and len(expected) == 7
    variant = import_variant(ImportFiles.of(layers=MYELIN, profile=MYELIN, find_metadata=False)).variant
    assert [layer.name for layer in variant.layers] == [name for name, _ in expected]
    assert [layer.time_ms for layer in variant.layers] == pytest.approx([ms for _, ms in expected])
    assert sum(layer.time_ms or 0 for layer in variant.layers) == pytest.approx(float(total.group(1)))
    myelin = [layer for layer in variant.layers if layer.kind == "Myelin"]
    assert len(myelin) == 2 and all("median_ms" not in layer.attrs for layer in myelin)  # a sum of medians is no median
    assert any(note.startswith("6 kernel records of 2 Myelin layers summed") for note in variant.notes)


def test_kernel_rows_whose_index_names_no_myelin_layer_are_summed_into_nothing(tmp_path: Path) -> None:
    moved = tmp_path / "moved.log"
    moved.write_text(re.sub(r"_myl[46]_", "_myl3_", MYELIN.read_text()))  # layer 3 is the NoOp /flatten/Flatten
    with pytest.raises(InputError, match="does not pair"):
        import_variant(ImportFiles.of(layers=moved, profile=moved, find_metadata=False))


def test_a_7x_log_pasted_without_time_stamps_reads_its_rows_at_their_finer_rounding(tmp_path: Path) -> None:
    paste = tmp_path / "paste.log"
    paste.write_text("".join(line for line in PASTED.read_text().splitlines(True) if not line.startswith("#")))
    text = paste.read_text()
    iterations = re.search(r"=== Profile \((\d+) iterations", text)
    median = re.search(r"^\[I\] median: ([\d.]+) ms$", text, re.MULTILINE)
    rows = re.findall(r"^\[I\] +(.+?) +([\d.]+) +[\d.]+ +[\d.]+$", text, re.MULTILINE)
    assert iterations is not None and median is not None and rows[-1][0] == "Total" and len(rows) == 7
    imported = import_variant(ImportFiles.of(layers=None, profile=paste, find_metadata=False))
    layers = imported.variant.layers
    assert [layer.name for layer in layers] == [name for name, _ in rows[:-1]]
    # Time (2 decimals) over 1500 iterations is finer than Avg.'s 2 decimals: `fc1 finish` prints 0.00, runs 0.003 ms
    assert [layer.time_ms for layer in layers] == pytest.approx([float(ms) / int(iterations.group(1))
                                                                 for _, ms in rows[:-1]])
    assert imported.facts.gpu_compute_median_ms == float(median.group(1))


def test_verbose_lines_of_8_0_to_8_4_give_each_layer_its_tensors() -> None:
    text = BRACKETED.read_text()
    lines = re.findall(r"^Layer\((\w+)\): (.*?), Tactic: (-?\d+), (.*?) -> (.*)$", text, re.MULTILINE)
    words = {"Float": "fp32", "Half": "fp16"}  # the two data types the fixture writes

    def tensors(side: str) -> list[tuple[str, str, list[int]]]:
        return [(name, words[dtype], [int(d) for d in dims.split(",")])
                for name, dtype, dims in re.findall(r"(.+?)\[(\w+)\(([-\d,]+)\)\](?:, |$)", side)]

    layers = import_variant(ImportFiles.of(layers=BRACKETED, profile=None, find_metadata=False)).variant.layers
    assert len(layers) == len(lines) == 5
    for layer, (kind, name, tactic, inputs, outputs) in zip(layers, lines, strict=False):
        assert (layer.kind, layer.name, layer.tactic) == (kind, name, tactic)
        assert [(t.name, t.dtype, t.shape) for t in layer.inputs] == tensors(inputs)
        assert [(t.name, t.dtype, t.shape) for t in layer.outputs] == tensors(outputs)
    assert [layer.precision for layer in layers if layer.kind != "Reformat"] == ["fp16"] * 3


def test_a_run_of_a_loaded_engine_states_no_build_option() -> None:
    text = NAMES_ONLY.read_text()
    assert re.search(r"^&&&& RUNNING .*--loadEngine=", text, re.MULTILINE) and "] Precision: FP32\n" in text
    imported = import_variant(ImportFiles.of(layers=NAMES_ONLY, profile=None, find_metadata=False))
    # trtexec prints its default `Precision: FP32` for any loaded engine: the names-only layers leave it unknown
    assert imported.facts.precision is None and imported.facts.build_flags == {}
    assert imported.variant.precision == "unknown"


@pytest.mark.parametrize("fixture", [MYELIN, BRACKETED, PASTED], ids=lambda p: p.stem)
def test_a_file_of_several_runs_is_refused_never_joined(tmp_path: Path, fixture: Path) -> None:
    joined = tmp_path / "joined.log"
    joined.write_text(fixture.read_text() * 2)  # a script's log of two trtexec runs
    text = joined.read_text()
    layers, profile = (joined if "Layer(" in text else None), (joined if "=== Profile (" in text else None)
    with pytest.raises(InputError, match="a file of several runs"):
        import_variant(ImportFiles.of(layers=layers, profile=profile, find_metadata=False))
