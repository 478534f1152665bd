"""What each calibration image after the first adds to a max calibration on the CPU, in fp32 forwards of one
sample: the figure the CPU plan's estimate takes for them (`inspector.cpu_defaults.CALIBRATION_FORWARD`), on top of
the first FP8 variant's build on one sample, which it measures.

    python benchmarks/calibration_cost.py [MODEL ...] > RESULTS.txt

Per model, at one thread: the model built and folded as the plan builds it, its fp32 forward of one sample timed as
the plan times it (`_steady`); then its `fp8-all` variant built as the study builds it
(`builders.pytorch.variant_modules.variant_module`) on random calibration batches of each of the CPU ladder's counts
(`inspector.cpu_defaults.LADDER`, and one sample), twice each; ModelOpt's calibration forwards (the `forward_loop`
it is handed) timed in CPU seconds, the lesser of the two kept. Per count N: the seconds beyond one sample's over the
N - 1 images that added them, over the fp32 forward; beside it, one sample's calibration in fp32 forwards (the part
the measured build holds).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DEFAULT = ["resnet18", "mobilenetv3_small_050", "regnety_002", "efficientnet_b0", "resnet50", "densenet121"]
REPEATS = 2


def timed_calibration(spent: list[float]) -> Callable[[], None]:
    """Wraps ModelOpt's `calibrate` so that each call appends its forward loop's CPU seconds to `spent`; returns
    the function that puts the original back."""
    from builders.pytorch.variant_modules import _modelopt

    mtq = _modelopt()  # type: ignore[no-untyped-call]  # ModelOpt's module, untyped
    original = mtq.calibrate

    def calibrate(module: Any, algorithm: str, forward_loop: Callable[[Any], None]) -> Any:
        def loop(model: Any) -> None:
            started = time.process_time()
            forward_loop(model)
            spent.append(time.process_time() - started)

        return original(module, algorithm, forward_loop=loop)

    mtq.calibrate = calibrate

    def restore() -> None:
        mtq.calibrate = original

    return restore


def calibration_s(model: str, counts: list[int]) -> tuple[float, dict[int, float]]:
    """`model`'s fp32 forward of one sample and, by calibration count, the calibration forwards' CPU seconds (the
    least of `REPEATS`)."""
    import torch

    from builders.pytorch.variant_modules import folded_reference, variant_module
    from builders.study_inputs import build_model
    from inspector.cpu_defaults import _steady
    from sessions.documents.plan import VariantPlan

    built = build_model(model, None, 0)
    single = torch.randn(1, *built.input_size)
    module = folded_reference(built.module.float().eval(), single)[0]
    with torch.no_grad():
        forward_s = _steady(lambda: module(single)).cpu_s
    spent: list[float] = []
    restore = timed_calibration(spent)
    try:
        least: dict[int, float] = {}
        for count in counts:
            for _ in range(REPEATS):
                spent.clear()
                variant_module(module, VariantPlan("fp8", "all"), torch.randn(count, *built.input_size), torch.float32)
                least[count] = min(least.get(count, float("inf")), spent[0])
    finally:
        restore()
    return forward_s, least


def main() -> None:
    import torch

    from builders.pytorch.variant_modules import prepare_fp8
    from inspector.cpu_defaults import LADDER

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", default=DEFAULT)
    args = parser.parse_args()
    torch.set_num_threads(1)
    prepare_fp8()
    counts = [1, *sorted({step.calibration for step in LADDER})]
    print("# each calibration image after the first, in fp32 forwards of one sample (1 thread; least of "
          f"{REPEATS} builds each); first column: one sample's calibration")
    print(f"| model | fp32 forward ms | 1 sample | {' | '.join(f'{count} samples' for count in counts[1:])} |")
    print(f"|---|---|---|{'---|' * (len(counts) - 1)}")
    ladder: list[float] = []
    for model in args.models:
        forward_s, seconds = calibration_s(model, counts)
        added = {count: (seconds[count] - seconds[1]) / (count - 1) / forward_s for count in counts[1:]}
        ladder += added.values()
        print(f"| {model} | {forward_s * 1e3:.1f} | {seconds[1] / forward_s:.2f} | "
              f"{' | '.join(f'{added[count]:.2f}' for count in counts[1:])} |", flush=True)
    print(f"each image after the first, at the ladder's counts: median {statistics.median(ladder):.2f}, "
          f"{min(ladder):.2f}-{max(ladder):.2f} over {len(ladder)}")


if __name__ == "__main__":
    main()
