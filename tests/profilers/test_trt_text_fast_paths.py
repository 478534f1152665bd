"""The shortcuts a 100,000-layer log is read by give what the general reading gives: a tensor record
read by one match (`one_line_records.TENSOR_RECORD`) is `parse_record`'s, a log is checked for several runs once
however often it is read (each mark counted where a part it shares is found twice), a refused profile cell is named
by its row and column as before, a stamped profile row read by one match is the row read line by line, a log's
first lines are those `split` gives, and a layer's ONNX nodes are those the lazy pattern found."""

from __future__ import annotations

import random
import re

import pytest

from profilers.trt_import import layer_info, metadata, one_line_records, text_layers, text_profile
from profilers.trt_import.layer_info import TENSOR_KEYS
from profilers.trt_import.text_profile import NUMBER, _row_pattern, parse_text_profile
from sessions.documents.errors import InputError
from tests.conftest import TESTS
from tests.profilers.test_trt_text_records import RECORDS, mutant

TRT10 = TESTS / "data" / "trt_text" / "trt10-dumplayerinfo-dumpprofile.log"
CONV_ROW = "      50.00       0.0250       0.0248      50.0   /conv1/Conv + /relu1/Relu"
TENSORS = [
    "Name: image, Location: Device, Dimensions: [2,3,32,32], Format/Datatype: Row major linear FP32",
    "Name: relu_2.1_myl4, Dimensions: [1024,1], Format/Datatype: Float",
    "Name: a: b, Location: Device, Dimensions: [-1,3], Format/Datatype: 7",
    "Name: , Location: Device, Dimensions: [], Format/Datatype: ",
]


def tensor_records() -> list[str]:
    """Every tensor record of the fixtures' layer records, as `_parse_record` gives it to the reader."""
    found = list(TENSORS)
    for text in RECORDS:
        record = dict(one_line_records._pairs(text))
        for key in ("Inputs", "Outputs"):
            if "{" in record.get(key, ""):
                found += one_line_records._groups(record[key].strip()[1:-1])
    return found


def test_a_tensor_record_read_by_one_match_is_the_records_reading():
    taken = 0
    for text in tensor_records():
        assert one_line_records._tensor_record(text) == one_line_records.parse_record(text, TENSOR_KEYS), text
        taken += one_line_records.TENSOR_RECORD.fullmatch(text) is not None
    assert taken >= 40  # the shortcut is the one taken


SHAPE_PIECES = [" ", ":", ", ", ",", "a", "Z", "0", "-", "/", "\x1e", "Key: ", ", Location: ", ", Name: ", "]", "["]


def near_shape(rng: random.Random, text: str) -> str:
    """`text` with one to three characters or words changed that a tensor record's match reads: spaces, colons,
    commas, keys and signs, so that many mutants still match and each boundary of the match is tried."""
    return mutant(rng, text, SHAPE_PIECES, 3)


@pytest.mark.parametrize("change", [mutant, near_shape])
def test_mutated_tensor_records_are_read_as_the_record_reads_them(change):
    rng = random.Random(41)
    records = tensor_records()
    taken = 0
    for _ in range(20_000):
        text = change(rng, rng.choice(records))
        assert one_line_records._tensor_record(text) == one_line_records.parse_record(text, TENSOR_KEYS), text
        taken += one_line_records.TENSOR_RECORD.fullmatch(text) is not None
    assert 1_000 < taken < 19_000  # both ways are tried


def test_a_log_of_one_run_is_passed_and_one_of_two_refused_whatever_was_checked_before():
    one = "&&&& RUNNING trtexec --onnx=a.onnx\n" + "x" * 24 + "\n"
    two = "&&&& RUNNING trtexec --onnx=a\n&&&& RUNNING trtexec --onnx=b\n"
    assert len(one) == len(two)
    for _ in range(2):
        text_layers.one_run(one, "one.log")
        with pytest.raises(InputError, match="2 `&&&& RUNNING` lines"):
            text_layers.one_run(two, "two.log")
    same_text = "".join(["&&&& RUNNING trtexec --onnx=a.onnx\n", "x" * 24, "\n"])  # equal, not the same object
    text_layers.one_run(same_text, "again.log")


BOUNDS = "(0 or at least a nanosecond and at most 1e+09 ms)"


@pytest.mark.parametrize(("cells", "message"), [
    (("-1.00", "0.0250", "0.0248", "50.0"), f"t.log: profile row 1 Time = -1 ms, not a time a run measures {BOUNDS}"),
    (("50.00", "1e400", "0.0248", "50.0"), "t.log: profile row 1 Avg. is inf, not a finite number"),
    (("50.00", "0.0250", "2e9", "50.0"), f"t.log: profile row 1 Median = 2e+09 ms, not a time a run measures {BOUNDS}"),
    (("50.00", "0.0250", "0.0248", "150.0"), "t.log: profile row 1 Time % = 150 %, not a share of a run (0 to 100)"),
])
def test_a_refused_cell_is_named_by_its_row_and_column(cells, message):
    row = CONV_ROW.replace("50.00", cells[0], 1).replace("0.0250", cells[1]).replace("0.0248", cells[2])
    row = row.replace("50.0   /conv1", f"{cells[3]}   /conv1")
    with pytest.raises(InputError) as refused:
        parse_text_profile(TRT10.read_text().replace(CONV_ROW, row), "t.log")
    assert refused.value.message == message


