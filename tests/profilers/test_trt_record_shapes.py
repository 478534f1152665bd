"""A one-line record read by the shape learnt from another record of its block (`record_shapes`) is the
record `parse_record` reads: on every record of the committed and the real logs, on 40,000 records mutated around
what the shapes' patterns read (brackets, commas, keys, spaces, a tensor record's fields), and through a block whose
shapes change."""

from __future__ import annotations

import random

import pytest

from profilers.trt_import import record_shapes
from profilers.trt_import.layer_info import READ_KEYS
from profilers.trt_import.one_line_records import parse_record, whole_scan
from profilers.trt_import.record_shapes import Shapes, learn
from tests.conftest import TESTS
from tests.profilers.test_trt_text_records import RECORDS, mutant

COMMITTED = [line.strip() for line in (TESTS / "data" / "trt_text" / "trt10-dumplayerinfo-dumpprofile.log")
             .read_text().split("\n") if line.startswith("Name: ") and ", LayerType: " in line]
ALL = COMMITTED + RECORDS
# what a shape's pattern reads: its keys, the ends of its runs, a tensor record's fields and the list around it
SHAPE_PIECES = [" ", ",", ", ", ":", "a", "0", "-", "{", "}", "[", "]", "(", ")", ", Name: ", ", Location: Device",
                ", Dimensions: [1]", " }", "{ ", ", Key: ", ", LayerType: ", "Format/Datatype: ", "\x1e"]


def shape_of(text: str) -> record_shapes.Shape:
    pairs = whole_scan(text)
    assert pairs is not None, text
    shape = learn(pairs, READ_KEYS)
    assert shape is not None, text
    return shape


def test_every_record_is_read_by_its_own_shape_as_parse_record_reads_it():
    tensors = 0
    for text in ALL:
        assert shape_of(text).read(text) == parse_record(text, READ_KEYS), text
        tensors += "(?:, Location: [A-Za-z]+)?" in shape_of(text).pattern.pattern
    assert len(COMMITTED) == 4 and tensors >= 4  # the one-tensor lists are read by the shape's own fields


@pytest.mark.parametrize("pieces", [None, SHAPE_PIECES])
def test_a_mutated_record_is_read_by_the_shape_as_parse_record_reads_it_or_not_by_the_shape(pieces):
    rng = random.Random(41)
    shapes = {text: shape_of(text) for text in ALL}
    taken = 0
    for _ in range(20_000):
        learnt = rng.choice(ALL)
        text = mutant(rng, learnt) if pieces is None else mutant(rng, learnt, pieces, 3)
        found = shapes[learnt].read(text)
        if found is not None:
            assert found == parse_record(text, READ_KEYS), text
            taken += 1
    assert 2_000 < taken < 18_000  # both ways are tried: the shape's and the refusal that sends it to parse_record


def test_a_record_with_a_key_twice_has_no_shape():
    pairs = whole_scan("Name: a, LayerType: b, Name: c")
    assert pairs is not None and learn(pairs, READ_KEYS) is None


def test_a_block_whose_shapes_change_is_read_record_by_record_as_parse_record_reads_it(monkeypatch):
    rng = random.Random(7)
    variants = ALL + [mutant(rng, rng.choice(ALL)) for _ in range(20)]  # a few shapes to a layer type, some odd
    block = [rng.choice(variants) for _ in range(3_000)]
    shapes = Shapes(READ_KEYS)
    assert [shapes.read(text) for text in block] == [parse_record(text, READ_KEYS) for text in block]
    assert 3 < shapes.learnt < 20
    monkeypatch.setattr(record_shapes, "MOST_LEARNT", 1)  # none learnt past the bound: every record still read
    shapes = Shapes(READ_KEYS)
    assert [shapes.read(text) for text in block] == [parse_record(text, READ_KEYS) for text in block]
    assert shapes.learnt == 1
