"""Import speed: the largest real set of ../shared/fixtures, and a 100,000-layer file built from a real one.

    python benchmarks/trt_import_speed.py > benchmarks/trt_import_speed.txt

The synthetic engine repeats the layer records of `trt10-resnet18-fp16-trtexec-rtx3060` (detailed
`--exportLayerInfo`, TensorRT 10) with numbered names, and a profile of the same records: the
format is TensorRT's, the engine is not one. Each figure is the best of three runs, wall and CPU
seconds (import: read, check, parse, pair; diff: two such imports compared layer by layer).
"""

from __future__ import annotations

import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from profilers.trt_import.importer import ImportFiles, import_variant, new_session
from sessions.analyses.diff import diff_sessions
from sessions.analyses.groups import load_rules
from tests.trt_sets import Engine, engines, set_folders

SOURCE = Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "trt" / "trt10-resnet18-fp16-trtexec-rtx3060"
LAYERS = 100_000


def best_of(runs: int, work) -> str:
    """Wall and CPU seconds of the fastest of `runs` runs (CPU time is what a loaded machine cannot inflate)."""
    times = []
    for _ in range(runs):
        wall, cpu = time.perf_counter(), time.process_time()
        work()
        times.append((time.perf_counter() - wall, time.process_time() - cpu))
    wall_s, cpu_s = min(times)
    return f"{wall_s:.3f}\t{cpu_s:.3f}"


def largest_set() -> tuple[str, ImportFiles]:
    """The engine of both fixture folders whose files (layers, profile, times) are largest together."""
    def size(engine: Engine) -> int:
        return sum(p.stat().st_size for p in (engine.layers, engine.profile, engine.times) if p is not None)
    engine = max((e for folder in set_folders() for e in engines(folder)), key=size)
    files = ImportFiles.of(layers=engine.layers, profile=engine.profile, times=engine.times, find_metadata=False)
    return f"{engine.label} ({size(engine) / 1024:.0f} KiB)", files


def synthetic(folder: Path, count: int) -> ImportFiles:
    layers = json.loads((SOURCE / "resnet18_fp16.graph.json").read_text())["Layers"]
    records = [r for r in json.loads((SOURCE / "resnet18_fp16.profile.json").read_text()) if "name" in r]
    out_layers, out_records = [], [{"count": 100}]
    for i in range(count):
        layer, record = dict(layers[i % len(layers)]), dict(records[i % len(records)])
        layer["Name"] = record["name"] = f"block{i // len(layers)}/{layer['Name']}"
        out_layers.append(layer)
        out_records.append(record)
    (folder / "big.graph.json").write_text(json.dumps({"Layers": out_layers, "Bindings": []}))
    (folder / "big.profile.json").write_text(json.dumps(out_records))
    return ImportFiles.of(layers=folder / "big.graph.json", profile=folder / "big.profile.json", find_metadata=False)


def main() -> None:
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"# {platform.machine()}, {os.cpu_count()} cores, load average {load}, "
          f"Python {platform.python_version()}; best of 3")
    print("# figure\twall s\tCPU s\twhat")
    label, files = largest_set()
    print(f"import_largest_set_s\t{best_of(3, lambda: import_variant(files))}\t{label}")
    with tempfile.TemporaryDirectory() as folder:
        big = synthetic(Path(folder), LAYERS)
        size = (Path(folder) / "big.graph.json").stat().st_size / (1 << 20)
        print(f"import_{LAYERS}_layers_s\t{best_of(3, lambda: import_variant(big))}\t{size:.0f} MiB layer file")
        sessions = []
        for name in ("a", "b"):
            imported = import_variant(big, name, "big")
            sessions.append(new_session(imported, []))
            sessions[-1].variants.append(imported.variant)
        rules = load_rules()
        print(f"diff_{LAYERS}_layers_s\t{best_of(3, lambda: diff_sessions(sessions[0], sessions[1], rules))}")


if __name__ == "__main__":
    main()
