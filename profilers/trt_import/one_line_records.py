"""A one-line record of trtexec's `--dumpLayerInfo` block (`Name: <name>, LayerType: <type>, Inputs: [ { Name: x,
Dimensions: [1,3], Format/Datatype: Float }], ...`) cut into its `Key: value` pairs and read as the JSON record of the
same keys (`--exportLayerInfo`'s), each value converted as the JSON holds it.
"""

from __future__ import annotations

import functools
import itertools
import re
from typing import Any

import orjson

from profilers.trt_import.layer_info import TENSOR_KEYS

KEY_AHEAD = re.compile(r"[A-Za-z][A-Za-z0-9/ ]{0,40}:(?: |$)")  # the next `Key: ` of a one-line record
INTEGER = re.compile(r"-?\d+$")
KEY_SPLIT = re.compile(r", (?=" + KEY_AHEAD.pattern + ")")  # where `_split_top` may split: a `, ` a key follows
# a record's `, Key: value` pair (`_pairs` puts a `, ` before the record) as `_split_top` cuts it where its brackets
# nest properly (at most 4 deep): a key that does not end in a space, then text without a `, Key: ` and bracket
# groups (possessive: nothing is tried twice)
_GROUP = r"[\[{(][^\[\]{}()]*+[\]})]"
for _ in range(3):
    _GROUP = r"[\[{(](?:[^\[\]{}()]++|" + _GROUP + r")*+[\]})]"
VALUE = r"(?:[^\[\]{}(),]++|,(?! " + KEY_AHEAD.pattern + r")|" + _GROUP + r")*+"
PAIR = re.compile(r", ([A-Za-z](?:[A-Za-z0-9/ ]{0,39}[A-Za-z0-9/])?):(?= |$)(" + VALUE + ")")
BRACKET, BRACE = re.compile(r"[\[\]{}()]"), re.compile(r"[{}]")
TENSOR_RECORD = re.compile(r"Name:( [^\[\]{}(),]*)(?:, Location: [A-Za-z]+)?, Dimensions:( \[[-0-9,]*\]), "
                           r"Format/Datatype:( [^\[\]{}(),]*)")  # `_tensor_record`: the common tensor record


def _split_top(text: str) -> list[str]:
    """`text` split at each `, ` outside brackets that a `Key: ` follows: split at every such `, ` (in C), then the
    pieces inside a bracket joined again, the depth counted only in pieces that hold a bracket."""
    parts: list[str] = []
    depth, pending = 0, None
    for piece in KEY_SPLIT.split(text):
        if pending is not None:
            pending += ", " + piece
        if BRACKET.search(piece):
            opened = piece.count("[") + piece.count("{") + piece.count("(")
            depth = max(depth + opened - piece.count("]") - piece.count("}") - piece.count(")"), 0)
        if pending is None and depth:
            pending = piece
        elif pending is None:
            parts.append(piece)
        elif not depth:
            parts.append(pending)
            pending = None
    if pending is not None:
        parts.append(pending)
    return parts


def scan(text: str) -> list[tuple[str, str]]:
    """The `(key, value)` pairs `PAIR` finds in a one-line record, a `, ` put before it: each match opens with that
    literal, which `re` looks for at C speed (a pattern opening with `^|, ` is tried at every character). The pairs
    are those a pattern opening with `(?:^|, )` finds in the record itself."""
    found: list[tuple[str, str]] = PAIR.findall(", " + text)
    return found


def whole_scan(text: str) -> list[tuple[str, str]] | None:
    """The pairs `scan` finds where they give back the whole record (`_pairs` takes them), else None. They give it
    back where their lengths add up to it: matches that do not overlap, each after a `, `, the first the one `scan`
    puts before the record, tile it only so."""
    pairs = scan(text)
    if pairs and sum(map(len, itertools.chain.from_iterable(pairs))) + 3 * len(pairs) - 2 == len(text):
        return pairs
    return None


