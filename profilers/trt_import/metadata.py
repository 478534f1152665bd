"""What trtexec says about a run: its options, device and summary, from the files it (or trex) wrote.

trtexec prints its options as `key: value` lines under `=== Model Options ===`, `=== Build Options ===`,
`=== Inference Options ===` and `=== Device Information ===`; trex's `*.build.metadata.json` and
`*.profile.metadata.json` hold the same words as JSON, and trex's `*.metadata.json` is a list of
device properties. All of them are read into one `RunFacts`; a fact no file gives stays None.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from profilers.trt_import import documents
from profilers.trt_import.kinds import METADATA, FileKind, Role, first_record, register_kind, register_role, suffixes
from profilers.trt_import.summary import summary_of_json, summary_of_log
from profilers.trt_import.text_layers import LOG_HEAD, has_log_marks, one_run, opens_as_json
from sessions.documents.errors import InputError
from sessions.documents.model import PerformanceSummary

LOG_OPTION = re.compile(r"^\[[^\]]*\] \[I\] ([A-Za-z][^:\[\]]{0,60}): (.*)$")
LOG_VERSION = re.compile(r"\[TensorRT v(\d+)\]")
# a run of an engine built before: its `=== Build Options ===` are trtexec's defaults, not the engine's (an 8.6
# `--loadEngine` log prints `Precision: FP32` for an engine its build log built with --fp16 and whose layers run Half)
LOADED_ENGINE = re.compile(r"^&&&& RUNNING .*# \S*trtexec\S* .*--loadEngine=", re.MULTILINE)
SHAPE = re.compile(r"=(\d+(?:x\d+)+)")
COMMAND = re.compile(r"^&&&& RUNNING [^\n#]*# (.*)$", re.MULTILINE)  # the trtexec command line a log opens with
COMMAND_SHAPE = re.compile(r":(\d+(?:x\d+)+)")  # `x:4x1x28x28`, 8.0's `x:0:4x1x28x28`: the first input's shape
# trtexec's options that name the model, then those that give the batch, each in the order of trust
NAMING = ("--onnx", "Model", "--loadEngine", "--saveEngine")
SHAPING = ("--shapes", "Input inference shape", "Input inference shapes", "--optShapes", "--batch")
SUMMARY = "performance summary"  # the options' key for a file's PerformanceSummary
UNFINISHED = "unfinished log"  # the options' key for a log that opens a trtexec run and never closes it
CLOSED = re.compile(r"^&&&& (?:PASSED|FAILED|WAIVED) ", re.MULTILINE)  # trtexec's last line, whatever the outcome
OPTION_LINES = 400  # trtexec prints its options within a log's first lines
# trtexec's build options (log and *.build.metadata.json spell them alike, 8.x-10.x) that change what the engine is
BUILD_FLAGS = ("Precision", "LayerPrecisions", "Sparsity", "Refit", "Version Compatible", "Strongly Typed",
               "Profiling verbosity", "Tactic sources", "BuilderOptimizationLevel", "MaxAuxStreams", "Calibration",
               "Memory Pools", "avgTiming", "minTiming", "timingCacheMode", "Safe mode")

register_role(Role(METADATA, "trtexec metadata (*.profile.metadata.json, *.build.metadata.json, trex *.metadata.json) "
                   "or a trtexec log (repeatable; those beside the layer file are read anyway)", order=4,
                   repeatable=True, metavar="FILE"))
register_kind(FileKind(
    "trtexec profile metadata (*.profile.metadata.json): pass it with --metadata", METADATA, rank=20,
    suffixes=(".profile.metadata.json",), head=r'^\s*\{[\s\S]*?"(?:performance_summary|inference_options)"\s*:',
    recognise=lambda doc: isinstance(doc, dict) and ("performance_summary" in doc or "inference_options" in doc)))
register_kind(FileKind(
    "trtexec build metadata (*.build.metadata.json): pass it with --metadata", METADATA, rank=30,
    suffixes=(".build.metadata.json",), head=r'^\s*\{[\s\S]*?"(?:model_options|build_options)"\s*:',
    recognise=lambda doc: isinstance(doc, dict) and ("model_options" in doc or "build_options" in doc)))
register_kind(FileKind(
    "trex device metadata (*.metadata.json): pass it with --metadata", METADATA, rank=70, suffixes=(".metadata.json",),
    head=r'^\s*\[\s*\{[\s\S]*?"ComputeCapability"\s*:',
    recognise=lambda doc: (first := first_record(doc)) is not None and "ComputeCapability" in first))
register_kind(FileKind(
    "a trtexec log: its options and device", METADATA, text=True,
    recognise=lambda text: has_log_marks(text[:LOG_HEAD])))


@dataclass
class RunFacts:
    model: str | None = None  # the ONNX (or other) model file trtexec read
    tensorrt: str | None = None
    gpu: str | None = None
    compute_capability: str | None = None
    multiprocessors: int | None = None
    memory_mib: int | None = None
    precision: str | None = None  # trtexec's build option, e.g. FP32+INT8
    cuda_graph: bool | None = None
    iterations: int | None = None
    duration_s: float | None = None
    warmup_s: float | None = None
    input_shape: list[int] | None = None  # the first input's shape, batch first (--batch: the batch alone)
    gpu_compute_median_ms: float | None = None
    model_from: str | None = None  # the option that named the model (NAMING)
    shape_from: str | None = None  # the option that gave the input shape (SHAPING)
    summary: PerformanceSummary | None = None  # the first file's performance summary
    summaries: list[PerformanceSummary] = field(default_factory=list)  # every file's, in the files' order
    transfers: bool | None = None  # trtexec's "Data transfers" option: host-device copies ran beside the inferences
    sm_clock_mhz: int | None = None  # trtexec's (application) compute clock rate
    mem_clock_mhz: int | None = None
    cuda: str | None = None  # the CUDA version trex's device file records
    build_flags: dict[str, str] = field(default_factory=dict)  # trtexec's build options that change the engine
    sources: list[str] = field(default_factory=list)
    unfinished: list[str] = field(default_factory=list)  # logs that open a run and lack trtexec's closing line


def engine_stem(path: Path) -> str:
    """`resnet.onnx.engine.graph.json` -> `resnet.onnx.engine`: the name trtexec and trex give every file of one
    engine."""
    name = path.name
    for suffix in suffixes():
        if name.endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)]
    return path.stem


def companions(path: Path) -> list[Path]:
    """Metadata files beside a layer or profile file, written for the same engine."""
    stem = engine_stem(path)
    names = (f"{stem}.profile.metadata.json", f"{stem}.build.metadata.json", f"{stem}.metadata.json")
    return [path.parent / n for n in names if (path.parent / n).is_file()]


def _options_from_log(text: str, source: str) -> dict[str, Any]:
    options: dict[str, Any] = {}
    if "&&&& RUNNING" in text and CLOSED.search(text) is None:  # cut, or the run never ended
        options[UNFINISHED] = source
    version = LOG_VERSION.search(text[:2000])
    if version:
        digits = version.group(1)
        value = int(digits)  # 8502 = 8.5.2 (major * 1000 + minor * 100 + patch); 101401 = 10.14.1 (x 10000, x 100)
        parts = divmod(value, 1000) if value < 10000 else divmod(value, 10000)
        options["TensorRT version"] = f"{parts[0]}.{parts[1] // 100}.{parts[1] % 100}"
    for line in _first_lines(text, OPTION_LINES):
        match = LOG_OPTION.match(line.strip())
        if match:
            options.setdefault(match.group(1).strip(), match.group(2).strip())
    if LOADED_ENGINE.search(text[:2000]):
        options = {key: value for key, value in options.items() if key not in BUILD_FLAGS}
    options.update(command_options(text[:LOG_HEAD]))
    summary = summary_of_log(text, source)
    if summary is not None:
        options[SUMMARY] = summary
    return options


def _first_lines(text: str, count: int) -> list[str]:
    """`text.split("\n", count)[:count]`, without copying the text after those lines (100 MB of a large log)."""
    end = -1
    for _ in range(count):
        end = text.find("\n", end + 1)
        if end < 0:
            return text.split("\n")
    return text[:end].split("\n") if count else []


def command_options(head: str) -> dict[str, str]:
    """trtexec's own options from the command line a log opens with (`&&&& RUNNING ... # trtexec --onnx=...`): each
    `--key=value` of NAMING and SHAPING, the model and engine paths as written."""
    match = COMMAND.search(head)
    if match is None:
        return {}
    found: dict[str, str] = {}
    for word in match.group(1).split():
        key, equals, value = word.partition("=")
        if equals and key in (*NAMING, *SHAPING) and value:
            found.setdefault(key, value.strip("'\""))
    return found


def _options_from_json(doc: Any, source: str) -> dict[str, Any]:
    if isinstance(doc, list) and doc and isinstance(doc[0], dict) and "ComputeCapability" in doc[0]:
        device = doc[0]
        cc = device.get("ComputeCapability")
        return {"Selected Device": device.get("Name"),
                "Compute Capability": ".".join(map(str, cc)) if isinstance(cc, list) else cc,
                "Total Memory": device.get("TotalMemory"), "SMs": device.get("MULTIPROCESSOR_COUNT"),
                "Clock Rate": device.get("CLOCK_RATE"), "Memory Clock Rate": device.get("MEMORY_CLOCK_RATE"),
                "CUDA version": (".".join(map(str, device["CUDA_VERSION"]))
                                 if isinstance(device.get("CUDA_VERSION"), list) else None)}
    if not isinstance(doc, dict) or not ({"model_options", "build_options", "inference_options",
                                          "device_information"} & set(doc)):
        raise InputError("not trtexec metadata (no model, build, inference or device options)")
    options: dict[str, Any] = {}
    for section in ("model_options", "build_options", "inference_options", "device_information"):
        if isinstance(doc.get(section), dict):
            options.update(doc[section])
    summary = summary_of_json(doc, source)
    if summary is not None:
        options[SUMMARY] = summary
    return options


def read_options(path: Path) -> dict[str, Any]:
    text = documents.read_text(path, "metadata file")
    if not opens_as_json(text[:4096]):
        if not has_log_marks(text):
            raise InputError(f"{path}: neither trtexec metadata JSON nor a trtexec log")
        one_run(text, str(path))
        return _options_from_log(text, path.name)
    doc = documents.parse_json(text, str(path), "trtexec metadata")
    try:
        return _options_from_json(doc, path.name)
    except InputError as exc:
        raise InputError(f"{path}: {exc}") from None


def _number(text: Any, pattern: str = r"[-+]?\d+(?:\.\d+)?") -> float | None:
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        return float(text)
    match = re.search(pattern, str(text)) if text is not None else None
    return float(match.group(0)) if match else None


def _flag(text: Any) -> bool | None:
    return {"enabled": True, "disabled": False}.get(str(text).strip().lower()) if text is not None else None


def _shape(text: Any) -> list[int] | None:
    """The first input's shape of an option's value: `x=4x1x28x28` (trtexec's option lines) or `x:4x1x28x28`
    (its command line)."""
    match = (SHAPE.search(str(text)) or COMMAND_SHAPE.search(str(text))) if text else None
    return [int(d) for d in match.group(1).split("x")] if match else None


def _input_shape(options: dict[str, Any], key: str | None) -> list[int] | None:
    """The input shape the option `key` gives; `--batch=N` (an implicit-batch engine) gives the batch alone."""
    if key == "--batch":
        return [documents.count(_number(options[key]), "--batch", positive=True)]
    return _shape(options.get(key)) if key else None


def _bounded(value: float | None, check: Callable[..., Any], where: str) -> Any:
    return check(value, where) if value is not None else None


def _mhz(text: Any) -> int | None:
    """A clock rate in MHz: trtexec writes GHz (`1.425 GHz`, or a bare 1.695 in its JSON), trex kHz (1410000)."""
    value = _number(text)
    if value is None:
        return None
    mhz = value * 1000 if "GHz" in str(text) or value < 100 else value / 1000 if value > 100_000 else value
    return documents.count(round(mhz), "clock rate (MHz)")


def facts_from(paths: list[Path]) -> RunFacts:
    """What the files say about the run; every number checked (`documents`), a fact no file gives None."""
    options: dict[str, Any] = {}
    summaries: list[PerformanceSummary] = []
    unfinished: list[str] = []
    for path in paths:
        for key, value in read_options(path).items():
            if key == SUMMARY:
                summaries.append(value)
            if key == UNFINISHED:
                unfinished.append(value)
            if value not in (None, ""):
                options.setdefault(key, value)
    duration = str(options.get("Duration", ""))
    warmup = re.search(r"\+ *(\d+(?:\.\d+)?) *ms warm", duration)
    memory = options.get("Device Global Memory") or options.get("Total Memory")
    memory_mib = _number(memory)
    if memory_mib is not None and "MiB" not in str(memory):
        memory_mib /= 1 << 20  # bytes (trex's device list)
    sms = _bounded(_number(options.get("SMs")), documents.count, "SMs")
    iterations = _bounded(_number(options.get("Iterations")), documents.count, "Iterations")
    summary = summaries[0] if summaries else None
    model_from = next((key for key in NAMING if options.get(key)), None)
    shape_from = next((key for key in SHAPING if _shape(options.get(key)) or key == "--batch" and options.get(key)),
                      None)
    duration_s = _bounded(_number(duration.split("(")[0]) if duration else None, documents.time_ms, "Duration")
    warmup_ms = _bounded(float(warmup.group(1)) if warmup else None, documents.time_ms, "warm-up")
    cc = options.get("Compute Capability")
    return RunFacts(
        model=str(options[model_from]) if model_from else None,
        model_from=model_from,
        tensorrt=str(options["TensorRT version"]) if options.get("TensorRT version") else None,
        gpu=str(options["Selected Device"]) if options.get("Selected Device") else None,
        compute_capability=str(cc) if cc not in (None, "") else None,
        multiprocessors=sms,
        memory_mib=_bounded(round(memory_mib) if memory_mib is not None else None, documents.count, "device memory"),
        precision=str(options["Precision"]) if options.get("Precision") else None,
        cuda_graph=_flag(options.get("CUDA Graph")),
        iterations=iterations,
        duration_s=duration_s,
        warmup_s=warmup_ms / 1000 if warmup_ms is not None else None,
        input_shape=_input_shape(options, shape_from),
        shape_from=shape_from,
        gpu_compute_median_ms=summary.gpu_compute.median_ms if summary else None,
        summary=summary,
        summaries=summaries,
        transfers=_flag(options.get("Data transfers")),
        sm_clock_mhz=_mhz(options.get("Application Compute Clock Rate") or options.get("Compute Clock Rate")
                          or options.get("Clock Rate")),
        mem_clock_mhz=_mhz(options.get("Application Memory Clock Rate") or options.get("Memory Clock Rate")),
        cuda=str(options["CUDA version"]) if options.get("CUDA version") else None,
        build_flags={key: str(options[key]) for key in BUILD_FLAGS if options.get(key) not in (None, "")},
        sources=[str(p) for p in paths],
        unfinished=unfinished,
    )


MODEL_SUFFIX = re.compile(r"\.(onnx|uff|caffemodel|prototxt|engine|plan|trt)$")


def _without_model_suffixes(name: str) -> str:
    """`resnet.onnx.engine` -> `resnet`: every model and engine suffix off the end, never the whole name."""
    while MODEL_SUFFIX.search(name) and MODEL_SUFFIX.sub("", name):
        name = MODEL_SUFFIX.sub("", name)
    return name


def model_name(model_path: str) -> str:
    """`./examples/resnet/generated/resnet-qat.onnx` -> `resnet-qat`."""
    return _without_model_suffixes(Path(model_path.replace("\\", "/")).name)


def engine_name(path: Path) -> str:
    """The engine's name from a file's name (a variant's and, without metadata, the model's): its engine's stem
    without model and engine suffixes (`resnet.onnx.engine.graph.json` -> `resnet`, `mobilenet_v2_fp16.profile.json`
    -> `mobilenet_v2_fp16`); a dot inside the name stays (`trt10.16.0-run.log` -> `trt10.16.0-run`)."""
    return _without_model_suffixes(engine_stem(path))
