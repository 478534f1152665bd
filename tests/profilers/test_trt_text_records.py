"""The one-line records of a `--dumpLayerInfo` block cut into `Key: value` pairs: the C-level scan
(`one_line_records.scan`) gives what `_split_top` (the depth counted piece by piece) gives, on every record of the
real logs of ../shared/fixtures and on 20,000 records mutated around brackets, commas and keys."""

from __future__ import annotations

import random

import pytest

from profilers.trt_import import one_line_records
from tests.trt_sets import set_folders

PIECES = [*"[]{}(),: aZ0/-\x1e\t", ", Name: ", ", Ab : ", ", K:", ": ", ", x", "[[[[", "]]", ", Key:",
          "{ Name: q, Dimensions: [1,2] }"]  # what moves a record's split: brackets, commas, keys spelled oddly


def records() -> list[str]:
    """Every one-line layer record of the fixtures' logs."""
    found = []
    for folder in set_folders():
        for path in sorted(folder.iterdir()):
            lines = path.read_bytes().decode("utf-8", "replace").split("\n")
            found += [line.strip() for line in lines if line.startswith("Name: ") and ", LayerType: " in line]
    return found


RECORDS = records()


def split_top(text: str) -> list[tuple[str, str]]:
    """The pairs `_split_top` cuts: each part at its first `:`, the key stripped."""
    parts = one_line_records._split_top(text)
    return [(key.strip(), value) for key, _, value in (part.partition(":") for part in parts)]


def mutant(rng: random.Random, text: str, pieces: list[str] = PIECES, most: int = 4) -> str:
    """`text` with one to `most` characters inserted, replaced or removed, the new ones drawn from `pieces`."""
    chars = list(text)
    for _ in range(rng.randint(1, most)):
        at = rng.randrange(len(chars) + 1)
        if rng.random() < 0.5:
            chars.insert(at, rng.choice(pieces))
        elif at < len(chars):
            chars[at] = rng.choice(pieces) if rng.random() < 0.5 else ""
    return "".join(chars).strip()


def test_every_real_record_is_cut_by_the_scan_as_split_top_cuts_it():
    if not RECORDS:
        pytest.skip("shared fixtures are not beside the checkout")
    for text in RECORDS:
        scanned = one_line_records.scan(text)
        assert ", ".join(map(":".join, scanned)) == text  # the fast path takes it
        assert scanned == split_top(text)


def test_mutated_records_are_cut_as_split_top_cuts_them():
    if not RECORDS:
        pytest.skip("shared fixtures are not beside the checkout")
    rng = random.Random(41)
    scanned = 0
    for _ in range(20_000):
        text = mutant(rng, rng.choice(RECORDS))
        assert one_line_records._pairs(text) == split_top(text), text
        scanned += ", ".join(map(":".join, one_line_records.scan(text))) == text
    assert 5_000 < scanned < 19_000  # both ways are tried: the scan's and the one it falls back to


@pytest.mark.parametrize("text", ["", "{ }", "Name:", "Name: a, b", "x, Name: a", "Name : a, B: c", "Name: [a, B: c"])
def test_edge_records_are_cut_as_split_top_cuts_them(text):
    assert one_line_records._pairs(text) == split_top(text)
