"""Choices by timing, as TensorRT's builder makes them: a quantized convolution runs fp16 where its fp16 tactic is
faster (and says so), stays FP8 with `--fp8-layers kept`; a convolution writes FP8 for its readers only where that
beats writing fp16 plus a quantize layer. On the CPU: every graph stands in with the time the test gives it, so the
expectations come from the test's own table of times, not from the engine's rules."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch

from builders.engine.build import BuildContext, lower_and_choose
from builders.engine.graph import trace
from builders.engine.kernels import ConvGraph, ConvSignature
from builders.engine.plans import Choice
from builders.engine.probe_kernels import Quantizer
from builders.engine.tactics import CHOSEN_FP16, CHOSEN_FP16_OUTPUT, Tactic, output_reason, precision_reason
from sessions.documents.options import FP8_LAYERS_KEPT, FP8_LAYERS_TIMED


class TwoConvs(torch.nn.Module):
    """stem (dense 3x3) -> relu -> grouped 3x3 (4 groups) -> relu -> dense 1x1: three convolutions in a chain."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = torch.nn.Conv2d(8, 16, 3, padding=1)
        self.grouped = torch.nn.Conv2d(16, 16, 3, padding=1, groups=4)
        self.pointwise = torch.nn.Conv2d(16, 32, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pointwise(torch.relu(self.grouped(torch.relu(self.stem(x)))))


@dataclass
class Times:
    """Microseconds by (layer, precision, writes FP8); the quantize layer's time."""

    table: dict[tuple[str, str, bool], float]
    quantize_us: float


def context(model: torch.nn.Module, times: Times, fp8_layers: str) -> tuple[BuildContext, dict]:
    """A BuildContext whose graphs are stand-ins timed from `times`, and the conv input shapes (from hooks)."""
    shapes: dict[str, tuple[int, ...]] = {}
    def record(path: str):
        def hook(_module: torch.nn.Module, args: tuple) -> None:  # None: the inputs stay as they are
            shapes.setdefault(path, tuple(args[0].shape))
        return hook

    hooks = [m.register_forward_pre_hook(record(p)) for p, m in model.named_modules() if isinstance(m, torch.nn.Conv2d)]
    model(torch.randn(1, 8, 6, 6))
    for hook in hooks:
        hook.remove()
    graphs: dict[ConvSignature, ConvGraph | str] = {}
    for name, module in model.named_modules():
        if not isinstance(module, torch.nn.Conv2d):
            continue
        for precision in ("fp8", "fp16"):
            for writes_fp8 in (False, True):
                for epilogue in ((), ("relu",)):
                    sig = ConvSignature(precision, shapes[name], module.out_channels, module.kernel_size,
                                        module.stride, module.padding, module.dilation, module.groups, epilogue,
                                        writes_fp8)
                    time_us = times.table[(name, precision, writes_fp8)]
                    graphs[sig] = ConvGraph(sig, None, None, None, Choice(0, f"plan-{name}", 1, 1, time_us, False, []),
                                            None)
    backend = BuildContext(None, None, torch.zeros(1), 1, None, None,  # type: ignore[arg-type]
                           lambda: Quantizer(lambda x, s, c: x, "stand-in quantize"), fp8_layers, graphs)
    return backend, shapes


def choose(times: Times, fp8_layers: str = FP8_LAYERS_TIMED):
    model = TwoConvs().eval()
    backend, shapes = context(model, times, fp8_layers)
    backend.quantize_us = {sig.output_shape(): times.quantize_us for sig in backend.graphs}
    fp8 = {"grouped", "pointwise"}
    keys = {"grouped": 0.5, "pointwise": 0.5}  # one input scale: the grouped conv may write FP8 for the pointwise
    program, timed, outputs = lower_and_choose(backend, trace(model, torch.randn(1, 8, 6, 6)), model, fp8, keys, {},
                                               shapes)
    return {step.name: step for step in program.steps}, timed, outputs


def uniform(**slow: float) -> dict[tuple[str, str, bool], float]:
    """Every graph 10 us, except those named `<layer>_<precision>[_fp8out]`."""
    table = {(layer, p, out): 10.0 for layer in ("stem", "grouped", "pointwise") for p in ("fp8", "fp16")
             for out in (False, True)}
    for key, value in slow.items():
        parts = key.split("_")
        outs = (parts[2] == "fp8out",) if len(parts) > 2 else (False, True)
        for out in outs:
            table[(parts[0], parts[1], out)] = value
    return table


def test_a_slow_fp8_layer_runs_fp16_and_says_why():
    steps, timed, _ = choose(Times(uniform(grouped_fp8=160.0), 1.0))
    grouped = steps["grouped"]
    assert (grouped.asked, grouped.precision) == ("fp8", "fp16")
    assert grouped.fallback.startswith(CHOSEN_FP16) and "16.0x slower" in grouped.fallback
    assert steps["pointwise"].precision == "fp8"
    recorded = {(t["precision"], t["time_us"]) for t in timed["grouped"].values()}
    assert {("fp8", 160.0), ("fp16", 10.0)} <= recorded


def test_kept_runs_every_quantized_layer_in_fp8():
    steps, timed, _ = choose(Times(uniform(grouped_fp8=160.0), 1.0), FP8_LAYERS_KEPT)
    assert steps["grouped"].precision == "fp8" and not steps["grouped"].fallback
    assert timed == {}


def test_fp8_output_only_where_it_beats_fp16_plus_a_quantize():
    # writing FP8 costs 40 us in either precision (the precision choice is a tie), 10 + 2 apart
    slow_fused = Times(uniform(grouped_fp8_fp8out=40.0, grouped_fp16_fp8out=40.0), 2.0)
    steps, _, outputs = choose(slow_fused)
    assert not steps["grouped"].output_fp8
    assert outputs["grouped"].startswith(CHOSEN_FP16_OUTPUT)
    assert steps["pointwise"].inputs[0] == "pointwise.input_quantizer"
    fast_fused = Times(uniform(grouped_fp8_fp8out=11.0, grouped_fp16_fp8out=11.0), 2.0)  # 11 us < 10 + 2
    steps, _, outputs = choose(fast_fused)
    assert steps["grouped"].output_fp8 and "grouped" not in outputs


@pytest.mark.parametrize("fp8, fp16, runs_fp16", [(20.0, 10.0, True), (10.0, 10.0, False), (9.0, 10.0, False)])
def test_precision_reason(fp8, fp16, runs_fp16):
    reason = precision_reason(Tactic("cuDNN", "fp8", "fp16", fp8), Tactic("cuDNN", "fp16", "fp16", fp16))
    assert (reason is not None) == runs_fp16


@pytest.mark.parametrize("fused, unfused, quantize, apart", [(13.0, 10.0, 2.0, True), (12.0, 10.0, 2.0, False)])
def test_output_reason(fused, unfused, quantize, apart):
    reason = output_reason(Tactic("cuDNN", "fp8", "fp8", fused), Tactic("cuDNN", "fp8", "fp16", unfused), quantize)
    assert (reason is not None) == apart

