"""How far the CPU plan's FP8 forward ratio moves between measurements: timed in two windows one after the other
(the fp32 forward's second, then the FP8 forward's) against timed in turn (`inspector.cpu_defaults._steady_in_turn`,
what `measure_fp8` does).

    python benchmarks/fp8_ratio_noise.py [--trials 6] [--busy 0,2] [MODEL ...] > RESULTS.txt

Per model, in one process at one thread: the model built and folded as the plan builds it, its first FP8 variant
(`fp8-all`) built as `measure_fp8` builds it; then `--trials` times, the ratio of the FP8 forward's work to fp32's
both ways, each way a fresh measurement of `STEADY_S` per window. Once per count of `--busy` processes beside it
(`cpu_load.busy`). The last columns give each way's spread: (largest - least) / median over the trials.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

from cpu_load import busy

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DEFAULT = ["resnet18", "mobilenetv3_small_050", "regnety_002", "efficientnet_b0"]
THREADS = 1  # the CPU plan's threads wherever the load leaves one core busy or less free


def ratios(model: str, trials: int) -> tuple[list[float], list[float]]:
    """`trials` FP8 / fp32 forward ratios of `model` measured in two windows, and as many measured in turn."""
    import torch

    from builders.pytorch.variant_modules import bake_fp8_weights, folded_reference, prepare_fp8, variant_module
    from builders.study_inputs import build_model
    from inspector.cpu_defaults import _steady, _steady_in_turn
    from sessions.documents.plan import VariantPlan

    torch.set_num_threads(THREADS)
    built_model = build_model(model, None, 0)
    single = torch.randn(1, *built_model.input_size)
    module = folded_reference(built_model.module.float().eval(), single)[0]
    prepare_fp8()
    fp8 = variant_module(module, VariantPlan("fp8", "all"), single, torch.float32)
    bake_fp8_weights(fp8)
    windows, in_turn = [], []
    with torch.no_grad():
        for _ in range(trials):
            fp32_s = _steady(lambda: module(single)).work_s(THREADS)
            windows.append(_steady(lambda: fp8.module(single)).work_s(THREADS) / fp32_s)
            fp32_pace, fp8_pace = _steady_in_turn(lambda: module(single), lambda: fp8.module(single))
            in_turn.append(fp8_pace.work_s(THREADS) / fp32_pace.work_s(THREADS))
    return windows, in_turn


def spread(values: list[float]) -> float:
    """(largest - least) / median."""
    return (max(values) - min(values)) / statistics.median(values)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", default=DEFAULT)
    parser.add_argument("--trials", type=int, default=6)
    parser.add_argument("--busy", default="0,2", help="busy processes beside the measurements, one pass per count")
    args = parser.parse_args()
    print(f"# {os.cpu_count()} cores, {THREADS} PyTorch thread; FP8 (fp8-all, simulated) / fp32 forward, "
          f"{args.trials} trials each way")
    print("| model | busy | two windows: ratios | spread | in turn: ratios | spread |")
    print("|---|---|---|---|---|---|")
    for count in (int(value) for value in args.busy.split(",")):
        with busy(count, 10.0):
            for model in args.models:
                windows, in_turn = ratios(model, args.trials)
                print(f"| {model} | {count} | {', '.join(f'{r:.2f}' for r in windows)} | {spread(windows):.0%} | "
                      f"{', '.join(f'{r:.2f}' for r in in_turn)} | {spread(in_turn):.0%} |", flush=True)


if __name__ == "__main__":
    main()
