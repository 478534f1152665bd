"""Every folder of ../shared/fixtures/trt and ../shared/fixtures/trtexec imported by `trt-inspect import DIR` alone,
the session's figures beside the figures in the files themselves.

    python benchmarks/trt_folders_report.py > benchmarks/trt_folders_report.md

The session's side runs the command (`inspector.cli.main`, `import DIR --out`) and reads the session back. The file's
side reads the raw files with `json` and regular expressions of this script, sharing no code with the importer:
layers (a layer file's records, a log's `Name: ` records or `Layer(...)` lines, else a profile's records), the summed
per-layer time in ms per inference (a JSON profile's averageMs or an IProfiler sample's medians; a `--dumpProfile`
table's Total Avg.), and the latency (the median of an `--exportTimes` file's computeMs, else the GPU Compute Time
median of a log's performance summary or of trtexec's profile metadata JSON). A file the command leaves is checked
by the same reading for layers, times or latency it would hold.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from inspector.cli import main
from sessions.documents import storage
from sessions.documents.model import Session, Variant

SHARED = ROOT.parent / "shared" / "fixtures"
TIMESTAMP = r"^(?:\[[^\]\n]*\] )?"
VERBOSE_LINE = re.compile(r"Layer\(\w+\): .*?, Tactic: ", re.MULTILINE)
TABLE_TOTAL = re.compile(TIMESTAMP + r"\[I\]\s+[\d.]+\s+([\d.]+)\s+(?:[\d.]+\s+)?[\d.]+\s+Total\s*$", re.MULTILINE)
TABLE_TOTAL_7X = re.compile(TIMESTAMP + r"\[I\]\s+Total\s+[\d.]+\s+([\d.]+)", re.MULTILINE)
SUMMARY_MEDIAN = re.compile(r"\[I\] GPU Compute Time: .*?median = ([\d.]+) ms")
SUMMARY_MEDIAN_7X = re.compile(r"\[I\] GPU Compute\n(?:.*\n){0,4}?.*\[I\] median: ([\d.]+) ms")


def _json(path: Path):
    try:
        return json.loads(path.read_text(errors="replace"))
    except ValueError:
        return None


def file_layers(doc, text: str) -> int | None:
    """The layers a file names: a layer file's records, a log's `--dumpLayerInfo` records or verbose lines."""
    if isinstance(doc, dict) and isinstance(doc.get("Layers"), list):
        return len(doc["Layers"])
    if doc is not None:
        return None
    records = len(re.findall(r"^Name: ", text, re.MULTILINE))
    return records or len(VERBOSE_LINE.findall(text)) or None


def file_layer_sum(doc, text: str) -> float | None:
    """ms per inference summed over a profile's records (its Total row's Avg. for a log's table)."""
    if isinstance(doc, list) and doc and all(isinstance(r, dict) for r in doc) and any("averageMs" in r for r in doc):
        return sum(r["averageMs"] for r in doc if "averageMs" in r and "name" in r)
    if isinstance(doc, dict) and doc and all(isinstance(v, list) and v and all(isinstance(x, float) for x in v)
                                             for v in doc.values()):
        return sum(statistics.median(v) for v in doc.values())
    total = TABLE_TOTAL.search(text) or TABLE_TOTAL_7X.search(text)
    return float(total.group(1)) if total else None


def file_latency(doc, text: str) -> tuple[float, str] | None:
    """(median ms, what states it): per-inference times, else a performance summary's GPU Compute Time median."""
    if isinstance(doc, list) and doc and isinstance(doc[0], dict) and "computeMs" in doc[0]:
        return statistics.median(r["computeMs"] for r in doc), "--exportTimes median"
    if isinstance(doc, dict) and isinstance(doc.get("performance_summary"), dict):
        gpu = doc["performance_summary"].get("GPU Compute Time")
        return (gpu[3], "summary median") if isinstance(gpu, list) and len(gpu) > 3 else None
    if isinstance(doc, dict) and isinstance(doc.get("latencies"), list):  # a benchmark script's own result file
        return statistics.median(doc["latencies"]) * 1e3, "a benchmark script's latencies (s)"
    found = SUMMARY_MEDIAN.search(text) or SUMMARY_MEDIAN_7X.search(text)
    return (float(found.group(1)), "summary median") if found else None


