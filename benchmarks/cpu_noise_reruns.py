"""The noise rule on real reruns under a changing load: one CPU study run N times, each beside its own count of busy
processes, `diff` of every ordered pair, and a run with one layer slowed diffed against each rerun.

    python benchmarks/cpu_noise_reruns.py [--model resnet18] [--layer layer2.0.conv1] [--repeat 10]
        [--busy 0,2,1,0,1,2] [--slowed-busy 1] [--out benchmarks/results/cpu/reruns-load]

Writes OUT/rerun-1.json ... rerun-N.json (fp32 and simulated FP8 `all`; N: the counts in `--busy`), OUT/slowed-xR.json
(the same, with LAYER's forward run R times: R - 1 extra convolutions inside that module, beside `--slowed-busy`
processes), OUT/diff-*.txt (each `diff`'s output and exit code: every ordered pair of reruns, and each rerun against
the slowed run) and OUT/summary.txt: per run the busy processes beside it (`cpu_load.busy`, started `SETTLE_S` before
it), the load average before and after, the wall time and the threads the study chose; per diff its exit code, its
regressions, and each latency change the load explains (stated in the diff, not counted). Every run is the CLI in a
fresh process, from this checkout; a session already in OUT is kept, not run again. The reruns should flag nothing;
the slowed run should flag LAYER against each.
"""

from __future__ import annotations

import argparse
import itertools
import json
import subprocess
import sys
import time
from pathlib import Path

from cpu_load import busy, load_words

ROOT = Path(__file__).resolve().parents[1]
SMALL = ["--device", "cpu", "--calib-count", "4", "--eval-count", "4"]  # quality and calibration kept short
# every run, the slowed one too: the same variants build the same graph (BatchNorm folded alike in fp32)
VARIANTS = ["--variants", "fp32,fp8", "--fp8-recipe", "all"]
SETTLE_S = 20.0  # the busy processes run this long before a study starts, so that its plan sees them in the load


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    """`trt-inspect ARGS` at the project's root."""
    return subprocess.run([sys.executable, "-m", "inspector", *args], check=False, cwd=ROOT, capture_output=True,
                          text=True)


def relative(path: Path) -> str:
    """`path` as the project names it (what the outputs record), absolute only outside the project."""
    absolute = path.resolve()
    return str(absolute.relative_to(ROOT)) if absolute.is_relative_to(ROOT) else str(absolute)


def recorded(path: Path) -> str:
    """What the session recorded of its host: the load average when the study started, and its threads."""
    sys.path.insert(0, str(ROOT))
    from sessions.documents import storage

    env = storage.load(path).environment
    load = " / ".join(f"{value:.2f}" for value in env.load_average) if env.load_average else "none"
    return f"recorded load average {load}, {env.torch_threads} thread(s)"


def findings(a: Path, b: Path, layer: str) -> str:
    """The diff's regressions in words (what, variant, item), each latency change the load explains, and where B is
    the slowed run, what became of `layer`."""
    done = cli("diff", relative(a), relative(b), "--format", "json")
    if done.returncode not in (0, 1):
        return ""
    changes = json.loads(done.stdout)["changes"]
    found = [f"{c['what']} {c['variant']} {c['item']}" for c in changes if c["regression"]]
    text = f": {'; '.join(found)}" if found else ""
    explained = [f"{c['variant']} x{c['b'] / c['a']:.2f}" for c in changes
                 if c["what"] == "latency" and not c["regression"] and c["note"].split(";")[0].endswith("not judged")]
    if explained:
        text += f"; latency the load's (stated, not counted): {', '.join(explained)}"
    if b.stem.startswith("slowed-"):
        verdicts = [f"{c['variant']} {c['what']} {'REGRESSION' if c['regression'] else c['verdict'] or 'not judged'}"
                    for c in changes if c["item"] == layer and c["what"] in ("layer time", "layer kernels")]
        others = [c for c in changes
                  if c["regression"] and c["what"] in ("layer time", "group time") and c["item"] != layer]
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


def study(name: str, path: Path, args: argparse.Namespace, processes: int) -> list[str]:
    """Run one study beside `processes` busy ones; the summary's lines about it."""
    with busy(processes, SETTLE_S):
        before = load_words()
        started = time.perf_counter()
        if name.startswith("slowed-"):
            done = subprocess.run([sys.executable, __file__, "--model", args.model, "--layer", args.layer,
                                   "--repeat", str(args.repeat), "--slowed-run", relative(path)], check=False,
                                  cwd=ROOT, capture_output=True, text=True)
        else:
            done = cli("run", args.model, *SMALL, *VARIANTS, "--out", relative(path))
        wall = time.perf_counter() - started
        after = load_words()
    lines = [(f"{name}: {processes} busy process(es); exit {done.returncode}, {wall:.1f} s wall; load average before "
              f"{before}, after {after}")]
    if done.returncode != 0:
        lines.append(done.stderr.strip()[-2000:])
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="resnet18")
    parser.add_argument("--layer", default="layer2.0.conv1")
    parser.add_argument("--repeat", type=int, default=10, help="times the slowed layer's forward runs (default 10)")
    parser.add_argument("--busy", default="0,2,1,0,1,2", help="busy processes beside each rerun (one count a rerun)")
    parser.add_argument("--slowed-busy", type=int, default=1, help="busy processes beside the slowed run")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "cpu" / "reruns-load"))
    parser.add_argument("--slowed-run", metavar="SESSION", help=argparse.SUPPRESS)  # the slowed run's child process
    args = parser.parse_args()
    if args.slowed_run:
        return slowed_run(args.model, args.layer, args.repeat, args.slowed_run)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    counts = [int(value) for value in args.busy.split(",")]
    slowed = f"slowed-x{args.repeat}"
    plan = [(f"rerun-{i}", count) for i, count in enumerate(counts, 1)] + [(slowed, args.slowed_busy)]
    lines = [f"model {args.model}, CPU; load average at start {load_words()} (1 / 5 / 15 min)"]
    runs = []
    for name, processes in plan:
        path = out / f"{name}.json"
        runs.append(path)
        if path.exists():
            lines.append(f"{name}: kept from an earlier run of this script")
            continue
        lines += study(name, path, args, processes)
        print(lines[-1], flush=True)
    lines += [f"{path.stem}: {recorded(path)}" for path in runs if path.exists()]
    reruns = runs[:-1]
    pairs = [*itertools.permutations(reruns, 2), *((rerun, runs[-1]) for rerun in reruns)]
    for a, b in pairs:
        done = cli("diff", relative(a), relative(b))
        (out / f"diff-{a.stem}-{b.stem}.txt").write_text(f"$ trt-inspect diff {a.name} {b.name}\n{done.stdout}"
                                                        f"{done.stderr}exit {done.returncode}\n")
        last = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else done.stderr.strip()
        lines.append(f"diff {a.stem} {b.stem}: exit {done.returncode}; {last}{findings(a, b, args.layer)}")
    codes = [line.split("exit ")[1][0] for line in lines if line.startswith("diff rerun-") and "slowed" not in line]
    flagged = sum(f"{args.layer}: " in line and "layer time REGRESSION" in line for line in lines
                  if line.startswith("diff ") and slowed in line)
    lines.append(f"rerun pairs: {codes.count('0')} of {len(codes)} exit 0; {slowed}: {args.layer}'s layer time "
                 f"flagged against {flagged} of {len(reruns)} reruns")
    (out / "summary.txt").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
