"""A traced call against a plain forward on the CPU, at one thread: what the CPU plan's `traced_s` measures.

    python benchmarks/cpu_estimate_trace.py [MODEL ...] > benchmarks/results/cpu/estimate-share/traced.txt

Each model (timm, random weights) with its BatchNorm folded as a study folds it: the CPU seconds of one forward (the
mean of 10 after one untimed), of 7 calls traced as a study traces a variant's (`profilers.torch_trace.trace`, its
export and read-back included) after one untimed traced call, the ops that trace recorded per call, and the traced
calls over 7 forwards.
"""

from __future__ import annotations

import sys
import time

import timm
import torch

from builders.pytorch.variant_modules import folded_reference
from profilers.torch_trace import trace

DEFAULT = ["resnet18", "mobilenetv3_small_050", "regnety_002", "efficientnet_b0"]
CALLS = 7


def main(models: list[str]) -> None:
    torch.set_num_threads(1)
    print("| model | forward CPU s | 7 traced calls CPU s | ops per call | traced / forwards |")
    print("|---|---|---|---|---|")
    sample = torch.randn(1, 3, 224, 224)
    for name in models:
        with torch.no_grad():
            module = folded_reference(timm.create_model(name, pretrained=False).eval(), sample)[0]
            module(sample)
            started = time.process_time()
            for _ in range(10):
                module(sample)
            forward = (time.process_time() - started) / 10
            trace(lambda module=module: module(sample), 1, "cpu")
            started = time.process_time()
            records = trace(lambda module=module: module(sample), CALLS, "cpu")
            traced = time.process_time() - started
        print(f"| {name} | {forward:.4f} | {traced:.3f} | {len(records.kernels) / CALLS:.0f} | "
              f"{traced / (CALLS * forward):.2f} |", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:] or DEFAULT)
