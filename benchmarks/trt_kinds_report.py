"""The file kinds the importers read from text (and the JSON kinds this report also covers), each from a file,
the session's figures beside the figures in the file.

    python benchmarks/trt_kinds_report.py > benchmarks/trt_kinds_report.md

The file's figures come from plain regular expressions and `json` over the raw file, sharing nothing with
the importer: layers (lines or records), summed per-layer time in ms per inference, precision (trtexec's
`Precision:` option), tactic names. Real files are read from ../shared/fixtures; the hand-written files
of tests/data/trt_text stand in for layouts no file there has, and are labelled so.
"""

from __future__ import annotations

import json
import re
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from profilers.trt_import.importer import Imported, ImportFiles, import_variant, new_session
from tests.trt_sets import SHARED

TEXT = ROOT / "tests" / "data" / "trt_text"
YOLO = SHARED / "trt" / "trt8.5-yolo-int8-qat-orin-namesonly"


@dataclass
class Figures:
    layers: int | str
    summed_ms: float | str
    precision: str
    tactics: int | str
    extra: str = ""


def _fmt(value: float | str) -> str:
    return f"{value:.4f}" if isinstance(value, float) else str(value)


def session_figures(imported: Imported) -> Figures:
    variant = imported.variant
    times = [layer.time_ms for layer in variant.layers if layer.time_ms is not None]
    tactics = {layer.tactic for layer in variant.layers if layer.tactic and not re.fullmatch(r"0x0+", layer.tactic)}
    return Figures(len(variant.layers), sum(times) if times else "no times", variant.precision, len(tactics))


def option(text: str, key: str) -> str:
    found = re.search(rf"\] {re.escape(key)}: (.*)", text)
    return found.group(1).strip() if found else "not stated"


def dumplayerinfo_file(path: Path) -> Figures:
    text = path.read_text()
    names = re.findall(r"^Name: ", text, re.MULTILINE)
    tactics = set(re.findall(r"TacticName: ([^,]+),", text))
    return Figures(len(names), "no profile", option(text, "Precision"), len(tactics))


def verbose_file(path: Path) -> Figures:
    text = path.read_text()
    lines = re.findall(r"^Layer\(\w+\): .*?, Tactic: (0x[0-9a-f]+)", text, re.MULTILINE)
    return Figures(len(lines), "see the table row", option(text, "Precision"), len({t for t in lines if int(t, 16)}))


def table_file(path: Path) -> Figures:
    text = path.read_text()
    heading = re.search(r"=== Profile \((\d+) iterations", text)
    assert heading is not None, path
    iterations = int(heading.group(1))
    after = text[text.index("=== Profile"):]
    rows = [line for line in after.splitlines()[2:] if re.search(r"\d\s*$|\d\s+\S", line)]
    total = next(line for line in rows if re.search(r"\bTotal\s*$|\]\s+Total\s", line))
    body = rows[:rows.index(total)]
    summed = float(re.findall(r"(\d+\.\d+)", total)[0]) / iterations  # the Total row's Time over the iterations
    return Figures(len(body), summed, option(text, "Precision"), "none in a table", f"{iterations} iterations")


def summary_file(path: Path) -> str:
    text = path.read_text()
    found = re.search(r"GPU Compute Time: .*?median = ([\d.]+) ms", text) or re.search(
        r"GPU Compute\n(?:.*\n)*?.*median: ([\d.]+) ms", text)
    return found.group(1) if found else "none"


def samples_file(path: Path) -> Figures:
    doc = json.loads(path.read_text())
    return Figures(len(doc), sum(statistics.median(v) for v in doc.values()), "not stated", "none in samples",
                   f"{max(len(v) for v in doc.values())} runs")


def metadata_file(folder: Path) -> str:
    device = json.loads(next(folder.glob("*.engine.metadata.json")).read_text())[0]
    build = json.loads(next(folder.glob("*.build.metadata.json")).read_text())["build_options"]
    profile = json.loads(next(folder.glob("*.profile.metadata.json")).read_text())["performance_summary"]
    return (f"GPU {device['Name']}, SM clock {device['CLOCK_RATE'] // 1000} MHz, CUDA "
            f"{'.'.join(map(str, device['CUDA_VERSION']))}, Precision {build['Precision']}, "
            f"GPU compute median {profile['GPU Compute Time'][3]} ms")


def metadata_session(imported: Imported) -> str:
    session = new_session(imported, ["import"])
    gpu = session.environment.gpu
    assert gpu is not None
    return (f"GPU {gpu.name}, SM clock {gpu.sm_clock_mhz} MHz, CUDA {session.environment.versions.get('cuda')}, "
            f"Precision {session.study.engine_options.get('Precision')}, "
            f"GPU compute median {imported.facts.gpu_compute_median_ms} ms")