def file_figures(paths: list[Path]) -> tuple[int | None, float | None, tuple[float, str] | None]:
    """Layers, summed layer time and latency over an engine's files, as the files state them."""
    layers = summed = latency = None
    records = None
    for path in paths:
        text = path.read_text(errors="replace")
        doc = _json(path)
        if isinstance(doc, str):  # a double-encoded benchmark result
            doc = _json_text(doc)
        layers = layers or file_layers(doc, text)
        if isinstance(doc, list) and doc and isinstance(doc[-1], dict) and "averageMs" in doc[-1]:
            records = len([r for r in doc if "name" in r])  # a profile alone names its engine's layers
        summed = summed if summed is not None else file_layer_sum(doc, text)
        found = file_latency(doc, text)
        if found and (latency is None or found[1] == "--exportTimes median"):
            latency = found
    return layers or records, summed, latency


def _json_text(text: str):
    try:
        return json.loads(text)
    except ValueError:
        return None


def session_of(folder: Path, out: Path) -> tuple[Session | None, str]:
    """The session `import DIR` writes, or the one line it refused with."""
    stderr = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(stderr):
        code = main(["import", str(folder), "--out", str(out)])
    return (storage.load(out), "") if code == 0 else (None, stderr.getvalue().strip())


def taken(variant: Variant) -> tuple[list[str], list[str]]:
    """The files a variant's folder note says it took, and those it left with their reasons."""
    note = variant.notes[0]
    took, _, left = note.split(": took ", 1)[1].partition("; left ")
    names = re.findall(r"(?:^|\), )([^ ()]+) \(", took)
    return names, [] if left == "nothing" else re.split(r"(?<=\)), ", left)


def latency_source(variant: Variant) -> str:
    """What the session says gave the latency: trtexec's summary (no samples), a benchmark result, --exportTimes."""
    if variant.latency is None:
        return "-"
    if not variant.latency.samples_ms:
        return "summary"
    return "benchmark result" if any(n.startswith("latency: the") and "benchmark result" in n
                                     for n in variant.notes) else "--exportTimes"


def _ms(value: float | None) -> str:
    return f"{value:.4f}" if value is not None else "-"


def _agree(ours: float | None, theirs: float | None) -> bool:
    """Equal to a table's rounding: a `--dumpProfile` Total's Avg. has 4 decimals, its rows' finer figures do not."""
    return (ours is None) == (theirs is None) and (ours is None or abs(ours - theirs) <= 1e-4 + 1e-3 * abs(theirs))


def rows(folder: Path, work: Path) -> list[str]:
    label = f"{folder.parent.name}/{folder.name}"
    session, refused = session_of(folder, work / f"{folder.name}.json")
    if session is None:
        return [f"| {label} | refused: {refused} | | | | | | no |"]
    out = []
    for variant in session.variants:
        names, left = taken(variant)
        layers, summed, latency = file_figures([folder / name for name in names])
        left_holding = [entry for entry in left if any(file_figures([folder / entry.split(" (")[0]]))]
        ours_sum = sum(layer.time_ms for layer in variant.layers if layer.time_ms is not None) if any(
            layer.time_ms is not None for layer in variant.layers) else None
        ours_latency = variant.latency.median_ms if variant.latency else None
        source = latency_source(variant)
        right = (layers == len(variant.layers) and _agree(ours_sum, summed)
                 and _agree(ours_latency, latency[0] if latency else None) and not left_holding)
        name = f"{label}" + (f" `{variant.name}`" if len(session.variants) > 1 else "")
        out.append(
            f"| {name} | {', '.join(names)} | {'; '.join(left) or 'nothing'} | {len(variant.layers)} / {layers} | "
            f"{_ms(ours_sum)} / {_ms(summed)} | {_ms(ours_latency)} ({source}) / "
            f"{_ms(latency[0]) + ' (' + latency[1] + ')' if latency else '-'} | "
            f"{'; '.join(left_holding) or '-'} | {'yes' if right else 'NO'} |")
    return out


def main_report() -> None:
    folders = sorted(p for kind in ("trt", "trtexec") if (SHARED / kind).is_dir() for p in (SHARED / kind).iterdir()
                     if p.is_dir())
    print("# Every shared TensorRT folder through `trt-inspect import DIR` alone\n")
    print("Generated by `python benchmarks/trt_folders_report.py`. Each figure: the session's / the files' own (plain "
          "`json` and regular expressions over the raw files, no importer code). Layer-time sums are IProfiler times "
          "measured under per-layer synchronisation, never the latency; the latency is `--exportTimes`' median where "
          "exported, else the GPU Compute Time median of trtexec's performance summary. `left holding data`: a file "
          "the command left in which the same reading finds layers, times or latency.\n")
    print("| folder (variant) | files taken | files left (why) | layers | layer-time sum ms | latency median ms "
          "| left holding data | all agree |")
    print("|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as work:
        for folder in folders:
            for row in rows(folder, Path(work)):
                print(row)


if __name__ == "__main__":
    main_report()
