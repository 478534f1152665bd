"""The one-line records of a `--dumpLayerInfo` block read by the shapes learnt from earlier records.

A block repeats a few record shapes, about one a layer type: the same keys in the same order, each value of the same
kind. A shape learnt from a record that `one_line_records.whole_scan` cuts is one compiled pattern: the record's
keys as literals, each followed by `PAIR`'s value (`VALUE`), or by a narrower one where the learnt value was
narrower: text without a bracket or a comma (`RUN`), groups of one depth and runs (`GROUPS`), or a list of one
tensor record as TensorRT 8.6-10.x prints it (`ONE_TENSOR`). A record the pattern matches whole is the record
`parse_record` reads, at a fraction of its cost:

- the cut is the scan's. Each value pattern takes only text `VALUE` takes whole, as `VALUE` takes it (`RUN`: a
  run; `GROUPS`: a run of a space, then groups and runs; `ONE_TENSOR`: a space and one bracket group), and `VALUE`
  stops where the pattern's next `, Key:` (a space or the end after it) opens, as `PAIR` does, so the scan finds
  the same pairs, one after the other from the record's start to its end;
- the values are `record_of`'s: a `RUN` holds no `{` (its value is `plain_value`'s) and no `[` (so never a list:
  `cached_plain`'s, not copied); a `ONE_TENSOR` list is the one `_tensor_record` reads, its three fields taken by
  the same match (its dimensions hold no `{`, its format neither nor a `[`).

Any other record is read by `parse_record`, and its shape learnt where the scan cuts it (at most `MOST_LEARNT` a
block: a block of ever new shapes costs the compiles of a few patterns, not one a record).
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from profilers.trt_import.one_line_records import (
    VALUE,
    cached_plain,
    json_value,
    parse_record,
    plain_value,
    record_of,
    whole_scan,
)

RUN = r"[^\[\]{}(),]*+"  # a value without brackets or commas: one run of `VALUE`'s first kind
# a space, then groups of one depth, each followed by a run (`[5,5]`, `{"Type": "Float"}`, `[ONNX Layer: a]\x1e[...]`):
# `VALUE`'s groups and runs, taken as it takes them
GROUPS = r" (?:[\[{(][^\[\]{}()]*+[\]})]" + RUN + ")++"
SPECIAL = frozenset("[]{}(),")
TENSOR_FIELD = r"[^\[\]{}(),]*"  # a tensor record's name or format, as `TENSOR_RECORD` takes it
ONE_TENSOR = re.compile(r" \[ \{ Name:( " + TENSOR_FIELD + r")(?:, Location: [A-Za-z]+)?, Dimensions:( \[[-0-9,]*\]), "
                        r"Format/Datatype:( " + TENSOR_FIELD + r") \}\]")  # a list of one tensor record
NAME, PLAIN, ANY, TENSOR = range(4)  # how a shape reads a value: stripped, `cached_plain`, `json_value`, one tensor
LAYER_TYPE = ", LayerType: "  # what keys the shapes of a block: the layer type a record states
MOST_LEARNT = 64  # shapes learnt in one block at most


@dataclass(frozen=True)
class Shape:
    """A learnt record shape: its pattern, and where its match holds each key read: the keys of runs (`RUN`), read
    together; the name; and the others, each with how it is read (`ANY` or `TENSOR`, whose three fields follow)."""

    pattern: re.Pattern[str]
    run_keys: tuple[str, ...]
    runs: Callable[[tuple[str, ...]], tuple[str, ...]]  # the runs' values of a match's groups, in `run_keys`' order
    name_at: int | None
    others: tuple[tuple[str, int, int], ...]

    def read(self, text: str) -> dict[str, Any] | None:
        """`parse_record(text, read)` where the pattern matches the record whole; None where it does not."""
        match = self.pattern.fullmatch(text)
        if match is None:
            return None
        values = match.groups()
        found: dict[str, Any] = dict(zip(self.run_keys, map(cached_plain, self.runs(values)), strict=True))
        if self.name_at is not None:
            found["Name"] = values[self.name_at].strip()
        for key, at, how in self.others:
            if how == TENSOR:
                found[key] = [{"Name": values[at].strip(), "Dimensions": plain_value(values[at + 1]),
                               "Format/Datatype": cached_plain(values[at + 2])}]
            else:
                found[key] = json_value(values[at])
        return found


def learn(pairs: list[tuple[str, str]], read: frozenset[str]) -> Shape | None:
    """The shape of a record the scan cut into `pairs` (`whole_scan`); None for a record with a key twice (its
    record keeps the last value: a shape would need to know which)."""
    keys = [key for key, _ in pairs]
    if len(set(keys)) < len(keys):
        return None
    parts, runs, others, groups = [], [], [], 0
    name_at = None
    for key, value in pairs:
        if key == "Name":
            value_pattern, how = f"({VALUE})", NAME
        elif SPECIAL.isdisjoint(value):
            value_pattern, how = f"({RUN})", PLAIN
        elif key in read and ONE_TENSOR.fullmatch(value):
            value_pattern, how = ONE_TENSOR.pattern, TENSOR
        else:
            value_pattern, how = f"({GROUPS if re.fullmatch(GROUPS, value) else VALUE})", ANY
        if key not in read:
            value_pattern = "(?:" + value_pattern[1:]  # not kept
        elif how == NAME:
            name_at = groups
        elif how == PLAIN:
            runs.append((key, groups))
        else:
            others.append((key, groups, how))
        groups += (3 if how == TENSOR else 1) if key in read else 0
        parts.append(re.escape(key) + ":(?= |$)" + value_pattern)
    at = [index for _, index in runs]
    return Shape(re.compile(", ".join(parts)), tuple(key for key, _ in runs),
                 operator.itemgetter(*at) if len(at) > 1 else lambda values: tuple(values[i] for i in at), name_at,
                 tuple(others))


class Shapes:
    """The shapes learnt from one block's records, by the layer type each states (a type's records may take a few:
    a layer of two inputs beside those of one)."""

    def __init__(self, read: frozenset[str]) -> None:
        self.read_keys = read
        self.by_type: dict[str, list[Shape]] = {}
        self.learnt = 0

    def read(self, text: str) -> dict[str, Any]:
        """`parse_record(text, read)`: by the first shape learnt for the record's layer type that matches it, else
        by `parse_record`, and the record's shape learnt where the scan cuts it whole."""
        start = text.find(LAYER_TYPE)
        layer_type = text[start:text.find(",", start + len(LAYER_TYPE))] if start >= 0 else ""
        shapes = self.by_type.setdefault(layer_type, [])
        for shape in shapes:
            found = shape.read(text)
            if found is not None:
                return found
        pairs = whole_scan(text) if self.learnt < MOST_LEARNT else None
        if pairs is None:
            return parse_record(text, self.read_keys)
        shape = learn(pairs, self.read_keys)
        if shape is not None:
            self.learnt += 1
            shapes.append(shape)
        return record_of(pairs, self.read_keys)
