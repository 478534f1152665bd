"""The file kinds the importers read from text (and the JSON kinds this report also covers), each from a file,
the session's figures beside the figures in the file.

    python benchmarks/trt_kinds_report.py [--external PATH=SOURCE ...] [--engine LAYERS PROFILE [SUMMARY] ...] \
        > benchmarks/trt_kinds_report.md

The file's figures come from plain regular expressions and `json` over the raw file, sharing nothing with
the importer: layers (lines or records), summed per-layer time in ms per inference, precision (trtexec's
`Precision:` option), tactic names. Real files are read from ../shared/fixtures; the hand-written files
of tests/data/trt_text stand in for layouts no file there has, and are labelled so.

Real files that stay out of the repository are given on the command line: `--external PATH=SOURCE` names a
file and its public source (`owner/repo@commit:path`, `#Lm-Ln` for lines of it, or an issue URL), and each is
imported as what it holds (a `--dumpProfile` table, a layer block, a performance summary). `--engine` joins
such files of one engine as a user would (`import --layers LAYERS --profile PROFILE --metadata SUMMARY`).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from profilers.trt_import.importer import Imported, ImportFiles, import_variant, new_session
from sessions.documents.errors import InputError
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
    tactics = {layer.tactic for layer in variant.layers if layer.tactic and not re.fullmatch(r"(0x)?0+", layer.tactic)}
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
    lines = re.findall(r"^Layer\(\w+\): .*?, Tactic: (0x[0-9a-fA-F]+|-?\d+)", text, re.MULTILINE)  # decimal in 8.0-8.2
    return Figures(len(lines), "see the table row", option(text, "Precision"), len({t for t in lines if int(t, 0)}))


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
        out.append(f"| {label}{extra} | {ours.layers} / {theirs.layers} "
                   f"| {_fmt(ours.summed_ms)} / {_fmt(theirs.summed_ms)} "
                   f"| {ours.precision} / {theirs.precision} | {ours.tactics} / {theirs.tactics} |")
    return [*out, ""]


def imported(layers: Path | None, profile: Path | None) -> Imported:
    return import_variant(ImportFiles.of(layers=layers, profile=profile, find_metadata=False))


# Real files given on the command line, kept out of the repository ------------------------------------------

SOURCE = re.compile(r"^[\w.-]+/[\w.-]+@[0-9a-f]{7,40}:[^\s#]+(?:#L\d+-L\d+)?$"
                    r"|^https://github\.com/[\w.-]+/[\w.-]+/(?:issues|pull)/\d+(?:#[\w-]+)?$")
TABLE_ROW = re.compile(r"^\S*\s*\[I\] +([\d.]+) +([\d.]+) +[\d.]+ +[\d.]+ +(\S.*?)\s*$", re.MULTILINE)  # 8.6+ layout
ROLES = ("layers", "profile", "metadata")


@dataclass
class External:
    path: Path
    source: str  # owner/repo@commit:path[#Lm-Ln], or an issue URL


@dataclass
class Engine:
    layers: Path | None
    profile: Path | None
    metadata: list[Path]


def external_arg(arg: str) -> External:
    path, sep, source = arg.partition("=")
    if not sep or not SOURCE.match(source):
        raise argparse.ArgumentTypeError(f"{arg!r}: expected PATH=SOURCE, SOURCE as owner/repo@commit:path[#Lm-Ln] "
                                         "or a GitHub issue URL")
    if not Path(path).is_file():
        raise argparse.ArgumentTypeError(f"{path}: no such file")
    return External(Path(path), source)


def engine_arg(words: list[str], known: set[Path]) -> Engine:
    """`layers=PATH profile=PATH metadata=PATH ...`, each PATH one given with --external; ValueError otherwise."""
    roles: dict[str, list[Path]] = {role: [] for role in ROLES}
    for word in words:
        role, sep, path = word.partition("=")
        if not sep or role not in ROLES or Path(path) not in known:
            raise ValueError(f"--engine {word!r}: expected ROLE=PATH, ROLE one of {', '.join(ROLES)}, "
                             f"PATH given with --external")
        roles[role].append(Path(path))
    if len(roles["layers"]) > 1 or len(roles["profile"]) > 1 or not (roles["layers"] or roles["profile"]):
        raise ValueError("--engine: one layers=PATH or profile=PATH at least, at most one of each")
    return Engine(next(iter(roles["layers"]), None), next(iter(roles["profile"]), None), roles["metadata"])


def short(source: str) -> str:
    """The source with its commit cut to 8 characters."""
    return re.sub(r"@([0-9a-f]{8})[0-9a-f]+:", r"@\1:", source)


def trt_version(text: str) -> str:
    found = re.search(r"\[TensorRT v(\d+)\]", text)
    if found:
        value = int(found.group(1))  # 8600 = 8.6.0, 101600 = 10.16.0
        major, rest = divmod(value, 10000) if value >= 10000 else divmod(value, 1000)
        return f"{major}.{rest // 100}.{rest % 100}"
    stated = re.search(r"TensorRT(?: version:)? (\d+\.\d+\.\d+)", text)
    return stated.group(1) if stated else "version not stated"


def names_only_block(text: str) -> list[str]:
    """The bare names under `Layers:` of a names-only `--dumpLayerInfo` block (lines up to a blank or a log line)."""
    block = re.search(r"\] Layers:\n((?:[^\[\n][^\n]*\n)*)", text)
    return block.group(1).splitlines() if block else []


def layer_block_file(path: Path) -> Figures | None:
    """The layer block a file holds, by plain regex: `--dumpLayerInfo` records, bare names, or verbose lines."""
    text = path.read_text()
    if re.search(r"^Name: ", text, re.MULTILINE):
        return dumplayerinfo_file(path)
    names = names_only_block(text) if "Layer Information:" in text else []
    if names and not names[0].startswith("Name: "):
        return Figures(len(names), "no profile", option(text, "Precision"), "none in names")
    return verbose_file(path) if re.search(r"^Layer\(\w+\): ", text, re.MULTILINE) else None


def summary_session(path: Path, engines: list[Engine]) -> str:
    """The GPU compute median the import states for a file's summary: the file alone, or the engine it is metadata
    of."""
    text = path.read_text()
    holds_table = "=== Profile (" in text
    holds_layers = layer_block_file(path) is not None
    if holds_table or holds_layers:
        return str(imported(path if holds_layers else None, path if holds_table else None).facts.gpu_compute_median_ms)
    engine = next((e for e in engines if path in e.metadata), None)
    if engine is None:
        return "not imported (a log of only a summary: give it as an engine's metadata)"
    return f"{import_engine(engine).facts.gpu_compute_median_ms} (as metadata of its engine)"


def import_engine(engine: Engine) -> Imported:
    return import_variant(ImportFiles.of(layers=engine.layers, profile=engine.profile, metadata=engine.metadata,
                                         find_metadata=False))


def engine_session(imported_engine: Imported) -> list[str]:
    variant = imported_engine.variant
    times = [layer.time_ms for layer in variant.layers if layer.time_ms is not None]
    folded = next((re.match(r"(\d+) kernel records", n) for n in variant.notes if re.match(r"\d+ kernel records", n)),
                  None)
    return [str(len(variant.layers)), str(sum(1 for layer in variant.layers if layer.kind != "unknown")),
            folded.group(1) if folded else "0", str(sum(1 for t in times if t == 0.0)),
            _fmt(sum(times)) if times else "no times", variant.precision,
            str(imported_engine.facts.gpu_compute_median_ms)]


def engine_file(engine: Engine) -> list[str]:
    """The same figures from the files by plain regex: layers of the layer file, typed layers (`Layer(...)` lines of a
    verbose log among the files), kernel rows `_myl<i>_<k>` no layer is named, layers with no row that are no
    Myelin layer, the Total row over the iterations, the build's Precision option, the first summary's median."""
    files = [p for p in (engine.layers, *engine.metadata, engine.profile) if p is not None]
    texts = {p: p.read_text() for p in files}
    layers = layer_block_file(engine.layers) if engine.layers else None
    logged: list[tuple[str, str]] = next((found for p in files if (found := re.findall(
        r"^Layer\((\w+)\): (.*?), Tactic: ", texts[p], re.MULTILINE))), [])
    names = {name for _, name in logged} | set(names_only_block(texts[engine.layers]) if engine.layers else [])
    kernels: str | int = "no table"
    unrun: str | int = "no table"
    summed: float | str = "no table"
    if engine.profile is not None:
        rows = {name: float(avg) for _, avg, name in TABLE_ROW.findall(texts[engine.profile]) if name != "Total"}
        kernels = sum(1 for row in rows if re.search(r"_myl\d+_\d+$", row) and row not in names)
        unrun = sum(1 for kind, name in logged if name not in rows and kind != "Myelin")
        summed = table_file(engine.profile).summed_ms
    builds = [p for p in files if re.search(r"^Layer\(\w+\): ", texts[p], re.MULTILINE)]  # the build's option first
    precision = next((option(texts[p], "Precision") for p in [*builds, *files]
                      if option(texts[p], "Precision") != "not stated"),
                     "not stated")
    median = next((m for p in files if (m := summary_file(p)) != "none"), "none")
    return [str(layers.layers) if layers else "no layer file", str(len(logged)) if logged else "no Layer(...) lines",
            str(kernels), str(unrun), _fmt(summed), precision, median]


def external_section(externals: list[External], engines: list[Engine], command: str) -> list[str]:
    label = {e.path: f"{short(e.source)} (TensorRT {trt_version(e.path.read_text())})" for e in externals}
    out = ["## Real files from public sources (not in the repository)", "",
           ("These files are not committed (fetched from public repositories; the lead may add them to ../shared). "
           "To rerun: fetch each file from its source (`git -C CLONE show COMMIT:PATH > FILE`, keeping only lines m-n "
           "for `#Lm-Ln`: `| sed -n 'm,np'`), then:"), "", "```", command, "```", ""]
    tables = [e.path for e in externals if "=== Profile (" in e.path.read_text()]
    out += table("--dumpProfile text tables of real logs, each imported alone (`import --profile FILE`)",
                 [(label[p], session_figures(imported(None, p)), table_file(p)) for p in tables])
    blocks = [(e.path, f) for e in externals if (f := layer_block_file(e.path)) is not None]
    out += table("Layer blocks of real logs (`--dumpLayerInfo` records or names, verbose `Layer(...)` lines), each "
                 "imported alone (`import --layers FILE`)",
                 [(label[p], session_figures(imported(p, None)), figures) for p, figures in blocks])
    out += ["### Performance summaries of real logs (GPU compute median, ms)", "", "| file | session | file |",
            "|---|---|---|"]
    out += [f"| {label[e.path]} | {summary_session(e.path, engines)} | {summary_file(e.path)} |"
            for e in externals if summary_file(e.path) != "none"]
    out += ["", "### Engines joined from several real files (`import --layers L --profile P --metadata M`)", "",
            ("| files | layers | typed layers | Myelin kernel rows summed | layers with no row (0 ms) | summed ms per "
             "inference | precision | GPU compute median ms |"), "|---|---|---|---|---|---|---|---|"]
    for engine in engines:
        roles = [f"{role} {label[p]}" for role, p in (("layers", engine.layers), ("profile", engine.profile)) if p]
        names = "; ".join([*roles, *(f"metadata {label[p]}" for p in engine.metadata)])
        pairs = zip(engine_session(import_engine(engine)), engine_file(engine), strict=False)
        out.append(f"| {names} | " + " | ".join(f"{ours} / {theirs}" for ours, theirs in pairs) + " |")
    return [*out, "", "Each cell: session / file. The file's figures are plain regular expressions over the raw files.",
            "",
            ("Where precision differs, by rule: the session's precision is what the layers' tensors run in, the build "
             "option only where the layers say nothing (an engine built with --fp16 whose layers all run Float is "
             "fp32); and a `--loadEngine` run prints trtexec's default `Precision: FP32` whatever the engine was built "
             "with, so the session takes no build option from it (names-only layers then leave the precision "
             "unknown)."), ""]


def rerun_command(externals: list[External], engine_words: list[list[str]]) -> str:
    """The command line this report was made with, its files under `$REAL` (their common folder), not a local path."""
    if not externals:
        return "python benchmarks/trt_kinds_report.py > benchmarks/trt_kinds_report.md"
    base = Path(os.path.commonpath([str(e.path.resolve().parent) for e in externals]))
    def real(path: str) -> str:
        return f"$REAL/{Path(path).resolve().relative_to(base)}"
    parts = [f"  --external {real(str(e.path))}={e.source}" for e in externals]
    for words in engine_words:
        parts.append("  --engine " + " ".join(f"{w.partition('=')[0]}={real(w.partition('=')[2])}" for w in words))
    return " \\\n".join(["python benchmarks/trt_kinds_report.py", *parts]) + " > benchmarks/trt_kinds_report.md"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--external", action="append", type=external_arg, default=[], metavar="PATH=SOURCE",
                        help="a real file kept out of the repository and its public source (repeatable)")
    parser.add_argument("--engine", action="append", nargs="+", default=[], metavar="ROLE=PATH",
                        help="files of one engine given with --external: layers=PATH profile=PATH metadata=PATH ...")
    args = parser.parse_args()
    try:
        engines = [engine_arg(words, {e.path for e in args.external}) for words in args.engine]
    except ValueError as exc:
        parser.error(str(exc))
    if not SHARED.is_dir():
        sys.exit(f"{SHARED} is missing: the report reads the real files of ../shared/fixtures")
    lines = ["# TensorRT file kinds read from text, and metadata, beside the files' own figures", "",
             ("Generated by `python benchmarks/trt_kinds_report.py` (the last section with `--external` and "
              "`--engine`: its first lines give the command). The file's figures are plain regular expressions "
             "and `json` over the raw file (no importer code). Files under `tests/data/trt_text` are hand-written "
             "in trtexec's layouts (their public sources are in that folder's README)."), ""]
    logs = [SHARED / "trt" / name / "result-04.log"
            for name in ("trt10.16-mnist-cnn-fp32-h100", "trt10.14-mnist-cnn-fp32-rtx6000ada")]
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
        ("tests/data/trt_text/trt7-dumpprofile.log (HAND-WRITTEN), 7.x layout",
         imported(None, TEXT / "trt7-dumpprofile.log"),
         TEXT / "trt7-dumpprofile.log"),
    ]
    lines += table("--dumpProfile text table (`=== Profile (N iterations ) ===`); the file's layers are its rows",
                   [(label, session_figures(ours), table_file(path)) for label, ours, path in tables])
    lines += ["### Performance summary (GPU compute median, ms)", "", "| file | session (method) | file |",
              "|---|---|---|"]
    for name in ("trt10-dumplayerinfo-dumpprofile.log", "trt7-dumpprofile.log"):
        median = imported(None, TEXT / name).facts.gpu_compute_median_ms
        lines.append(f"| tests/data/trt_text/{name} (HAND-WRITTEN) | {median} | {summary_file(TEXT / name)} |")
    lines += ["", ("No real log with a performance summary is under ../shared (the MNIST logs were run with "
              "--skipInference, the YOLO log with the profiler on, which suppresses the summary); real ones from "
              "public sources are in the last section."), ""]
    samples = [SHARED / "trt" / n / "trt_layer_latency.json" for n in (
        "trt10-mobilenetv2-tf32-onnxapi-rtx3060", "trt10-resnet18-tf32-onnxapi-rtx3060",
        "trt10-mobilenetv2-fp16-torchtrt-api")]
    lines += table("IProfiler per-layer samples written by the API over many runs (read before this work; "
                   "summed medians)",
                   [(f"trt/{p.parent.name}/{p.name}", session_figures(imported(None, p)), samples_file(p))
                    for p in samples])
    lines += ["### trex device-properties, build and profile metadata JSON", "", "| set | session | files |",
              "|---|---|---|"]
    for name in ("trt8.4-resnet-a100-fp32", "trt8.4-resnet-a100-int8-qat-residual"):
        folder = SHARED / "trt" / name
        graph = next(folder.glob("*.graph.json"))
        with_metadata = import_variant(ImportFiles.of(layers=graph, profile=next(folder.glob("*.engine.profile.json"))))
        lines.append(f"| trt/{name} | {metadata_session(with_metadata)} | {metadata_file(folder)} |")
    if args.external:
        try:
            lines += ["", *external_section(args.external, engines, rerun_command(args.external, args.engine))]
        except InputError as exc:
            sys.exit(f"trt_kinds_report: {exc}")
    print("\n".join([*lines, ""]))


if __name__ == "__main__":
    main()
