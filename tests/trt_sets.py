"""The real TensorRT file sets of ../shared/fixtures (trt and trtexec), and what their raw files say.

Everything here reads the files with plain `json` and regular expressions and shares no code with
the importer, so that an importer bug cannot agree with itself. An engine is one layer file (or one
profile alone) with the profile, times and logs of the same folder.
"""

from __future__ import annotations

import json
import re
import statistics
from dataclasses import dataclass, field
from pathlib import Path

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "fixtures"
FOLDERS = ("trt", "trtexec")
EXTRA_PROFILE = re.compile(r" \[profile [1-9]\d*\]$")
INT8_TACTIC = re.compile(r"(?:^|_)i8|int8|imma", re.IGNORECASE)
REFORMATTER = re.compile(r" (input|output) reformatter \d+$")  # TensorRT 7's name for a reformat
# a part that only moves data: an ONNX Reshape-like node, or a shuffle TensorRT inserted and named after a node
SHUFFLE_PART = re.compile(r"(^|/)(Reshape|Transpose|Squeeze|Unsqueeze|Flatten|Gather|Slice|Expand|Shape|Pad)(_\d+)?$"
                          r"|^(reshape|squeeze|unsqueeze|copied_squeeze|transpose)_(before|after)_"
                          r"|^\(Unnamed Layer\* \d+\) \[Shuffle\]$")
# TensorRT 7's DLA subgraphs and copies
DLA_RECORD = re.compile(r"^\{(?!ForeignNode)[^}]*\}|^data to nvm$|from nvm$| finish$")


def set_folders() -> list[Path]:
    """Every set folder of both fixture folders (empty where ../shared is not beside the checkout)."""
    return sorted(p for folder in FOLDERS if (SHARED / folder).is_dir()
                  for p in (SHARED / folder).iterdir() if p.is_dir())


def _load(path: Path):
    try:
        return json.loads(path.read_text(errors="replace"))
    except ValueError:
        return None


def raw_kind(path: Path) -> str | None:
    """layers | profile | times | samples | log | None, from the file's content alone."""
    doc = _load(path)
    if doc is None:
        return "log" if re.search(r"^\S*\s*\[[IV]\] ", path.read_text(errors="replace")[:20000], re.MULTILINE) else None
    if isinstance(doc, dict) and isinstance(doc.get("Layers"), list):
        return "layers"
    if isinstance(doc, list) and doc and all(isinstance(r, dict) for r in doc):
        if "computeMs" in doc[0]:
            return "times"
        first = doc[1] if len(doc) > 1 and "count" in doc[0] else doc[0]
        if "name" in first and "timeMs" in first:
            return "profile"
    if isinstance(doc, dict) and doc and all(isinstance(v, list) and all(isinstance(x, float) for x in v)
                                             for v in doc.values()):
        return "samples"
    return None


@dataclass
class Engine:
    folder: Path
    layers: Path | None = None
    profile: Path | None = None
    times: Path | None = None
    logs: list[Path] = field(default_factory=list)

    @property
    def label(self) -> str:
        main = self.layers or self.profile
        return f"{self.folder.parent.name}/{self.folder.name}" + (
            f"/{main.name}" if main and self.profile and not self.layers else "")


def engines(folder: Path) -> list[Engine]:
    """The engines of a set: one per layer file, else one per profile (TensorRT 7 folders hold many)."""
    kinds: dict[str, list[Path]] = {}
    for path in sorted(folder.iterdir()):
        kind = raw_kind(path) if path.name not in ("SOURCE.md", "SHA256SUMS") else None
        if kind:
            kinds.setdefault(kind, []).append(path)
    layer_files = kinds.get("layers", [])
    logs = kinds.get("log", [])
    if layer_files:
        profiles, times = kinds.get("profile", []) or kinds.get("samples", []), kinds.get("times", [])
        return [Engine(folder, path, profiles[0] if len(layer_files) == 1 and profiles else None,
                       times[0] if len(layer_files) == 1 and times else None, logs) for path in layer_files]
    return [Engine(folder, None, path, None, logs) for path in kinds.get("profile", [])]


LOG_LAYER = re.compile(r"Layer\((\w+)\): (.*), Tactic: \S+, (.*)$")
LOG_TYPE = re.compile(r"\((\w+)\[[-0-9,:]*\]\)")


def _logged(engine: Engine) -> dict[str, dict]:
    """Name -> {LayerType, tensor types} from a verbose log's `Layer(Type): name, Tactic: ...` lines."""
    found: dict[str, dict] = {}
    for log in engine.logs:
        for line in log.read_text(errors="replace").splitlines():
            match = LOG_LAYER.search(line)
            if match:
                types = [{"Format/Datatype": t} for t in LOG_TYPE.findall(match.group(3))]
                found.setdefault(match.group(2), {"Name": match.group(2), "LayerType": match.group(1), "Inputs": types})
    return found


def layer_entries(engine: Engine) -> list:
    """The raw layer entries (strings or objects) of profile 0, or the profile's records where no layer file.

    A names-only layer whose type a log of the same folder states is that log's entry.
    """
    if engine.layers is not None:
        entries = json.loads(engine.layers.read_text())["Layers"]
        logged = _logged(engine)
        entries = [logged.get(e, e) if isinstance(e, str) else e for e in entries]
        return [e for e in entries if not EXTRA_PROFILE.search(e if isinstance(e, str) else e.get("Name", ""))]
    return profile_records(engine)


