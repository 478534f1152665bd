"""Run trt-inspect over every set of real TensorRT files in some folders and print what it says.

For every set: the import, layers, roles by count and time, precision counts; then, for each fp16
(or fp32) engine and a quantized engine of the same model, one `diff` as the tool prints it.

    python benchmarks/trt_files_report.py [FOLDER ...]  > tests/data/trt_files_report.txt

Default folders: /work/trt-data-staging and ../shared/fixtures/trtexec. A set is a folder; its
files are recognised by their trtexec / trex names (`*.graph.json`, `*.profile.json`,
`*.timing.json`, `*.profile` of TensorRT 7, `layer_info.json` ...). Every figure below is printed
by the tool itself (`python -m inspector ...`), never computed here.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_FOLDERS = [Path("/work/trt-data-staging"), ROOT.parent / "shared" / "fixtures" / "trtexec"]
LAYER_NAMES = ("graph.json", "layer_info.json", "layer-info.json", "trt_engine_info.json", "exportLayerInfo.log")
PROFILE_NAMES = ("profile.json", ".profile")
TIMES_NAMES = ("timing.json", "times.json")
LOG_NAMES = ("trt.out",)
# (model, reference set, quantized set): engines of one model, fp16 (or fp32 where no fp16 exists) against INT8
PAIRS = [
    ("ResNet-18 A100", "trt8-resnet-a100-fp16", "trt8-resnet-a100-int8-qat"),
    ("ResNet-18 A100", "trt8-resnet-a100-fp16", "trt8.4-resnet-a100-int8-qat-residual"),
    ("ResNet-18 A100", "trt8-resnet-a100-fp16", "trt8.4-resnet-a100-int8-qat-residual-qgap"),
    ("ResNet-18 A100", "trt8.4-resnet-a100-fp32", "trt8.4-resnet-a100-int8-qat-residual"),
    ("Keras ResNet50 RTX 3090", "trt8.4-tf-resnet50-rtx3090-fp16", "trt8.4-tf-resnet50-rtx3090-int8-qat"),
    ("MobileNetV2 QAT TITAN RTX, TensorRT 8.2 against 8.4", "trt8.2-mobilenetv2-int8-qat-titanrtx", "trt8.4-mobilenetv2-int8-qat"),
    ("MobileNetV2 QAT, Q/DQ placement", "trt8.4-mobilenetv2-int8-qat", "trt8.4-mobilenetv2-residuals-int8-qat"),
]


def tool(*args: str, home: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "TRT_INSPECT_HOME": str(home), "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "inspector", *args], capture_output=True, text=True, env=env, cwd=ROOT, check=False)


def _pick(files: list[Path], endings: tuple[str, ...], exclude: tuple[str, ...] = ()) -> list[Path]:
    return sorted(f for f in files if f.name.endswith(endings) and not f.name.endswith(exclude))


def imports(folder: Path) -> list[list[str]]:
    """The import argument lists for one set: one per engine (TensorRT 7 profiles: one per profile)."""
    files = [f for f in folder.iterdir() if f.is_file()]
    layers = _pick(files, LAYER_NAMES)
    profiles = _pick(files, PROFILE_NAMES, exclude=("metadata.json",))
    times = _pick(files, TIMES_NAMES)
    logs = _pick(files, LOG_NAMES)
    if not layers:
        return [["--profile", str(p)] for p in profiles]
    args = ["--layers", str(layers[0])]
    if profiles:
        args += ["--profile", str(profiles[0])]
    if times:
        args += ["--times", str(times[0])]
    for log in logs:
        args += ["--metadata", str(log)]
    if layers[0].name.endswith(".log"):  # the MNIST sets: the trtexec log beside the layer file
        args += [arg for log in _pick(files, ("result-04.log",)) for arg in ("--metadata", str(log))]
    return [args]


def describe(session_path: Path) -> list[str]:
    sys.path.insert(0, str(ROOT))
    from sessions.groups import load_rules, role_of
    from sessions.storage import load

    session = load(session_path)
    rules = load_rules()
    lines = []
    for variant in session.variants:
        roles: Counter[str] = Counter()
        times: Counter[str] = Counter()
        for layer in variant.layers:
            role = role_of(layer, rules)
            roles[role] += 1
            times[role] += layer.time_ms or 0.0
        total = sum(times.values())
        precisions = Counter(layer.precision or "none" for layer in variant.layers)
        lines.append(f"  variant {variant.name}: {len(variant.layers)} layers, precision {variant.precision}; "
                     f"layer precisions: {', '.join(f'{p} {n}' for p, n in precisions.most_common())}")
        for role, count in roles.most_common():
            share = f"{times[role]:.4f} ms ({times[role] / total * 100:.1f} %)" if total else "no times"
            lines.append(f"    {role:36s} {count:4d} layers  {share}")
    return lines


def report_set(folder: Path, home: Path) -> dict[str, Path]:
    print(f"## {folder.name}  ({folder})")
    made: dict[str, Path] = {}
    for index, args in enumerate(imports(folder)):
        out = home / f"{folder.name}-{index}.json"
        result = tool("import", *args, "--out", str(out), home=home)
        print(f"$ trt-inspect import {' '.join(args)}")
        print(result.stdout.rstrip().replace(str(home) + "/", ""))
        print("\n".join(f"  stderr: {line}" for line in result.stderr.splitlines()))
        if result.returncode == 0:
            print("\n".join(describe(out)))
            made.setdefault(folder.name, out)
        else:
            print(f"  exit {result.returncode}")
    print()
    return made


def main(argv: list[str]) -> int:
    folders = [Path(a) for a in argv] or DEFAULT_FOLDERS
    sets = sorted((d for folder in folders if folder.is_dir() for d in folder.iterdir() if d.is_dir()), key=lambda d: d.name)
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        sessions: dict[str, Path] = {}
        print(f"# trt-inspect on {len(sets)} sets of real TensorRT files\n")
        for folder in sets:
            sessions.update(report_set(folder, home))
        print("# diffs: a reference engine against a quantized engine of the same model\n")
        for model, ref, quantized in PAIRS:
            if ref not in sessions or quantized not in sessions:
                print(f"## {model}: {ref} against {quantized}: a set is missing here\n")
                continue
            result = tool("diff", str(sessions[ref]), str(sessions[quantized]), home=home)
            print(f"## {model}: {ref} against {quantized}")
            print(f"$ trt-inspect diff {ref} {quantized}   (exit {result.returncode})")
            print(result.stdout.rstrip().replace(str(home) + "/", ""))
            print("\n".join(f"  stderr: {line}" for line in result.stderr.splitlines()))
            print()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