@pytest.mark.parametrize("text", ["", "a", "a\n", "a\nb", "\n\n\n", "x\n" * 5, "x\n" * 3 + "y"])
def test_a_logs_first_lines_are_those_split_gives(text):
    for count in range(7):
        assert metadata._first_lines(text, count) == text.split("\n", count)[:count]


@pytest.mark.parametrize("mark", text_layers.ONCE_A_RUN)
def test_each_mark_of_one_run_is_counted_whatever_part_it_shares(mark):
    """Every mark once passes (a part two marks share is then found twice); any mark twice is refused by its count,
    beside the other marks or alone."""
    once = "\n".join(f"[I] {each} x" for each in text_layers.ONCE_A_RUN) + "\n"
    text_layers.one_run(once, "once.log")
    for text in (once + f"[I] {mark} again\n", f"[I] {mark} x\n[I] {mark} again\n"):
        with pytest.raises(InputError, match=re.escape(f"2 `{mark.strip('] ')}` lines")):
            text_layers.one_run(text, "twice.log")


TABLE_PIECES = [" ", "  ", "\t", "x", "0", "1.5", "-", "e3", "[", "]", "[W] ", "[I] ", ":", "Total", "\x1e", "nan"]
STAMP = "[01/02/2026-10:00:05] "


def read_profile(text: str) -> object:
    """The profile a log's table gives, or the line it is refused with."""
    try:
        return parse_text_profile(text, "t.log")
    except InputError as refused:
        return refused.message


def test_a_stamped_row_read_by_one_match_is_the_row_read_line_by_line(monkeypatch):
    """A row read by one match (`STAMPED_INFO` and the row) is the row read line by line (its prefix taken off, then
    the row's match): 3,000 tables with one row changed after its `[I]` (half of them within its first characters)
    or made another level's line, read both ways."""
    text = TRT10.read_text()
    rows = [line for line in text.split("\n") if line.startswith(STAMP + "[I]     ")]
    rng = random.Random(41)
    tables = []
    for _ in range(3_000):
        rest = rng.choice(rows).removeprefix(STAMP + "[I]")
        if rng.random() < 0.5:  # where the prefix's match ends, the row's spaces kept
            at = rng.randrange(4)
            changed = rest[:at] + rng.choice(TABLE_PIECES) + rest[at + rng.randrange(2):]
        else:
            changed = mutant(rng, rest, TABLE_PIECES, 2)
        level = rng.choice(["[I]"] * 8 + ["[W]", "[V]"])  # a warning another thread printed: passed over
        tables.append(text.replace(STAMP + "[I]" + rest, STAMP + level + changed))
    found = [read_profile(table) for table in tables]
    monkeypatch.setattr(text_profile, "STAMPED_INFO", "(?!)")  # no line read by one match
    assert found == [read_profile(table) for table in tables]
    assert 300 < sum(not isinstance(each, str) for each in found) < 2_700  # tables read and tables refused


@pytest.mark.parametrize("name", ["/fc/Gemm", "a b  ", " x\x1f ", "", "   ", "Total\t", "[profile 1]  "])
def test_a_name_last_is_the_lazy_names(name):
    """`_row_pattern`'s name last (all up to its last character not a space) is what `(.*?)\\s*$` takes."""
    columns = ["total_ms", "average_ms", "median_ms", "percentage", "name"]
    lazy = re.compile(r"^\s*" + r"\s+".join([f"({NUMBER})"] * 4) + r"\s+(.*?)\s*$")
    for line in (f"  1.00   0.0100  0.0100  1.0   {name}", f"1.00 0.0100 0.0100 1.0 {name}\r"):
        found = _row_pattern(columns).match(line)
        assert found is not None and found.groups() == lazy.match(line).groups()


def test_a_layers_onnx_nodes_are_the_lazy_patterns():
    """`ONNX_LAYER` (a name up to the first `]` or line end) finds what `\\[ONNX Layer: (.*?)\\]` finds, with the
    separators replaced by spaces as `SEPARATORS.sub` replaced them, on 20,000 changed metadata texts."""
    lazy = re.compile(r"\[ONNX Layer: (.*?)\]")
    rng = random.Random(41)
    pieces = ["[ONNX Layer: ", "]", "[", "\n", "\x1e", "\x1f", " ", "a", "/Conv", "ONNX\x1eLayer"]
    for _ in range(20_000):
        metadata = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 12)))
        nodes = layer_info.ONNX_LAYER.findall(metadata.replace("\x1e", " ").replace("\x1f", " "))
        assert nodes == lazy.findall(layer_info.SEPARATORS.sub(" ", metadata)), metadata