def _pairs(text: str) -> list[tuple[str, str]]:
    """The `(key, value)` pairs of a one-line record, each value as the text holds it: the parts `_split_top` gives,
    each cut at its first `:`.

    Most records are found by one C-level scan (`PAIR`): a key, then text and bracket groups, nested properly, up to
    the next `, Key: ` outside them. Such a split is `_split_top`'s (every bracket closes inside its part, so the
    depth its count reaches is 0 between parts and above 0 at every `, Key: ` within one), and it is taken only
    where the pairs give back the whole record (`whole_scan`); any other record (a stray or deeper bracket, a key
    `_split_top` would cut differently) is split by `_split_top`."""
    pairs = whole_scan(text)
    if pairs is not None:
        return pairs
    return [(key.strip(), value) for key, _, value in (part.partition(":") for part in _split_top(text))]


def _groups(text: str) -> list[str]:
    """The `{ ... }` groups of a list of records, their braces removed (a list of one record, most, cut at once)."""
    opened, closed = text.find("{"), text.rfind("}")
    if 0 <= opened < closed and text.count("{") == 1 and text.count("}") == 1:
        return [text[opened + 1:closed].strip()]
    groups, depth, start = [], 0, 0
    for match in BRACE.finditer(text):
        if match.group() == "{":
            depth += 1
            if depth == 1:
                start = match.end()
        else:
            depth -= 1
            if depth == 0:
                groups.append(text[start:match.start()].strip())
    return groups


def json_value(raw: str) -> Any:
    """A value's text as the JSON value it stands for: tensor records, a JSON object, a list of integers, an integer,
    else the text, stripped. The plain values a block repeats (types, formats, dimensions) are converted once."""
    if "{" in raw:  # only such a value can open a record or an object
        text = raw.strip()
        if text.startswith("[") and text.lstrip("[ ").startswith("{"):
            return [_tensor_record(group) for group in _groups(text[1:-1])]
        if text.startswith("{"):
            try:
                return orjson.loads(text)  # Weights: {"Type": "Float", "Count": 800}
            except orjson.JSONDecodeError:
                return text
    return plain_value(raw)


def plain_value(raw: str) -> Any:
    """A value's text that holds no `{` (no record or object) as its JSON value: `cached_plain`'s, a list of integers
    copied (the cached tuple is shared)."""
    known = cached_plain(raw)
    return list(known) if type(known) is tuple else known


@functools.lru_cache(maxsize=1 << 16)  # the values a block repeats, converted once; a record's own words fill the rest
def cached_plain(raw: str) -> int | str | tuple[int, ...]:
    """A value's text that holds no record or object, as a list of integers (a tuple, copied into a list by
    `json_value`), an integer, else the text; stripped. Kept by the text as the record holds it, unstripped: a repeated
    value is converted without a copy."""
    text = raw.strip()
    if text.startswith("[") and text.endswith("]"):
        items = [item.strip() for item in text[1:-1].split(",") if item.strip()]
        return tuple(int(item) for item in items) if all(INTEGER.match(item) for item in items) else text
    return int(text) if INTEGER.match(text) else text


def parse_record(text: str, read: frozenset[str] | None = None) -> dict[str, Any]:
    """A one-line record as the JSON record of the same keys (the last of a key repeated); with `read`, only those
    keys, converted (a 100,000-layer block keeps and converts what the layer reader reads, not 30 keys a layer)."""
    return record_of(_pairs(text), read)


def record_of(pairs: list[tuple[str, str]], read: frozenset[str] | None = None) -> dict[str, Any]:
    """A record's pairs as `parse_record` gives them: the name stripped, every other value converted (`json_value`)."""
    record = dict(pairs)
    found: dict[str, Any] = {}
    for key in record if read is None else record.keys() & read:
        raw = record[key]
        if key == "Name":
            found[key] = raw.strip()
        elif "{" in raw:
            found[key] = json_value(raw)
        else:  # most values: `json_value`'s last step, without the call
            found[key] = plain_value(raw)
    return found


def _tensor_record(text: str) -> dict[str, Any]:
    """`parse_record(text, TENSOR_KEYS)`: a tensor record as TensorRT 8.6-10.x prints it (`TENSOR_RECORD`) read by
    one match, any other by `parse_record`. The match gives `parse_record`'s pairs: none of its values holds a `, `
    or a bracket but the dimensions' own (which hold no space), so `, Key: ` occurs only where it cuts the record."""
    match = TENSOR_RECORD.fullmatch(text)
    if match is None:
        return parse_record(text, TENSOR_KEYS)
    name, dimensions, datatype = match.groups()
    return {"Name": name.strip(), "Dimensions": json_value(dimensions), "Format/Datatype": json_value(datatype)}
