"""The structure pass's CPU cost in fp32 forwards of one sample, at 64 x 64 and at the model's input size.

    python benchmarks/structure_pass_cost.py [MODEL ...]

`builders.models.structure` reads a model's structure with one recorded forward (every torch call intercepted,
module hooks on); `inspector.cpu_defaults.STRUCTURE_FORWARD` counts it, with the copy and fold after it, in forwards
of one sample. Each size read once (`model_structure` keeps one structure per input shape). One PyTorch
thread, CPU seconds (`time.process_time`), one warm forward before each figure.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import timm
import torch

from builders.models.structure import model_structure


def cost(name: str) -> str:
    model = timm.create_model(name, pretrained=False).eval()
    size = model.pretrained_cfg.get("input_size", (3, 224, 224))
    example = torch.zeros(1, *size)
    with torch.no_grad():
        model(example)
        started = time.process_time()
        model(example)
        forward = time.process_time() - started
    passes = {}
    for side in (64, size[-1]):
        started = time.process_time()
        model_structure(model, torch.zeros(1, size[0], side, side))
        passes[side] = (time.process_time() - started) / forward
    cells = "\t".join(f"pass at {side}: {value:.2f} forwards" for side, value in passes.items())
    return f"{name}\tforward {forward:.3f} s\t{cells}"


if __name__ == "__main__":
    torch.set_num_threads(1)
    for model_name in sys.argv[1:] or ["resnet18", "efficientnet_b0", "senet154"]:
        print(cost(model_name), flush=True)
