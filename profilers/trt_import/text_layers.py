"""Layer information a trtexec log prints as text, read as a layer file.

Two blocks carry it:

- `--dumpLayerInfo` (8.4+) prints the engine inspector's one-line format under `Layer Information:` /
  `Layers:`: one line a layer, `Name: <name>, LayerType: <type>, Inputs: [ { Name: x, Dimensions: [1,3],
  Format/Datatype: Float }], ..., TacticName: <kernel>, TacticValue: 0x...` for a DETAILED engine (the
  same keys as `--exportLayerInfo`'s JSON), the bare layer name for a names-only one; then `Bindings:`.
  8.6 relays TensorRT's `[TRT]` warning that the engine is names-only between the two headings.
- A verbose build (`--verbose`, 8.x) prints `Engine Layer Information:` with one
  `Layer(<Type>): <name>, Tactic: <id>, <inputs> -> <outputs>` line a layer (`trtexec_log`).

The one-line records become the same dictionaries the JSON holds (`one_line_records`) and go through
`layer_info`'s reader, so a layer read from text is the layer read from JSON.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from profilers.trt_import import documents
from profilers.trt_import.kinds import HEAD_BYTES, LAYERS, FileKind, register_kind
from profilers.trt_import.layer_info import READ_KEYS, LayerInfo, named_layer, parse_layer_info
from profilers.trt_import.record_shapes import Shapes
from profilers.trt_import.trtexec_log import apply_logged, has_layer_lines, logged_layer_lines, repeated_lines_note
from sessions.documents.errors import InputError
from sessions.documents.input_files import read_file_head
from sessions.documents.layer_ops import trt_op
from sessions.documents.model import Layer

# `[07/07/2026-02:11:38] [I] `; logs pasted without the time keep only `[I] ` (a TensorRT 7.1 log in a README)
LOG_PREFIX = re.compile(r"^(?:\[[^\]]*\] )?\[[A-Z]\] ?")
LOG_LINE = re.compile(r"^\[(?:[A-Z]|\d\d/\d\d/\d{4}-\d\d:\d\d:\d\d)\] ")  # how a log line opens; no JSON list does
TRT_MESSAGE = re.compile(r"^\[TRT\] ")  # a TensorRT logger line trtexec relays after its own prefix
DUMP_HEADING = re.compile(r"\[I\] Layer Information:[ \t\r]*$", re.MULTILINE)
TIME_STAMP = re.compile(r"(?:\[[^\]\n]*\] )?")  # what may open a log line before its `[I] `


def log_line(text: str, pattern: re.Pattern[str]) -> re.Match[str] | None:
    """The first match of `pattern` (which opens with `[I] `: a literal, so the search runs at C speed over a
    100 MB log) that is a log line's own text: only a time stamp before it on its line, not prose that quotes it."""
    for match in pattern.finditer(text):
        line_start = text.rfind("\n", 0, match.start()) + 1
        if TIME_STAMP.fullmatch(text, line_start, match.start()):
            return match
    return None
DUMP_LOOKAHEAD = 20  # lines between `Layer Information:` and `Layers:` (8.6 relays a warning there)
LOG_MARKS = ("&&&& RUNNING", "=== Model Options ===")  # a trtexec log: its options are run facts (`metadata`)
# a log pasted from its summary or table on (a TensorRT 7.1 log in a README) has only these headings, as log lines
LOG_HEADING = re.compile(r"^(?:\[[^\]]*\] )?\[I\] === (?:Performance summary ===|Profile \()", re.MULTILINE)
LOG_HEAD = 20000  # the marks come within the first lines


# what one trtexec run prints once at most; a file with two is several logs joined (a script's builds and runs)
ONCE_A_RUN = ("&&&& RUNNING", "Engine Layer Information:", "] Layer Information:", "=== Profile (",
              "=== Performance summary ===")
# a part two marks hold, each where the other's cannot be (`e` or `]` before it; `r` or `e` after): where the part
# is found once at most, so is each of them, and they are not counted (a 100 MB log counted three times, not five)
SHARED_PARTS = {"Engine Layer Information:": " Layer Information:", "] Layer Information:": " Layer Information:",
                "=== Profile (": "=== P", "=== Performance summary ===": "=== P"}


def one_run(text: str, origin: str) -> None:
    """InputError (one line) where a log holds what one trtexec run prints once, twice or more: its engines'
    layers, tables or summaries would be joined into one variant. The last text found to be one run is kept (the
    same text object, `documents.read_text`'s): its layers, its table and its options are read without counting
    the marks of a 100 MB log three times."""
    if text is _ONE_RUN[0]:
        return
    parts: dict[str, int] = {}
    for mark in ONCE_A_RUN:
        part = SHARED_PARTS.get(mark)
        if part is not None and part not in parts:
            parts[part] = text.count(part)
        if part is not None and parts[part] <= 1:
            continue
        count = text.count(mark)
        if count > 1:
            raise InputError(f"{origin}: {count} `{mark.strip('] ')}` lines, one a trtexec run: "
                             "a file of several runs; "
                             "cut out the part of the run to import")
    _ONE_RUN[0] = text


_ONE_RUN: list[str | None] = [None]  # the last text `one_run` passed


