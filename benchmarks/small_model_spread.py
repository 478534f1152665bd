"""How tight are a small model's figures? Each named model's study run (the CLI, a fresh process each), then per
variant its median, per-sample CoV, p99 / median and round-median CoV, each judged against the spread targets.

    python benchmarks/small_model_spread.py [--models a,b,...] [--out DIR] [-- RUN OPTIONS ...]
    python benchmarks/small_model_spread.py --sessions SESSION.json ...   # judge sessions already run, run nothing

The default models are seven families meant to span 0.2-5 ms of fp16 forward on an H200 at batch 1 (each run's
median shows where it lands): split attention (resnest14d), ConvNeXt (convnext_atto), DenseNet (densenet121), ResNet
(resnet50), EfficientNet (efficientnet_b0), ViT (vit_tiny_patch16_224) and DPN (dpn68).
The targets apply to variants of at least `MIN_MEDIAN_MS`; a faster one
is listed and not judged. The last line counts the variants that miss a target.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this checkout's code, as the runs it starts

from sessions.documents.model import Session
from sessions.documents.storage import load

MODELS = ("resnest14d", "convnext_atto", "densenet121", "resnet50", "efficientnet_b0", "vit_tiny_patch16_224", "dpn68")
MAX_COV = 0.003  # per-sample CoV: at most 0.3 %
MAX_P99_RATIO = 1.02  # p99 at most 1.02x the median
MIN_MEDIAN_MS = 0.2  # the targets hold for variants at least this long


def misses(median_ms: float, cov: float | None, p99_ms: float | None) -> list[str]:
    """The targets a variant of these figures misses ("not judged" below `MIN_MEDIAN_MS`, "no samples" without)."""
    if median_ms < MIN_MEDIAN_MS:
        return ["not judged"]
    if cov is None or p99_ms is None:
        return ["no samples"]
    found = []
    if cov > MAX_COV:
        found.append(f"CoV {100 * cov:.2f} % > {100 * MAX_COV:.1f} %")
    if p99_ms / median_ms > MAX_P99_RATIO:
        found.append(f"p99 {p99_ms / median_ms:.3f}x > {MAX_P99_RATIO}x")
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("small-model-spread"))
    chosen = parser.add_mutually_exclusive_group()
    chosen.add_argument("--models", default=",".join(MODELS))
    chosen.add_argument("--sessions", type=Path, nargs="+", help="judge these sessions instead of running studies")
    argv = sys.argv[1:]
    split = argv.index("--") if "--" in argv else len(argv)
    args, options = parser.parse_args(argv[:split]), argv[split + 1:]  # after --: options for every run
    print("| model | variant | median ms | inferences / sample | per-sample CoV % | p99 / median | round CoV % | "
          "targets missed |")
    print("|---|---|---|---|---|---|---|---|")
    counts = [0, 0]  # variants judged, variants missing a target
    for path in args.sessions or []:
        session = load(path)
        _judge(f"{session.study.model} batch {session.study.batch}", session, counts)
    for model in [] if args.sessions else args.models.split(","):
        args.out.mkdir(parents=True, exist_ok=True)
        path = args.out / f"{model}.json"
        start = time.monotonic()
        done = subprocess.run([sys.executable, "-m", "inspector", "run", model, *options, "--out", str(path),
                               "--force"], cwd=ROOT, stdout=subprocess.DEVNULL, check=False)
        if done.returncode != 0 or not path.exists():
            print(f"| {model} | - | - | - | - | - | - | the study exited {done.returncode} |", flush=True)
            continue
        _judge(model, load(path), counts)
        print(f"# {model}: {time.monotonic() - start:.0f} s", flush=True)
    print(f"variants judged: {counts[0]}; missing a target: {counts[1]}")
    return 0


def _judge(model: str, session: Session, counts: list[int]) -> None:
    """One table row per variant of `session`, judged (`misses`); `counts` (judged, missing) updated."""
    for variant in session.variants:
        latency = variant.latency
        if latency is None:
            print(f"| {model} | {variant.name} | - | - | - | - | - | {variant.status}: {variant.error} |")
            continue
        found = misses(latency.median_ms, latency.cov, latency.p99_ms)
        counts[0] += found != ["not judged"]
        counts[1] += bool(found) and found != ["not judged"]
        cov = f"{100 * latency.cov:.2f}" if latency.cov is not None else "-"
        p99 = f"{latency.p99_ms / latency.median_ms:.3f}" if latency.p99_ms is not None else "-"
        rounds = f"{100 * latency.round_cov:.2f}" if latency.round_cov is not None else "-"
        print(f"| {model} | {variant.name} | {latency.median_ms:.4f} | {latency.inferences_per_sample} | {cov} | "
              f"{p99} | {rounds} | {'; '.join(found) or 'none'} |", flush=True)


if __name__ == "__main__":
    raise SystemExit(main())
