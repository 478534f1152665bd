"""Does each engine variant's quality come from its own outputs? A study run in this process (the arguments of
`trt-inspect run`), with the quality step watched: for each variant the output of its `infer` (the CUDA graph's
replay) on the first quality image, and for the cuDNN engine the output of one eager forward of its own steps on the
same image; before each later variant's quality, every earlier variant's `infer` again. Prints each pair's largest
difference: zero between two variants that quantize different layers, or a replay that differs from its own eager
forward, is a fault.

    python benchmarks/engine_outputs_check.py senet154 --variants cudnn-fp16,cudnn-fp8-all,cudnn-fp8-no-se
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch

from inspector import study
from inspector.cli import main

first_outputs: dict[str, torch.Tensor] = {}
eager_outputs: dict[str, torch.Tensor] = {}
engines: dict[str, Any] = {}
quality = study.measure_quality


def watched(variant: Any, engine: Any, reference: Any, inputs: Any, *args: Any, **kwargs: Any) -> None:
    image = inputs.quality_batches[0][:1]
    for name, (earlier, _) in engines.items():  # did this build change what an earlier engine computes?
        print(f"after building {variant.name}: {name} replay against its first "
              f"{largest(earlier.infer(image).float(), first_outputs[name]):.3e}", flush=True)
    first_outputs[variant.name] = engine.infer(image).float()
    if hasattr(engine, "_forward"):
        with torch.no_grad():
            static = engine.static_input.clone()
            engine.static_input.zero_()
            engine.static_input[:1].copy_(image.to(device=engine.device, dtype=engine.dtype))
            eager_outputs[variant.name] = engine._forward(engine.static_input)[:1].float().cpu()
            engine.static_input.copy_(static)
    engines[variant.name] = (engine, image)
    quality(variant, engine, reference, inputs, *args, **kwargs)


def largest(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).abs().max())


def report() -> None:
    names = list(first_outputs)
    for name in names:
        line = f"{name:<22} replay against its eager forward: "
        line += f"{largest(first_outputs[name], eager_outputs[name]):.3e}" if name in eager_outputs else "-"
        print(line, flush=True)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            print(f"{a} against {b}: replay {largest(first_outputs[a], first_outputs[b]):.3e}"
                  + (f", eager {largest(eager_outputs[a], eager_outputs[b]):.3e}"
                     if a in eager_outputs and b in eager_outputs else ""), flush=True)


if __name__ == "__main__":
    study.measure_quality = watched
    code = main(["run", *sys.argv[1:]])
    report()
    sys.exit(code)