def table(title: str, rows: list[tuple[str, Figures, Figures]]) -> list[str]:
    out = [f"### {title}", "", ("| file | layers (session / file) | summed ms per inference (session / file) | "
           "precision (session / file's option) | tactic names (session / file) |"), "|---|---|---|---|---|"]
    for label, ours, theirs in rows:
        extra = f" ({theirs.extra})" if theirs.extra else ""
        out.append(f"| {label}{extra} | {ours.layers} / {theirs.layers} | {_fmt(ours.summed_ms)} / {_fmt(theirs.summed_ms)} "
                   f"| {ours.precision} / {theirs.precision} | {ours.tactics} / {theirs.tactics} |")
    return [*out, ""]


def imported(layers: Path | None, profile: Path | None) -> Imported:
    return import_variant(ImportFiles.of(layers=layers, profile=profile, find_metadata=False))


def main() -> None:
    if not SHARED.is_dir():
        sys.exit(f"{SHARED} is missing: the report reads the real files of ../shared/fixtures")
    lines = ["# TensorRT file kinds read from text, and metadata, beside the files' own figures", "",
             ("Generated by `python benchmarks/trt_kinds_report.py`. The file's figures are plain regular expressions "
             "and `json` over the raw file (no importer code). Files under `tests/data/trt_text` are hand-written "
             "in trtexec's layouts (their public sources are in that folder's README)."), ""]
    logs = [SHARED / "trt" / name / "result-04.log" for name in ("trt10.16-mnist-cnn-fp32-h100", "trt10.14-mnist-cnn-fp32-rtx6000ada")]
    lines += table("--dumpLayerInfo text (`Layer Information:` block), TensorRT 10.14 and 10.16",
                   [(f"trt/{log.parent.name}/{log.name}", session_figures(imported(log, None)), dumplayerinfo_file(log))
                    for log in logs])
    lines += table("Verbose build log `Engine Layer Information` (`Layer(<Type>): ...` lines), TensorRT 8.5",
                   [("trt/trt8.5-yolo-int8-qat-orin-namesonly/trt.out",
                     session_figures(imported(YOLO / "trt.out", None)), verbose_file(YOLO / "trt.out"))])
    tables = [
        ("trt/trt8.5-yolo-int8-qat-orin-namesonly/trt.out, 8.x layout, the log's layers",
         imported(YOLO / "trt.out", YOLO / "trt.out"), YOLO / "trt.out"),
        ("trt/trt8.5-yolo-int8-qat-orin-namesonly/trt.out, 8.x layout, with layer_info.json (86 layers; 9 unrun)",
         imported(YOLO / "layer_info.json", YOLO / "trt.out"), YOLO / "trt.out"),
        ("tests/data/trt_text/trt10-dumplayerinfo-dumpprofile.log (HAND-WRITTEN), 8.6+/10.x layout",
         imported(TEXT / "trt10-dumplayerinfo-dumpprofile.log", TEXT / "trt10-dumplayerinfo-dumpprofile.log"),
         TEXT / "trt10-dumplayerinfo-dumpprofile.log"),
        ("tests/data/trt_text/trt7-dumpprofile.log (HAND-WRITTEN), 7.x layout", imported(None, TEXT / "trt7-dumpprofile.log"),
         TEXT / "trt7-dumpprofile.log"),
    ]
    lines += table("--dumpProfile text table (`=== Profile (N iterations ) ===`); the file's layers are its rows",
                   [(label, session_figures(ours), table_file(path)) for label, ours, path in tables])
    lines += ["### Performance summary (GPU compute median, ms)", "", "| file | session (method) | file |", "|---|---|---|"]
    for name in ("trt10-dumplayerinfo-dumpprofile.log", "trt7-dumpprofile.log"):
        median = imported(None, TEXT / name).facts.gpu_compute_median_ms
        lines.append(f"| tests/data/trt_text/{name} (HAND-WRITTEN) | {median} | {summary_file(TEXT / name)} |")
    lines += ["", ("No real log with a performance summary is under ../shared (the MNIST logs were run with "
              "--skipInference, the YOLO log with the profiler on, which suppresses the summary)."), ""]
    samples = [SHARED / "trt" / n / "trt_layer_latency.json" for n in (
        "trt10-mobilenetv2-tf32-onnxapi-rtx3060", "trt10-resnet18-tf32-onnxapi-rtx3060", "trt10-mobilenetv2-fp16-torchtrt-api")]
    lines += table("IProfiler per-layer samples written by the API over many runs (read before this work; summed medians)",
                   [(f"trt/{p.parent.name}/{p.name}", session_figures(imported(None, p)), samples_file(p)) for p in samples])
    lines += ["### trex device-properties, build and profile metadata JSON", "", "| set | session | files |", "|---|---|---|"]
    for name in ("trt8.4-resnet-a100-fp32", "trt8.4-resnet-a100-int8-qat-residual"):
        folder = SHARED / "trt" / name
        graph = next(folder.glob("*.graph.json"))
        with_metadata = import_variant(ImportFiles.of(layers=graph, profile=next(folder.glob("*.engine.profile.json"))))
        lines.append(f"| trt/{name} | {metadata_session(with_metadata)} | {metadata_file(folder)} |")
    print("\n".join([*lines, ""]))


if __name__ == "__main__":
    main()