def profile_records(engine: Engine) -> list[dict]:
    """trtexec's profile records; for an IProfiler's samples, one record per layer with its median as `averageMs`."""
    if engine.profile is None:
        return []
    doc = json.loads(engine.profile.read_text())
    if isinstance(doc, dict):
        return [{"name": name, "averageMs": statistics.median(values)} for name, values in doc.items()]
    return [r for r in doc if "name" in r and not EXTRA_PROFILE.search(r["name"])]


def summed_profile_ms(engine: Engine) -> float | None:
    records = profile_records(engine)
    return sum(r["averageMs"] for r in records) if records else None


def median_compute_ms(engine: Engine) -> float | None:
    if engine.times is None:
        return None
    return statistics.median(r["computeMs"] for r in json.loads(engine.times.read_text()))


def _name(entry) -> str:
    return entry if isinstance(entry, str) else str(entry.get("Name", entry.get("name", "")))


def _tensor_types(entry) -> list[str]:
    if not isinstance(entry, dict):
        return []
    tensors = [t for key in ("Inputs", "Outputs") for t in entry.get(key, []) if isinstance(t, dict)]
    return [str(t.get("Format/Datatype", "")) + " " + str(t.get("Datatype", "")) for t in tensors]


@dataclass
class Truth:
    """Counts computed from the raw entries of one engine."""

    layers: int
    stated_precision: int  # layers with a tensor type in the file
    all_int8: int  # layers whose every tensor is Int8 (INT8 compute whatever else)
    all_fp16: int  # layers whose every tensor is FP16 / Half and no INT8 tactic or weights
    reformat: int  # TensorRT's Reformat layers that are not Q/DQ nor a concatenation's `X copy`, or names-only
    # `Reformatting CopyNode`s
    qdq: int
    shuffle: int  # Shuffle, Slice, Padding, Gather
    depthwise: int
    myelin: int
    dla: int  # TensorRT 7 DLA subgraphs and the copies to and from DLA memory
    int8_layers: list[int] = field(default_factory=list)  # indices of the all-Int8 layers
    fp16_layers: list[int] = field(default_factory=list)
    stated_layers: list[int] = field(default_factory=list)


def truth(engine: Engine) -> Truth:
    entries = layer_entries(engine)
    detailed = [e for e in entries if isinstance(e, dict) and "LayerType" in e]
    names = [_name(e) for e in entries]
    types = [_tensor_types(e) for e in entries]
    int8 = [i for i, t in enumerate(types) if t and all(re.search(r"Int8", x) for x in t)]
    fp16 = [i for i, (e, t) in enumerate(zip(entries, types, strict=False))
            if t and all(re.search(r"FP16|Half", x) for x in t)
            and not INT8_TACTIC.search(str(e.get("TacticName", ""))) and "Int8" not in str(e.get("Weights", ""))]

    def qdq_name(name: str) -> bool:
        parts = name.split(" + ")
        return (not name.startswith("Reformatting CopyNode")
                and all(re.search(r"(Quantize|Dequantize)Linear|QuantLinearNode|DequantLinearNode|\.weight$", p)
                        for p in parts)
                and any(re.search(r"(Quantize|Dequantize)Linear|QuantLinearNode|DequantLinearNode", p) for p in parts))

    def concat_copy(name: str) -> bool:  # a concatenation's input copied into its output, whatever kind it has
        return name.endswith(" copy") and not name.startswith("Reformatting CopyNode")

    if detailed:
        reformat = sum(1 for e in detailed
                       if e["LayerType"] == "Reformat" and e.get("Origin") != "QDQ" and not qdq_name(e["Name"])
                       and not concat_copy(e["Name"]))
        qdq = sum(1 for e in detailed if e.get("Origin") == "QDQ" or e["LayerType"] in ("Quantize", "Dequantize")
                  or qdq_name(e["Name"]))
        shuffle = sum(1 for e in detailed if e["LayerType"] in ("Shuffle", "Slice", "Padding", "Gather"))
        depthwise = sum(1 for e in detailed if "Depthwise" in e["LayerType"] or (
            e.get("ParameterType") == "Convolution" and isinstance(e.get("Groups"), int) and e["Groups"] > 1
            and e["Groups"] == (e.get("Inputs") or [{}])[0].get("Dimensions", [0, -1])[1]))
        myelin = sum(1 for e in detailed if e["LayerType"] in ("kgen", "Myelin"))
    else:
        reformat = sum(1 for n in names if n.startswith("Reformatting CopyNode") or REFORMATTER.search(n))
        qdq = sum(1 for n in names if qdq_name(n))
        shuffle = sum(1 for n in names if not n.startswith("Reformatting CopyNode")
                      and all(SHUFFLE_PART.search(part) for part in n.split(" + ")))
        depthwise = 0
        myelin = sum(1 for n in names if n.startswith(("{ForeignNode[", "__myl_")))
    stated = [i for i, t in enumerate(types)
              if any(re.search(r"Int8|FP16|Half|Float|FP32|FP8|BFloat16|Int32|Int64|Bool", x) for x in t)]
    # a DLA block's reformatter is counted once
    dla = sum(1 for n in names if DLA_RECORD.search(n) and not REFORMATTER.search(n))
    return Truth(len(entries), len(stated), len(int8), len(fp16), reformat, qdq, shuffle, depthwise, myelin, dla, int8,
                 fp16, stated)