def forget_log() -> None:
    """Let go of the last log read (`documents.read_text`) and passed by `one_run`: 100 MB for a 100,000-layer log,
    kept from the folder's classifying to its table's reading. An import calls it once its variant is read, so
    the log is not held while the session is encoded, checked and saved."""
    documents.forget_text()
    _ONE_RUN[0] = None


def opens_as_json(head: str) -> bool:
    """True where a document's first characters open a JSON object or list, not a log line such as `[I] ...`."""
    head = head.lstrip()
    return head[:1] == "{" or (head[:1] == "[" and LOG_LINE.match(head) is None)


def is_text(path: Path) -> bool:
    """True for a regular file whose content is not JSON (a log); False for JSON or anything not a regular file.
    One InputError line for a regular file that cannot be read."""
    path = Path(path)
    if not path.is_file():
        return False
    return not opens_as_json(documents.text_of(read_file_head(path, "file", HEAD_BYTES)))


def is_trtexec_log(path: Path) -> bool:
    """True for a text file whose head has trtexec's marks: its options and device are run facts (`metadata`)."""
    if not is_text(path):
        return False
    return has_log_marks(documents.text_of(read_file_head(Path(path), "trtexec log", LOG_HEAD)))


def has_log_marks(head: str) -> bool:
    """True where the head of a text has trtexec's marks (`LOG_MARKS`), or the headings of a log pasted from its
    summary or table on."""
    return any(mark in head for mark in LOG_MARKS) or LOG_HEADING.search(head) is not None


def _lines(text: str, start: int) -> Iterator[str]:
    """The lines of `text` from `start` on, as `split("\n")` gives them, each cut only when it is reached: a block is
    read without splitting (or copying) the 100 MB log after it."""
    while (end := text.find("\n", start)) >= 0:
        yield text[start:end]
        start = end + 1
    yield text[start:]


def _dump_lines(text: str, lookahead: int | None = None) -> Iterator[str] | None:
    """The lines of the `Layer Information:` block after its `Layers:` line; None where the log has no such block
    (with `lookahead`, none whose `Layers:` line comes within that many lines of the heading)."""
    found = log_line(text, DUMP_HEADING)
    if found is None:
        return None
    lines = _lines(text, found.start())
    next(lines)  # the heading
    for index, line in enumerate(lines, 1):  # 8.6 relays TensorRT's names-only warning between the two headings
        if lookahead is not None and index >= lookahead:
            return None
        message = LOG_PREFIX.sub("", line)
        if not TRT_MESSAGE.match(message):
            return lines if message.strip() == "Layers:" else None
    return None


def _dump_block(text: str) -> tuple[list[Any], list[str]] | None:
    """(layer records or names, bindings) of the `Layer Information:` block; None where the log has none. Only the
    block's lines are cut from the text, one at a time."""
    lines = _dump_lines(text)
    if lines is None:
        return None
    layers: list[Any] = []
    bindings: list[str] = []
    section = layers
    shapes = Shapes(READ_KEYS)
    for line in lines:
        if line.startswith("[") and LOG_PREFIX.match(line):  # LOG_PREFIX opens with a bracket: a record is not tried
            break
        entry = line.strip()
        if entry == "Bindings:":
            section = bindings
        elif entry:
            is_layer = section is layers and entry.startswith("Name: ")
            section.append(shapes.read(entry) if is_layer else entry)
    return layers, bindings


def text_layer_kind(text: str) -> str | None:
    """Which layer block a log holds: `--dumpLayerInfo` or `verbose`; None where it holds none. Found by the block's
    headings and first line, not by reading every layer (`parse_text_layers` does that, once)."""
    if _dump_lines(text, DUMP_LOOKAHEAD) is not None:
        return "--dumpLayerInfo"
    return "verbose" if "Engine Layer Information" in text and has_layer_lines(text) else None


def parse_text_layers(text: str, origin: str) -> LayerInfo:
    """The engine's layers a log prints: the `--dumpLayerInfo` block, else the verbose `Layer(...)` lines."""
    one_run(text, origin)
    block = _dump_block(text)
    if block is not None and block[0]:
        layers, bindings = block
        info = parse_layer_info({"Layers": layers, "Bindings": bindings}, origin)
        info.notes.append(f"layers from the text of {Path(origin).name} (--dumpLayerInfo)")
        return info
    logged, repeated = logged_layer_lines(text)
    if not logged:
        raise InputError(f"{origin}: no layer information in this log (trtexec prints it with --dumpLayerInfo, or "
                         "`Engine Layer Information` with --verbose)")
    # a layer's op from its name only where the type the log states gives none (names are long; types are not)
    found = [Layer(name=name, kind="unknown", op=None) if trt_op(entry.kind, None) else named_layer(name)
             for name, entry in logged.items()]
    apply_logged(found, logged)
    produced = {t.name for layer in found for t in layer.outputs}
    inputs = list(dict.fromkeys(t.name for layer in found for t in layer.inputs if t.name not in produced))
    notes = [f"layers from the verbose log {Path(origin).name} (Layer(...) lines)",
             *repeated_lines_note(Path(origin).name, repeated)]
    return LayerInfo(found, inputs, detailed=True, notes=notes)


def read_text_layers(path: Path) -> LayerInfo:
    return parse_text_layers(documents.read_text(path, "trtexec log"), str(path))


register_kind(FileKind("the layer block of a trtexec log (--dumpLayerInfo, or a verbose build's)", LAYERS, text=True,
                       recognise=lambda text: bool(text_layer_kind(text))))
