"""The engine's fp16 lowering against each model's own outputs, on families the tests never build.

    python benchmarks/engine_lowering_zoo.py [MODEL ...] > benchmarks/results/cpu/engine-lowering-unseen.txt

Per model (timm, pretrained=False, two images at its own input size, fp32 on the CPU): the model prepared as the
engine prepares it (`fold_into_weights`: layers of derived classes made plain, BatchNorm folded), traced
and lowered (`builders.engine.lowering.lower`) in fp16 and with FP8 recipe `all` (its quantize layers standing in as
pass-throughs), then run by the engine's interpreter with PyTorch standing in for cuDNN (`tests.engine_stand_in`):
the largest difference from the model's outputs over their largest magnitude, and for FP8 the layers the recipe
quantizes that run fp16 without a reason (`unexplained_fp16`: the engine refuses to build with any). A lowering that
fuses an epilogue onto the wrong operand, aliases a value it should not, drops a step or has a layer read the wrong
quantize misses by far more than 1e-3; the engine's kernels themselves are not run (no GPU).
"""

from __future__ import annotations

import copy
import sys
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch

UNSEEN = ["ghostnet_100", "rexnet_100", "hrnet_w18_small", "res2net50_14w_8s", "selecsls42b", "levit_128s",
          "mobilevit_xxs", "poolformer_s12", "edgenext_xx_small", "fastvit_t8", "ese_vovnet19b_dw", "coat_lite_tiny",
          "xcit_nano_12_p16_224", "efficientformer_l1", "nf_resnet26", "resnetv2_50x1_bit", "repvgg_a0", "hgnetv2_b0",
          "mobilenetv4_conv_small", "twins_svt_small", "mambaout_femto", "starnet_s1", "inception_next_atto",
          "gcresnext26ts", "cspresnet50", "eca_resnet33ts"]
AGREEMENT = 1e-3  # of the outputs' largest magnitude: fp32 arithmetic in another order stays far below it


def lowering_row(name: str) -> str:
    """One line: per lowering (fp16, FP8 `all`) the relative difference and the verdict, and what it made of `name`."""
    import timm

    from builders.engine.build import static_refusals, unexplained_fp16
    from builders.engine.graph import record_run, trace
    from builders.engine.lowering import lower
    from builders.models.structure import model_structure
    from builders.pytorch.variant_modules import fold_into_weights
    from builders.recipes.fp8 import select
    from tests.engine_stand_in import stand_in_engine

    torch.manual_seed(0)
    model = timm.create_model(name, pretrained=False).eval()
    size = tuple(model.pretrained_cfg.get("input_size", (3, 224, 224)))
    shape = (2, *size)
    structure = model_structure(model, torch.zeros(1, *size))
    fp8 = set(select(structure, "all", []).quantized)
    keys = {node.path: node.input_key for node in structure.layers}  # one input tensor, one amax: one scale
    prepared = copy.deepcopy(model)
    made_plain, folded = fold_into_weights(prepared, structure.conv_bn)
    traced = trace(prepared, torch.zeros(shape))
    shapes = record_run(traced, torch.zeros(shape)).shapes
    x = torch.randn(shape)
    with torch.no_grad():
        expected = model(x)
    cells = []
    for label, quantized in (("fp16", set()), ("FP8 all", fp8)):
        program = lower(traced.nodes, quantized, keys, static_refusals(prepared, quantized), None, shapes)
        with torch.no_grad():
            got = stand_in_engine(program, traced, x).infer(x)
        error = float((got - expected).abs().max() / expected.abs().max())
        silent = unexplained_fp16(program, quantized)
        fp8_layers = len({step.name for step in program.steps if step.name in quantized and step.precision == "fp8"})
        cells.append(f"{label} {error:.2e} {'agrees' if error < AGREEMENT and not silent else 'DIFFERS'}"
                     + (f" ({fp8_layers} of {len(quantized)} quantized layers FP8, {len(silent)} fp16 without a "
                        "reason)" if quantized else ""))
    convs = [step for step in program.steps if step.kind == "conv"]
    return (f"{name}: {'; '.join(cells)}; {len(convs)} convolutions ({len(made_plain)} layers made plain), {folded} "
            f"BatchNorm folded, {len(traced.leaves)} modules not traced into")


def main(names: list[str]) -> None:
    warnings.filterwarnings("ignore")
    torch.set_num_threads(1)
    for name in names:
        try:
            print(lowering_row(name), flush=True)
        except Exception as exc:  # noqa: BLE001  (a model that fails is a row, not the end of the run)
            print(f"{name}: FAILED {type(exc).__name__}: {str(exc).splitlines()[0][:200]}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:] or UNSEEN)
