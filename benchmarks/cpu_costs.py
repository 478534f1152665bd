"""The step costs behind inspector/cpu_defaults.py, measured here: python -m benchmarks.cpu_costs [MODEL] (repo root).

Prints the cores and load, one fp32 forward at each thread count, a 3 x 3 convolution in bf16 against fp32, and,
at one thread, each step of an FP8 variant's build and run in fp32 forwards (the ratios the estimate uses).
"""

from __future__ import annotations

import os
import sys
import time

import torch


def best(step, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        step()
        times.append(time.perf_counter() - started)
    return min(times)


def main(model_name: str) -> None:
    from builders.models.catalog import load_model
    from builders.pytorch.variant_modules import bake_fp8_weights, folded_reference, variant_module
    from inspector.cpu_defaults import bf16_ratio
    from sessions.documents.plan import VariantPlan

    print(f"cores {len(os.sched_getaffinity(0))}, load average {' / '.join(f'{x:.1f}' for x in os.getloadavg())}")
    torch.manual_seed(0)
    started = time.perf_counter()
    model = load_model(model_name).module.eval()
    print(f"{model_name}: built in {time.perf_counter() - started:.2f} s")
    sample = torch.randn(1, 3, 224, 224)
    with torch.no_grad():
        for threads in range(1, len(os.sched_getaffinity(0)) + 1):
            torch.set_num_threads(threads)
            model(sample)
            print(f"fp32 forward, {threads} thread(s): best of 3 {best(lambda: model(sample), 3):.3f} s "
                  f"(load {os.getloadavg()[0]:.1f})")
    torch.set_num_threads(1)
    print(f"bf16 / fp32: {bf16_ratio().words()}")
    with torch.no_grad():
        fp32 = best(lambda: model(sample), 3)
        started = time.perf_counter()
        source, folded, _ = folded_reference(model, sample)
        structure = time.perf_counter() - started
        folded_fp32 = best(lambda: source(sample), 3)
    print(f"fp32 forward {fp32:.3f} s; BatchNorm folded ({folded}) {folded_fp32:.3f} s; "
          f"structure and fold {structure:.2f} s = {structure / fp32:.2f} forwards")
    started = time.perf_counter()
    from builders.pytorch.variant_modules import _modelopt

    _modelopt()
    print(f"ModelOpt import {time.perf_counter() - started:.2f} s")
    calibration = torch.randn(4, 3, 224, 224)
    started = time.perf_counter()
    built = variant_module(source, VariantPlan("fp8", "all"), calibration, torch.float32)
    build = time.perf_counter() - started
    started = time.perf_counter()
    bake_fp8_weights(built)
    bake = time.perf_counter() - started
    with torch.no_grad():
        fp8 = best(lambda: built.module(sample), 3)
        batch4 = best(lambda: source(calibration), 1)
    print(f"FP8 build {build:.2f} s (structure, quantize, calibration on 4 images, floor), bake {bake:.2f} s; "
          f"fp32 forward of 4 images {batch4:.2f} s")
    print(f"simulated FP8 forward {fp8:.3f} s = {fp8 / folded_fp32:.2f} fp32 forwards (BatchNorm folded in both)")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "senet154")
