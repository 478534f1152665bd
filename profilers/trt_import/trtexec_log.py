"""The layers a verbose trtexec log states: `Layer(<Type>): <name>, Tactic: <id>, <inputs> -> <outputs>`.

trtexec (8.x, `--verbose`) prints this block under `Engine Layer Information` for every layer of the
engine, with each tensor as `name (Datatype[dims])` (8.5-10.x) or `name[Datatype(dims)]` (8.0-8.4), a
vectorized dimension written `64:32`; 8.0-8.2 write the tactic as a decimal number. A
names-only layer file of the same engine gains from it the type TensorRT states, the tactic and the
tensors' types and shapes: the same facts a detailed layer file gives.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from profilers.trt_import import documents
from profilers.trt_import.layer_info import compute_precision, normalize_name
from sessions.documents.layer_ops import trt_op
from sessions.documents.model import Layer, Tensor
from sessions.documents.vocab import dtype_of

LAYER_LINE = re.compile(r"Layer\(([A-Za-z0-9_]+)\): ([^\n]*), Tactic: (0x[0-9a-fA-F]+|-?\d+), ([^\n]*?) -> ?([^\n]*)$",
                        re.MULTILINE)
# what follows a tensor's name, the name being everything since the previous one's end
TENSORS = (
    re.compile(r" \(([A-Za-z0-9]+)\[([-0-9,:]*)\]\)(?:, |$)"),  # 8.5-10.x: `relu (Half[-1,32:8,28,28])`
    re.compile(r"\[([A-Za-z0-9]+)\(([-0-9,:]*)\)\](?:, |$)"),  # 8.0-8.4: `Relu:0[Float(-2,32,28,28)]`
)


@dataclass
class LoggedLayer:
    kind: str
    tactic: str
    inputs: list[Tensor]
    outputs: list[Tensor]


def _tensors(text: str) -> list[Tensor]:
    """The tensors of a `Layer(...)` line's input or output list, each `name (Type[dims])` or `name[Type(dims)]`:
    each type-and-dims suffix is found by itself, so a long name is scanned once, not once per character."""
    tensors = []
    text = text.strip()
    pattern = next((p for p in TENSORS if p.search(text)), TENSORS[0])
    start = 0
    for match in pattern.finditer(text):
        if match.start() == start:  # a suffix with no name before it belongs to the next name
            continue
        dims = [part.split(":")[0] for part in match.group(2).split(",") if part]
        shape = [int(d) for d in dims] if all(d.lstrip("-").isdigit() for d in dims) else None
        tensors.append(Tensor(name=normalize_name(text[start:match.start()]), dtype=dtype_of(match.group(1)),
                              shape=shape, format=match.group(1)))
        start = match.end()
    return tensors


def logged_layers(path: Path) -> tuple[dict[str, LoggedLayer], int]:
    """`logged_layer_lines` of the log at `path`."""
    return logged_layer_lines(documents.read_text(path, "trtexec log"))


def repeated_lines_note(log_name: str, repeated: int) -> list[str]:
    """The note on the `Layer(...)` lines of the log `log_name` that `logged_layer_lines` left out (none where
    `repeated` is 0), whether those lines are the layers or type a names-only file's layers."""
    if not repeated:
        return []
    note = (f"Layer(...) lines naming a layer an earlier line named in {log_name}, left out (the first line of a "
            f"name is read): {repeated}")
    return [note]


def logged_layer_lines(text: str) -> tuple[dict[str, LoggedLayer], int]:
    """Layer name -> what a log's text states about it, in the log's order (empty where it has no layer block), and
    how many `Layer(...)` lines that left out: those naming a layer an earlier line named (the first is kept)."""
    found: dict[str, LoggedLayer] = {}
    lines = 0
    for match in LAYER_LINE.finditer(text):  # lines end at `\n` only: U+001E inside names (8.6+) is a name's
        kind, name, tactic, inputs, outputs = match.groups()
        found.setdefault(normalize_name(name), LoggedLayer(kind, tactic, _tensors(inputs), _tensors(outputs)))
        lines += 1
    return found, lines - len(found)


def has_layer_lines(text: str) -> bool:
    """True where a log's text holds a `Layer(<Type>): ...` line, found without reading the others."""
    return LAYER_LINE.search(text) is not None


def apply_logged(layers: list[Layer], logged: dict[str, LoggedLayer]) -> int:
    """Give names-only layers the type, tactic and tensors the log states; returns how many it found."""
    typed = 0
    for layer in layers:
        entry = logged.get(layer.name)
        if entry is None:
            continue
        typed += 1
        layer.kind = entry.kind
        layer.op = trt_op(entry.kind, None) or layer.op
        layer.tactic = entry.tactic
        layer.inputs, layer.outputs = entry.inputs, entry.outputs
        layer.precision = compute_precision(entry.inputs, None, None, entry.outputs)
        if layer.op == "conv" and entry.inputs and entry.inputs[0].shape and len(entry.inputs[0].shape) >= 2:
            layer.in_channels = entry.inputs[0].shape[1]
            outputs = entry.outputs[0].shape if entry.outputs else None
            layer.out_channels = outputs[1] if outputs and len(outputs) >= 2 else None
    return typed
