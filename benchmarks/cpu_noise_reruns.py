"""The noise rule on real reruns: one CPU study run three times, `diff` of each pair, and a run with one layer slowed.

    python benchmarks/cpu_noise_reruns.py [--model resnet18] [--layer layer2.0.conv1] [--repeat 2] [--out DIR]

Writes OUT/run-1.json ... run-3.json (fp32 and simulated FP8 `all`), OUT/slowed-xN.json (the same, with LAYER's
forward run N times: N - 1 extra convolutions inside that module), OUT/diff-*.txt (each `diff`'s output and exit
code: every ordered pair of reruns, and each rerun against the slowed run) and OUT/summary-xN.txt (wall time per
run, the load average, the cost of the traced calls, and each diff's regressions). Every run is the CLI in a fresh process, from this
checkout; a session already in OUT is kept, not run again. The reruns should flag nothing; the slowed run
should flag LAYER.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SMALL = ["--device", "cpu", "--calib-count", "4", "--eval-count", "4"]  # quality and calibration kept short
# every run, the slowed one too: the same variants build the same graph (BatchNorm folded alike in fp32)
VARIANTS = ["--variants", "fp32,fp8", "--fp8-recipe", "all"]


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    """`trt-inspect ARGS` at the project's root."""
    return subprocess.run([sys.executable, "-m", "inspector", *args], check=False, cwd=ROOT, capture_output=True, text=True)


def relative(path: Path) -> str:
    """`path` as the project names it (what the outputs record), absolute only outside the project."""
    absolute = path.resolve()
    return str(absolute.relative_to(ROOT)) if absolute.is_relative_to(ROOT) else str(absolute)


def tracing_cost(path: Path) -> str:
    """What the traced calls beyond the first cost in this session: (calls - 1) x the mean traced call, per variant."""
    sys.path.insert(0, str(ROOT))
    from sessions.documents import storage

    session = storage.load(path)
    parts = [f"{v.name} {v.trace.calls} calls of {v.trace.traced_call_ms / 1e3:.1f} s"
             for v in session.variants if v.trace is not None and v.trace.traced_call_ms is not None]
    extra = sum((v.trace.calls - 1) * v.trace.traced_call_ms for v in session.variants
                if v.trace is not None and v.trace.traced_call_ms is not None) / 1e3
    return f"{path.stem}: traced {', '.join(parts)}; the calls beyond the first: {extra:.1f} s"


def flagged(a: Path, b: Path, layer: str) -> str:
    """The diff's regressions in words (what, variant, item), and where B is the slowed run, what became of `layer`."""
    done = cli("diff", str(a), str(b), "--format", "json")
    if done.returncode not in (0, 1):
        return ""
    changes = json.loads(done.stdout)["changes"]
    found = [f"{c['what']} {c['variant']} {c['item']}" for c in changes if c["regression"]]
    text = f": {'; '.join(found)}" if found else ""
    if b.stem.startswith("slowed-"):
        verdicts = [f"{c['variant']} {c['what']} {'REGRESSION' if c['regression'] else c['verdict'] or 'not judged'}"
                    for c in changes if c["item"] == layer and c["what"] in ("layer time", "layer kernels")]
        others = [c for c in changes if c["regression"] and c["what"] in ("layer time", "group time") and c["item"] != layer]
        text += f". {layer}: {', '.join(verdicts) or 'no row'}; other layer or group times flagged: {len(others)}"
    return text


def slowed_run(model: str, layer: str, repeat: int, out: str) -> int:
    """The study with `layer`'s forward run `repeat` times (its output unchanged): a lowering regression."""
    sys.path.insert(0, str(ROOT))  # this checkout's code, not an installed copy
    import timm

    create = timm.create_model

    def create_slowed(*args, **kwargs):
        built = create(*args, **kwargs)
        module = built.get_submodule(layer)
        forward = module.forward

        def repeated(x):
            for _ in range(repeat - 1):
                forward(x)
            return forward(x)

        module.forward = repeated
        return built

    timm.create_model = create_slowed
    from inspector.cli import main

    return main(["run", model, *SMALL, *VARIANTS, "--out", out])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="resnet18")
    parser.add_argument("--layer", default="layer2.0.conv1")
    parser.add_argument("--repeat", type=int, default=2, help="times the slowed layer's forward runs (default 2)")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "cpu"))
    parser.add_argument("--slowed-run", metavar="SESSION", help=argparse.SUPPRESS)  # the child process of the slowed run
    args = parser.parse_args()
    if args.slowed_run:
        return slowed_run(args.model, args.layer, args.repeat, args.slowed_run)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    lines = [f"model {args.model}, CPU; load average at start {os.getloadavg()}"]
    runs = []
    slowed = f"slowed-x{args.repeat}"
    for name in ("run-1", "run-2", "run-3", slowed):
        path = out / f"{name}.json"
        runs.append(path)
        if path.exists():
            lines.append(f"{name}: kept from an earlier run of this script")
            continue
        started = time.perf_counter()
        if name == slowed:
            done = subprocess.run([sys.executable, __file__, "--model", args.model, "--layer", args.layer,
                                   "--repeat", str(args.repeat), "--slowed-run", relative(path)], check=False, cwd=ROOT, capture_output=True, text=True)
        else:
            done = cli("run", args.model, *SMALL, *VARIANTS, "--out", relative(path))
        lines.append(f"{name}: exit {done.returncode}, {time.perf_counter() - started:.1f} s wall, "
                     f"load average after {os.getloadavg()}")
        if done.returncode != 0:
            lines.append(done.stderr.strip()[-2000:])
    lines += [tracing_cost(path) for path in runs if path.exists()]
    pairs = [*itertools.permutations(runs[:3], 2), *((rerun, runs[3]) for rerun in runs[:3])]
    for a, b in pairs:
        done = cli("diff", relative(a), relative(b))
        (out / f"diff-{a.stem}-{b.stem}.txt").write_text(f"$ trt-inspect diff {a.name} {b.name}\n{done.stdout}"
                                                        f"{done.stderr}exit {done.returncode}\n")
        last = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else done.stderr.strip()
        lines.append(f"diff {a.stem} {b.stem}: exit {done.returncode}; {last}{flagged(a, b, args.layer)}")
    (out / f"summary-{slowed.removeprefix('slowed-')}.txt").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
