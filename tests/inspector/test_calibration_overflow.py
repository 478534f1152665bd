"""Calibration that overflows fp16 runs in fp32 instead, and says so, reproduced on the CPU.

A small convolutional model with large weights overflows fp16 in its activations (past 65504): ModelOpt's max
calibrator asserts "detected inf values in amax", as it did on the H200 for a deep branchy CNN with random weights.
Expected figures come from plain PyTorch forward hooks on the fp32 model, not from the code under test.
"""

from __future__ import annotations

import pytest
import torch

from builders.pytorch import variant_modules
from builders.pytorch.variant_modules import Calibrations, variant_module
from sessions.documents.errors import InspectError
from sessions.documents.plan import VariantPlan

pytest.importorskip("modelopt")

FP16_MAX = 65504.0


def model(weight_scale: float) -> torch.nn.Module:
    """Three 3x3 convolutions and a linear head, every parameter multiplied by `weight_scale`."""
    torch.manual_seed(0)
    module = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3), torch.nn.ReLU(), torch.nn.Conv2d(8, 8, 3), torch.nn.ReLU(),
        torch.nn.Conv2d(8, 8, 3), torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(8 * 10 * 10, 4),
    ).eval()
    with torch.no_grad():
        for parameter in module.parameters():
            parameter.mul_(weight_scale)
    return module


def images() -> torch.Tensor:
    return torch.randn(4, 3, 16, 16, generator=torch.Generator().manual_seed(1))


def layer_inputs_amax(module: torch.nn.Module, x: torch.Tensor) -> dict[str, float]:
    """The largest |input| of every convolution and linear on `x`, read by forward hooks."""
    seen: dict[str, float] = {}
    hooks = [sub.register_forward_hook(lambda m, args, out, name=name: seen.__setitem__(
        name, max(seen.get(name, 0.0), float(args[0].abs().max()))))
        for name, sub in module.named_modules() if isinstance(sub, torch.nn.Conv2d | torch.nn.Linear)]
    with torch.no_grad():
        module(x)
    for hook in hooks:
        hook.remove()
    return seen


def test_the_model_overflows_fp16_inside_and_not_fp32():
    """The premise, independent of ModelOpt: some quantizable layer reads values past fp16's range."""
    reference = model(300.0)
    fp32 = layer_inputs_amax(reference, images())
    assert max(fp32.values()) > FP16_MAX and all(v < float("inf") for v in fp32.values())
    import copy

    fp16 = layer_inputs_amax(copy.deepcopy(reference).half(), images().half())
    assert any(not v < float("inf") for v in fp16.values())  # inf (or NaN) reaches a layer's input in fp16


def test_calibration_that_overflows_fp16_runs_in_fp32_and_says_so():
    reference = model(300.0)
    built = variant_module(reference, VariantPlan("fp8", "all"), images(), torch.float16)
    assert built.dtype == torch.float32 and next(built.module.parameters()).dtype == torch.float32
    assert built.recipe.calibration_precision == "fp32" and "max calibration in fp32" in built.recipe.method
    note = next(n for n in built.notes if n.startswith("max calibration overflowed fp16"))
    assert "detected inf values in amax" in note and "runs in fp32 instead" in note
    assert "base precision fp32" in built.notes
    expected = layer_inputs_amax(reference, images())
    quantized = dict(built.module.named_modules())
    for name in built.quantized:  # the scales are the fp32 calibration's: the largest |input| of each layer
        assert float(quantized[name].input_quantizer.amax) == pytest.approx(expected[name], rel=1e-6)
    with torch.no_grad():
        out = built.module(images())
    assert torch.isfinite(out).all()


def test_a_model_within_fp16_calibrates_in_fp16_without_a_note():
    built = variant_module(model(1.0), VariantPlan("fp8", "all"), images(), torch.float16)
    assert built.dtype == torch.float16 and built.recipe.calibration_precision == "fp16"
    assert not any("overflowed" in note for note in built.notes) and "base precision fp16" in built.notes


def test_a_model_that_overflows_fp32_too_is_one_line_naming_both():
    with pytest.raises(InspectError) as raised:
        variant_module(model(1e15), VariantPlan("fp8", "all"), images(), torch.float16)
    message = raised.value.message
    assert "\n" not in message
    assert message.startswith("max calibration failed in fp16 (ModelOpt: detected inf values in amax")
    assert "and in fp32 (ModelOpt: detected inf values in amax" in message


def test_every_recipe_of_the_study_takes_the_fp32_calibration_once(monkeypatch):
    calls: list[torch.dtype] = []
    calibrate = variant_modules._calibrate
    monkeypatch.setattr(variant_modules, "_calibrate", lambda *args: (calls.append(args[-1]), calibrate(*args))[1])
    reference, calibration, cache = model(300.0), images(), Calibrations()
    first = variant_module(reference, VariantPlan("fp8", "all"), calibration, torch.float16, cache)
    second = variant_module(reference, VariantPlan("fp8", "all", ("0",)), calibration, torch.float16, cache)
    assert calls == [torch.float16, torch.float32]  # one failed fp16 calibration, one fp32, for both recipes
    assert second.dtype == torch.float32 and second.recipe.calibration_precision == "fp32"
    assert [n for n in second.notes if "overflowed" in n] == [n for n in first.notes if "overflowed" in n] != []
