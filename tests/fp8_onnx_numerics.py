"""FP8 ONNX files against PyTorch's simulated FP8 of the same module, on the study images, in onnxruntime (CPU).

    python -m tests.fp8_onnx_numerics [MODEL ...] [--recipe RECIPE] [--noise-floor] [--layers] [--ort-optimized]

For each model: seeded random weights, the study's images and calibration (16 images), the FP8 recipe
(default `all`: per-channel weights, BatchNorm folded) on an fp16 model as `trt-inspect onnx` writes it
(a ViT's attention unfused: the ops the graph has); then onnxruntime on the file against the module's
fake quantization, and the module against the fp32 model. `--noise-floor` also runs the module on the
images moved by one fp16 step in a tenth of their pixels: how far PyTorch's FP8 moves from itself on
a change no implementation detail can be held to (FP8 rounding flips that cascade through the
quantizers); an image where onnxruntime and PyTorch pick different classes counts as a near-tie when
PyTorch's own top-1 margin is below that floor. `--layers` compares every module's output with its ONNX
node, image by image; `--ort-optimized` runs onnxruntime with its graph optimizations on (they rewrite
the Q/DQ graph).
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

MODELS = ("seresnext26d_32x4d", "vit_tiny_patch16_224", "senet154")


@dataclass
class Row:
    model: str
    recipe: str
    quantized: str  # what was quantized
    images: int
    top1_agreement: float  # onnxruntime against PyTorch FP8
    ort_vs_fp8: float  # max abs logit error
    fp8_vs_fp32: float
    nonfinite: int  # NaN / Inf logits from onnxruntime
    seconds: float
    noise_floor: float | None = None  # max abs logit change of PyTorch FP8 on images moved by one fp16 step
    misses_beyond_floor: int | None = None  # top-1 disagreements on images whose PyTorch FP8 margin exceeds the floor

    @property
    def passed(self) -> bool:
        return self.nonfinite == 0 and self.top1_agreement == 1.0 and self.ort_vs_fp8 <= 2 * self.fp8_vs_fp32

    @property
    def misses_are_near_ties(self) -> bool:
        return self.nonfinite == 0 and self.misses_beyond_floor == 0 and self.ort_vs_fp8 <= 2 * self.fp8_vs_fp32


def fp8_module(model, calibration: torch.Tensor, recipe: str) -> tuple[torch.nn.Module, torch.nn.Module, str]:
    """The fp32 reference and the FP8 fp16 module, as `trt-inspect onnx` builds them."""
    from builders.pytorch.variant_modules import variant_module
    from sessions.documents.plan import VariantPlan

    reference = model.module.float().eval()
    for attention in reference.modules():  # the graph has no fused attention: run the same explicit ops here
        if hasattr(attention, "fused_attn"):
            attention.fused_attn = False
    built = variant_module(reference, VariantPlan("fp8", recipe), calibration, torch.float16)
    kinds = {type(built.module.get_submodule(p)).__name__ for p in built.quantized}
    return reference, built.module, f"{len(built.quantized)} {'linears' if kinds <= {'QuantLinear'} else 'layers'}"


def ort_session(model_proto, optimized: bool):
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 3
    if not optimized:  # the graph's own semantics, op by op
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(model_proto.SerializeToString(), options, providers=["CPUExecutionProvider"])


def module_path(node_name: str) -> str:
    """`/layer1/layer1.0/se/fc1/Conv` -> `layer1.0.se.fc1` (the TorchScript exporter's scope names)."""
    parts = node_name.strip("/").split("/")[:-1]
    return ".".join(a for a, b in zip(parts, parts[1:] + [""], strict=False) if not b.startswith(a + "."))


def check(name: str, folder: Path, layers: bool = False, optimized: bool = False, recipe: str = "all",
          noise_floor: bool = False) -> Row:
    import onnx

    from builders.study_inputs import load_study_inputs
    from builders.tensorrt.onnx_export import export
    from sessions.documents.plan import StudyPlan, TimingPlan, VariantPlan

    start = time.perf_counter()
    plan = StudyPlan(model=name, backend="torch", device="cpu", variants=(VariantPlan("fp8", recipe),), batch=1,
                     timing=TimingPlan(0, 1, 1), tracer="none", calib_count=16, seed=0)
    inputs = load_study_inputs(plan)
    pixels = torch.cat(inputs.quality_batches)
    reference, module, quantized = fp8_module(inputs.model, inputs.calibration, recipe)
    path = export(module, inputs.static_input.half(), folder / f"{name}-{recipe}.onnx")
    graph = onnx.load(str(path))
    watched = _expose_layers(graph, _leaf_modules(module)) if layers else {}
    session = ort_session(graph, optimized)
    names = [o.name for o in session.get_outputs()]
    captured: dict[str, np.ndarray] = {}
    hooks = ([sub.register_forward_hook(_capture(captured, p)) for p, sub in module.named_modules() if p]
             if layers else [])
    worst: dict[str, tuple[float, float, float, int]] = {}
    ort_logits, fp8_logits = [], []
    with torch.no_grad():
        for image in pixels.split(1):
            captured.clear()
            fp8_logits.append(module(image.half()).float().numpy())
            outputs = dict(zip(names, session.run(None, {"input": image.half().numpy()}), strict=False))
            ort_logits.append(outputs["logits"].astype(np.float32))
            for layer, output in watched.items():
                _track(worst, layer, captured.get(layer), outputs[output])
        fp32_logits = reference(pixels).numpy()
    for hook in hooks:
        hook.remove()
    ort_out, fp8_out = np.concatenate(ort_logits), np.concatenate(fp8_logits)
    if layers:
        _print_layers(worst)
    if not np.isfinite(ort_out).all():
        from profilers.quality import compare

        quality = compare(torch.from_numpy(fp32_logits), torch.from_numpy(ort_out), "fp32", "", len(ort_out))
        print(f"{name}: {quality.nonfinite} of {ort_out.size} onnxruntime logits are NaN/Inf; "
              f"profilers.quality.compare, "
              f"which zeroes them, reports max abs logit error {quality.max_abs_logit_error:.4g} against fp32 "
              f"(max |fp32 logit| = {np.abs(fp32_logits).max():.4g})")
    floor, misses = _noise_floor(module, pixels, fp8_out, ort_out) if noise_floor else (None, None)
    return Row(
        model=name,
        recipe=recipe,
        quantized=quantized,
        images=len(pixels),
        top1_agreement=float((np.nan_to_num(ort_out).argmax(1) == fp8_out.argmax(1)).mean()),
        ort_vs_fp8=float(np.abs(ort_out - fp8_out).max()),
        fp8_vs_fp32=float(np.abs(fp8_out - fp32_logits).max()),
        nonfinite=int((~np.isfinite(ort_out)).sum()),
        seconds=time.perf_counter() - start,
        noise_floor=floor,
        misses_beyond_floor=misses,
    )


def _noise_floor(module, pixels: torch.Tensor, fp8_out: np.ndarray, ort_out: np.ndarray) -> tuple[float, int]:
    """(max |PyTorch FP8(x) - PyTorch FP8(x moved by one fp16 step in a tenth of its pixels)|, top-1
    disagreements of onnxruntime on images whose PyTorch FP8 top-1 margin exceeds that)."""
    generator = torch.Generator().manual_seed(1)
    images = pixels.half()
    moved = torch.where(torch.rand(images.shape, generator=generator) < 0.1,
                        torch.nextafter(images, torch.full_like(images, torch.inf)), images)
    with torch.no_grad():
        noisy = np.concatenate([module(image).float().numpy() for image in moved.split(1)])
    floor = float(np.abs(noisy - fp8_out).max())
    ranked = np.sort(fp8_out, axis=1)
    margins = ranked[:, -1] - ranked[:, -2]
    misses = int(((np.nan_to_num(ort_out).argmax(1) != fp8_out.argmax(1)) & (margins > floor)).sum())
    return floor, misses


def _leaf_modules(module: torch.nn.Module) -> set[str]:
    """Modules with no children but quantizers (a quantized convolution counts as one layer)."""
    from modelopt.torch.quantization.nn import TensorQuantizer

    return {p for p, m in module.named_modules() if p and all(isinstance(c, TensorQuantizer) for c in m.children())}


def _expose_layers(model, leaves: set[str]) -> dict[str, str]:
    """Each leaf module's ONNX output (the last node in its scope), added to the graph's outputs."""
    import onnx

    outputs = {}
    for node in model.graph.node:
        if module_path(node.name) in leaves:
            outputs[module_path(node.name)] = node.output[0]
    existing = {o.name for o in model.graph.output}
    for name in set(outputs.values()) - existing:
        model.graph.output.append(onnx.helper.make_value_info(name, onnx.TypeProto()))
    return outputs


def _capture(captured: dict, path: str):
    def hook(_module, _inputs, output):
        if torch.is_tensor(output):
            captured[path] = output.detach().float().numpy()
    return hook


def _track(worst: dict, path: str, expected, got) -> None:
    """Per module over all images: max and mean |ORT - PyTorch|, max |PyTorch|, NaN count."""
    if expected is None or got.shape != expected.shape:
        return
    diff = np.abs(got.astype(np.float32) - expected)
    finite = diff[np.isfinite(diff)]
    before = worst.get(path, (0.0, 0.0, 0.0, 0))
    worst[path] = (
        max(before[0], float(finite.max()) if finite.size else 0.0),
        max(before[1], float(finite.mean()) if finite.size else 0.0),
        max(before[2], float(np.abs(expected).max())),
        before[3] + int(np.isnan(got).sum()),
    )


def _print_layers(worst: dict) -> None:
    print(f"{'module':<44} {'max |ORT-PT|':>13} {'mean |ORT-PT|':>14} {'max |PT|':>10} {'NaN':>9}")
    for path, (largest, mean, scale, nan) in worst.items():
        print(f"{path:<44} {largest:>13.6g} {mean:>14.3g} {scale:>10.4g} {nan:>9}")


def print_table(rows: list[Row]) -> None:
    print(f"{'model':<22} {'recipe':<16} {'quantized':<12} {'images':>6} {'top-1 ORT=PT':>12} {'max|ORT-PT FP8|':>16} "
          f"{'max|PT FP8-fp32|':>17} {'NaN/Inf':>7} {'pass':>5} {'PT noise floor':>14} {'misses past it':>14} {'s':>6}")
    for r in rows:
        print(f"{r.model:<22} {r.recipe:<16} {r.quantized:<12} {r.images:>6} {r.top1_agreement:>12.1%} "
              f"{r.ort_vs_fp8:>16.6f} "
              f"{r.fp8_vs_fp32:>17.6f} {r.nonfinite:>7} {'yes' if r.passed else 'NO':>5} "
              f"{'-' if r.noise_floor is None else f'{r.noise_floor:.6f}':>14} "
              f"{'-' if r.misses_beyond_floor is None else r.misses_beyond_floor:>14} {r.seconds:>6.0f}")


def main(argv: list[str] | None = None) -> int:
    import tempfile

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", default=list(MODELS))
    parser.add_argument("--recipe", default="all",
                        help="FP8 recipe (default all: per-channel weights, BatchNorm folded)")
    parser.add_argument("--noise-floor", action="store_true",
                        help="PyTorch FP8 against itself on inputs one fp16 step away")
    parser.add_argument("--layers", action="store_true", help="compare every module's output with its ONNX node")
    parser.add_argument("--ort-optimized", action="store_true", help="onnxruntime graph optimizations on")
    args = parser.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for name in args.models:
            rows.append(check(name, Path(folder), args.layers, args.ort_optimized, args.recipe, args.noise_floor))
            print_table(rows[-1:])
            sys.stdout.flush()
    print()
    print_table(rows)
    return 0 if all(r.passed for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
