"""Choices by timing, as TensorRT's builder makes them: a convolution runs the fastest library's tactic (cuDNN's
plan, a cuBLASLt GEMM, ATen's depthwise dispatch); a quantized convolution runs fp16 where its best fp16 tactic is
faster than its best FP8 one (and says so), stays FP8 with `--fp8-layers kept`; a convolution writes FP8 for its
readers only where that beats writing fp16 plus a quantize layer. On the CPU: every graph and every other library's
tactic stands in with the time the test gives it, so the expectations come from the test's own table of times, not
from the engine's rules."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field

import pytest
import torch

from builders.engine import build, plans
from builders.engine.build import BuildContext, conv_library, lower_and_choose
from builders.engine.compiler import CompileLedger, PlanCompiler
from builders.engine.conv_tactics import companions, matmul_companion, offered, scaled_companion
from builders.engine.graph import record_run, trace
from builders.engine.kernels import CAPTURED_TIMING, ConvGraph, ConvSignature
from builders.engine.lowering import Program, Step
from builders.engine.plans import Choice, TimingCache
from builders.engine.tactics import (
    CHOSEN_FP16_OUTPUT,
    CUBLASLT,
    CUDNN,
    CUDNN_MATMUL,
    CUDNN_SCALED,
    PYTORCH,
    QUANTIZE_LAYER,
    Tactic,
    fastest,
    output_reason,
    precision_reason,
)
from builders.fp8.quantizer import Quantizer
from sessions.documents.options import FP8_LAYERS_KEPT, FP8_LAYERS_TIMED
from sessions.documents.vocab import CHOSEN_FP16


class TwoConvs(torch.nn.Module):
    """stem (dense 3x3) -> relu -> grouped 3x3 (4 groups) -> relu -> dense 1x1: three convolutions in a chain."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = torch.nn.Conv2d(8, 16, 3, padding=1)
        self.grouped = torch.nn.Conv2d(16, 16, 3, padding=1, groups=4)
        self.pointwise = torch.nn.Conv2d(16, 32, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pointwise(torch.relu(self.grouped(torch.relu(self.stem(x)))))


class DepthwiseConvs(torch.nn.Module):
    """stem (dense 3x3) -> relu -> depthwise 3x3 -> relu -> dense 1x1, as TwoConvs with a depthwise middle."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = torch.nn.Conv2d(8, 16, 3, padding=1)
        self.grouped = torch.nn.Conv2d(16, 16, 3, padding=1, groups=16)
        self.pointwise = torch.nn.Conv2d(16, 32, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pointwise(torch.relu(self.grouped(torch.relu(self.stem(x)))))


@dataclass
class Times:
    """Microseconds of cuDNN's plans by (layer, precision, writes FP8); the quantize layer's time; other libraries'
    tactics by (layer, library, precision), whatever they write."""

    table: dict[tuple[str, str, bool], float]
    quantize_us: float
    libraries: dict[tuple[str, str, str], float] = field(default_factory=dict)
    scaled: dict[str, float] = field(default_factory=dict)  # the scaled fp16 graph's plan by layer (else not built)
    matmul: dict[tuple[str, str], float] = field(default_factory=dict)  # the matmul graph's plan by (layer, precision)


def context(model: torch.nn.Module, times: Times, fp8_layers: str, plan_limit: int = 1,
            cold_weights: bool = False) -> tuple[BuildContext, dict]:
    """A BuildContext whose graphs and other libraries' tactics are stand-ins timed from `times` (a tactic the
    table does not time did not run), and the conv input shapes (from hooks); `cold_weights`: the context's, and
    that of every signature it holds a graph of."""
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
    library_us: dict[tuple[ConvSignature, str], float | str] = {}
    for name, module in model.named_modules():
        if not isinstance(module, torch.nn.Conv2d):
            continue
        for precision in ("fp8", "fp16"):
            for writes_fp8 in (False, True):
                for epilogue in ((), ("relu",)):
                    sig = ConvSignature(precision, shapes[name], module.out_channels, module.kernel_size,
                                        module.stride, module.padding, module.dilation, module.groups, epilogue,
                                        writes_fp8, cold_weights=cold_weights)
                    time_us = times.table[(name, precision, writes_fp8)]
                    graphs[sig] = ConvGraph(sig, None, None, None, Choice(0, f"plan-{name}", 1, 1, time_us, False, []),
                                            None)
                    held = {CUDNN_SCALED: (times.scaled.get(name), "scaled"),
                            CUDNN_MATMUL: (times.matmul.get((name, precision)), "matmul")}
                    for library, companion in companions(sig, plan_limit).items():
                        time_us, word = held[library]
                        graphs[companion] = "not built here" if time_us is None else ConvGraph(
                            companion, None, None, None, Choice(0, f"{word}-plan-{name}", 1, 1, time_us, False, []),
                            None)
                    for library in offered(sig, plan_limit):
                        library_us[sig, library] = times.libraries.get((name, library, precision), "not timed here")
    backend = BuildContext(None, None, torch.zeros(1), plan_limit, None, PlanCompiler(0),  # type: ignore[arg-type]
                           lambda: Quantizer(lambda x, s, c: x, "stand-in quantize"), fp8_layers, graphs,
                           library_us=library_us, cold_weights=cold_weights)
    return backend, shapes


def lowered(times: Times, fp8_layers: str = FP8_LAYERS_TIMED, model: torch.nn.Module | None = None,
            plan_limit: int = 1, fp8: frozenset[str] = frozenset({"grouped", "pointwise"}), cold_weights: bool = False):
    """The stand-in context, the program lowered with its choices made, the tactics timed, the output choices, the
    traced model, the model and the conv input shapes (`fp8`: the layers the recipe quantizes)."""
    model = (model or TwoConvs()).eval()
    backend, shapes = context(model, times, fp8_layers, plan_limit, cold_weights)
    backend.quantize_us = {sig.output_shape(): times.quantize_us for sig in backend.graphs}
    keys = {"grouped": 0.5, "pointwise": 0.5}  # one input scale: the grouped conv may write FP8 for the pointwise
    example = torch.randn(1, 8, 6, 6)
    traced = trace(model, example)
    program, timed, outputs = lower_and_choose(backend, traced, model, set(fp8), keys, {}, shapes,
                                               value_shapes=record_run(traced, example).shapes)
    return backend, program, timed, outputs, traced, model, shapes


def choose(times: Times, fp8_layers: str = FP8_LAYERS_TIMED, model: torch.nn.Module | None = None,
           plan_limit: int = 1, fp8: frozenset[str] = frozenset({"grouped", "pointwise"}), cold_weights: bool = False):
    """The program's steps by name, the tactics timed by layer, the output choices, and each conv's library."""
    backend, program, timed, outputs, _, model, shapes = lowered(times, fp8_layers, model, plan_limit, fp8,
                                                                 cold_weights)
    signatures = build._conv_signatures(program, model, shapes, cold_weights)
    libraries = {name: conv_library(backend, sig) for name, sig in signatures.items()}
    return {step.name: step for step in program.steps}, timed, outputs, libraries


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
    steps, timed, _, _ = choose(Times(uniform(grouped_fp8=160.0), 1.0))
    grouped = steps["grouped"]
    assert (grouped.asked, grouped.precision) == ("fp8", "fp16")
    assert grouped.fallback.startswith(CHOSEN_FP16) and "16.0x slower" in grouped.fallback
    assert steps["pointwise"].precision == "fp8"
    recorded = {(t["precision"], t["time_us"]) for t in timed["grouped"].values()}
    assert {("fp8", 160.0), ("fp16", 10.0)} <= recorded


def test_kept_runs_every_quantized_layer_in_fp8():
    steps, timed, _, _ = choose(Times(uniform(grouped_fp8=160.0), 1.0), FP8_LAYERS_KEPT)
    assert steps["grouped"].precision == "fp8" and not steps["grouped"].fallback
    assert steps["pointwise"].precision == "fp8" and not steps["pointwise"].fallback
    for tactics in timed.values():  # only output formats timed: each layer's tactics in its one precision
        assert len({t["precision"] for t in tactics.values() if t["library"] != QUANTIZE_LAYER}) == 1


def test_kept_still_chooses_by_timing_whether_a_convolution_writes_fp8():
    """FP8 kept keeps each layer's precision, not its output format: the grouped conv (FP8, however slow) writes fp16
    and the pointwise conv reads a quantize layer where writing FP8 costs more than that layer."""
    slow_fused = Times(uniform(grouped_fp8=160.0, grouped_fp8_fp8out=400.0, pointwise_fp8=15.0), 2.0)
    steps, timed, outputs, _ = choose(slow_fused, FP8_LAYERS_KEPT)
    grouped, pointwise = steps["grouped"], steps["pointwise"]
    assert (grouped.precision, pointwise.precision) == ("fp8", "fp8") and not (grouped.fallback or pointwise.fallback)
    assert not grouped.output_fp8 and outputs["grouped"].startswith(CHOSEN_FP16_OUTPUT)
    assert pointwise.inputs[0] == "pointwise.input_quantizer"
    assert {t["time_us"] for t in timed["grouped"].values()} >= {400.0, 160.0}  # both formats timed, kept
    fast_fused = Times(uniform(grouped_fp8=160.0, grouped_fp8_fp8out=161.0, pointwise_fp8=15.0), 2.0)
    steps, _, outputs, _ = choose(fast_fused, FP8_LAYERS_KEPT)
    assert steps["grouped"].output_fp8 and "grouped" not in outputs


def test_fp8_output_only_where_it_beats_fp16_plus_a_quantize():
    # writing FP8 costs 40 us in either precision (the precision choice is a tie), 10 + 2 apart; the pointwise conv
    # saves 5 us in FP8, more than its quantize layer costs, so it keeps reading one
    slow_fused = Times(uniform(grouped_fp8_fp8out=40.0, grouped_fp16_fp8out=40.0, pointwise_fp8=5.0), 2.0)
    steps, _, outputs, _ = choose(slow_fused)
    assert not steps["grouped"].output_fp8
    assert outputs["grouped"].startswith(CHOSEN_FP16_OUTPUT)
    assert steps["pointwise"].inputs[0] == "pointwise.input_quantizer"
    # 11 us < 10 + 2; the pointwise conv saves 2 us in FP8, more than the 1 us writing FP8 adds to the grouped one
    fast_fused = Times(uniform(grouped_fp8_fp8out=11.0, grouped_fp16_fp8out=11.0, pointwise_fp8=8.0), 2.0)
    steps, _, outputs, _ = choose(fast_fused)
    assert steps["grouped"].output_fp8 and "grouped" not in outputs


@pytest.mark.parametrize("pointwise_fp8, stays_fp8", [(6.5, True), (7.5, False), (10.0, False)])
def test_an_fp8_reader_must_save_what_writing_its_input_in_fp8_costs(pointwise_fp8, stays_fp8):
    """The grouped conv writes FP8 for its FP8 reader in 13 us against 10 us writing fp16; the quantize layer costs
    5 us, so writing FP8 is the cheaper way to make the pointwise conv's FP8 input, and costs 3 us. The pointwise
    conv (10 us in fp16) stays FP8 only where it saves more than those 3 us; else it runs fp16, says why, and the
    grouped conv writes fp16."""
    times = Times(uniform(grouped_fp8_fp8out=13.0, grouped_fp16_fp8out=13.0, pointwise_fp8=pointwise_fp8), 5.0)
    steps, timed, _, _ = choose(times)
    pointwise, grouped = steps["pointwise"], steps["grouped"]
    assert (pointwise.precision == "fp8") is stays_fp8
    assert grouped.output_fp8 is stays_fp8
    if not stays_fp8:
        assert pointwise.asked == "fp8" and pointwise.fallback.startswith(CHOSEN_FP16)
        assert (f"save {10.0 - pointwise_fp8:.1f} us together, less than what writing it in FP8 adds to grouped "
                "(cuDNN 13.0 us against cuDNN 10.0 us writing fp16): 3.0 us") in pointwise.fallback
        # the writer's tactics, named in the reason, are not recorded as the reader's own
        assert {t["output"] for t in timed["pointwise"].values()} == {"fp16"}


def test_the_graphs_writing_fp16_are_built_before_an_fp8_input_is_priced(monkeypatch):
    """Where a convolution's graph writing fp16 is not built yet (a first build), the FP8-input rule has it built
    before pricing: writing FP8 then adds 3 us to the grouped conv, less than the 5 us quantize layer, and the
    pointwise conv saving 2.5 us runs fp16 for that reason, not for the quantize layer's."""
    times = Times(uniform(grouped_fp8_fp8out=13.0, grouped_fp16_fp8out=13.0, pointwise_fp8=7.5), 5.0)
    model = TwoConvs().eval()
    backend, shapes = context(model, times, FP8_LAYERS_TIMED)
    backend.quantize_us = {sig.output_shape(): times.quantize_us for sig in backend.graphs}
    compiled = {sig: backend.graphs.pop(sig) for sig in list(backend.graphs)
                if sig.precision == "fp8" and not sig.output_fp8 and sig.groups > 1}
    monkeypatch.setattr(build, "_build_new", lambda ctx, sigs, then=None: ctx.graphs.update(
        {sig: compiled[sig] for sig in sigs if sig in compiled and sig not in ctx.graphs}))
    monkeypatch.setattr(build, "_send_ahead", lambda ctx, sigs: None)  # no workers here
    example = torch.randn(1, 8, 6, 6)
    traced = trace(model, example)
    program, _, _ = lower_and_choose(backend, traced, model, {"grouped", "pointwise"},
                                     {"grouped": 0.5, "pointwise": 0.5}, {}, shapes,
                                     value_shapes=record_run(traced, example).shapes)
    pointwise = next(step for step in program.steps if step.name == "pointwise")
    assert pointwise.precision == "fp16" and "what writing it in FP8 adds to grouped" in pointwise.fallback


def test_an_fp8_input_costs_the_quantize_layer_where_that_is_less_than_the_fused_write():
    """Writing FP8 adds 30 us to the grouped conv, the quantize layer 2: the pointwise conv saving 1.5 us runs fp16
    and names the quantize layer; saving 2.5 us it stays FP8 and reads a quantize layer."""
    slow = Times(uniform(grouped_fp8_fp8out=40.0, grouped_fp16_fp8out=40.0, pointwise_fp8=8.5), 2.0)
    steps, _, _, _ = choose(slow)
    assert steps["pointwise"].precision == "fp16"
    assert "save 1.5 us together, less than the quantize layer's 2.0 us" in steps["pointwise"].fallback
    steps, _, _, _ = choose(Times(uniform(grouped_fp8_fp8out=40.0, grouped_fp16_fp8out=40.0, pointwise_fp8=7.5), 2.0))
    assert steps["pointwise"].precision == "fp8" and steps["pointwise"].inputs[0] == "pointwise.input_quantizer"
    # a tie (writing FP8 adds 2 us, the quantize layer 2 us): the quantize layer prices it, as the output choice
    # keeps writing FP8 on a tie
    tie = Times(uniform(grouped_fp8_fp8out=12.0, grouped_fp16_fp8out=12.0, pointwise_fp8=8.5), 2.0)
    steps, timed, _, _ = choose(tie)
    assert "save 1.5 us together, less than the quantize layer's 2.0 us" in steps["pointwise"].fallback
    assert any(t["library"] == QUANTIZE_LAYER for t in timed["pointwise"].values())


@pytest.mark.parametrize("fp8, fp16, runs_fp16", [(20.0, 10.0, True), (10.0, 10.0, False), (9.0, 10.0, False)])
def test_precision_reason(fp8, fp16, runs_fp16):
    reason = precision_reason(Tactic("cuDNN", "fp8", "fp16", fp8), Tactic("cuDNN", "fp16", "fp16", fp16))
    assert (reason is not None) == runs_fp16


@pytest.mark.parametrize("fused, unfused, quantize, apart", [(13.0, 10.0, 2.0, True), (12.0, 10.0, 2.0, False)])
def test_output_reason(fused, unfused, quantize, apart):
    reason = output_reason(Tactic("cuDNN", "fp8", "fp8", fused), Tactic("cuDNN", "fp8", "fp16", unfused), quantize)
    assert (reason is not None) == apart



@pytest.mark.parametrize("cold_weights", [False, True])  # the context's, in every signature it builds and times
def test_each_convolution_runs_the_fastest_librarys_tactic(cold_weights):
    # cuDNN's plans 10 us; the 1x1 GEMM 5 us in FP8, 7 in fp16; ATen's depthwise dispatch 4 us (fp16 only)
    times = Times(uniform(), 1.0, {("pointwise", CUBLASLT, "fp8"): 5.0, ("pointwise", CUBLASLT, "fp16"): 7.0,
                                   ("grouped", PYTORCH, "fp16"): 4.0})
    steps, timed, _, libraries = choose(times, model=DepthwiseConvs(), plan_limit=4, cold_weights=cold_weights)
    assert libraries == {"stem": CUDNN, "grouped": PYTORCH, "pointwise": CUBLASLT}
    assert steps["pointwise"].precision == "fp8"
    grouped = steps["grouped"]  # its best FP8 tactic (cuDNN, 10 us) loses to PyTorch's fp16 kernel (4 us)
    assert (grouped.asked, grouped.precision) == ("fp8", "fp16")
    assert grouped.fallback.startswith(CHOSEN_FP16) and "(cuDNN) 2.5x slower" in grouped.fallback
    assert "PyTorch fp16" in grouped.fallback
    recorded = {(t["library"], t["precision"], t["time_us"]) for t in timed["pointwise"].values()}
    assert {(CUDNN, "fp8", 10.0), (CUBLASLT, "fp8", 5.0), (CUDNN, "fp16", 10.0), (CUBLASLT, "fp16", 7.0)} <= recorded
    assert "stem" not in timed  # one library offers it a tactic: nothing to choose


def test_fp8_that_loses_to_the_fp16_gemm_runs_the_fp16_gemm_unless_kept():
    times = Times(uniform(), 1.0, {("pointwise", CUBLASLT, "fp8"): 8.0, ("pointwise", CUBLASLT, "fp16"): 4.0})
    steps, _, _, libraries = choose(times, plan_limit=4)
    pointwise = steps["pointwise"]
    assert (pointwise.precision, libraries["pointwise"]) == ("fp16", CUBLASLT)
    assert pointwise.fallback == f"{CHOSEN_FP16}: best FP8 tactic (cuBLASLt) 2.0x slower (8.0 us against 4.0 us, " \
                                 f"cuBLASLt fp16)"
    steps, timed, _, libraries = choose(times, FP8_LAYERS_KEPT, plan_limit=4)
    assert (steps["pointwise"].precision, libraries["pointwise"]) == ("fp8", CUBLASLT)  # 8 us against cuDNN's 10
    assert {t["precision"] for t in timed["pointwise"].values()} == {"fp8"}  # kept: the library chosen, not precision


def test_opt_level_0_times_cudnns_first_plan_only():
    times = Times(uniform(), 1.0, {("pointwise", CUBLASLT, "fp8"): 1.0, ("pointwise", CUBLASLT, "fp16"): 1.0})
    steps, timed, _, libraries = choose(times, plan_limit=1)
    assert set(libraries.values()) == {CUDNN} and steps["pointwise"].precision == "fp8"
    assert {t["library"] for tactics in timed.values() for t in tactics.values()} <= {CUDNN, QUANTIZE_LAYER}


def test_a_tactic_that_did_not_run_is_not_chosen():
    times = Times(uniform(pointwise_fp8=30.0), 1.0)  # the GEMMs are not in the table: they did not run
    steps, timed, _, libraries = choose(times, plan_limit=4)
    assert libraries["pointwise"] == CUDNN and steps["pointwise"].precision == "fp16"
    assert {t["library"] for t in timed["pointwise"].values()} == {CUDNN}


def test_the_timing_cache_keeps_each_library_so_a_second_run_times_nothing(tmp_path, monkeypatch):
    model = TwoConvs().eval()
    times = Times(uniform(), 1.0, {("pointwise", CUBLASLT, "fp16"): 6.0})
    path, header = tmp_path / "cache.json", {"gpu": "stand-in"}
    calls: list[ConvSignature] = []

    def time_library(library: str, sig: ConvSignature, _quantizer) -> float:
        calls.append(sig)
        return 6.0 if library == CUBLASLT else pytest.fail(f"{library} offered")

    monkeypatch.setattr(build, "time_library", time_library)
    for run in range(2):
        backend, _ = context(model, times, FP8_LAYERS_TIMED, plan_limit=4)
        backend.library_us.clear()  # timed through the GPU seam, or read from the cache
        backend.cache = TimingCache(path, header)
        sig = next(sig for sig in backend.graphs if sig.kernel == (1, 1) and sig.precision == "fp16"
                   and not sig.epilogue and not sig.output_fp8)
        choice = backend.graphs[sig].choice  # what build_graph records first: chosen, then read from the cache
        backend.cache.put(sig.key(), dataclasses.replace(choice, cached=run > 0), None)
        assert conv_library(backend, sig) == CUBLASLT
        backend.cache.save()
        assert len(calls) == 1, f"run {run + 1} timed the GEMM again"
    entry = TimingCache(path, header).entries[sig.key()]
    assert (entry["library"], entry["tactics"], entry["name"]) == (CUBLASLT, {CUBLASLT: 6.0}, "plan-pointwise")


def test_fastest_keeps_the_first_of_equal_times():
    tactics = [Tactic(CUDNN, "fp16", "fp16", 5.0), Tactic(CUBLASLT, "fp16", "fp16", 5.0)]
    assert fastest(tactics).library == CUDNN and fastest(tactics[::-1]).library == CUBLASLT
    with pytest.raises(ValueError):
        fastest([])


def test_a_layer_run_by_another_library_names_it():
    conv = torch.nn.Conv2d(16, 32, 1).eval()
    sig = ConvSignature("fp16", (1, 16, 6, 6), 32, (1, 1), (1, 1), (0, 0), (1, 1), 1, ("relu",), False)
    step = Step("pointwise", "conv", "relu", ("x",), "fp16", "conv", epilogue=("relu",))
    layer = build._layer(step)
    backend, _ = context(TwoConvs().eval(), Times(uniform(), 1.0), FP8_LAYERS_TIMED)
    runner = build._library_runner(backend, step, conv, sig, CUBLASLT, {}, layer)
    assert (layer.kind, layer.attrs["library"]) == ("cuBLASLt GEMM, 1x1 conv (fp16)", CUBLASLT)
    assert layer.tactic.startswith("torch.addmm (cuBLASLt")
    x = torch.randn(1, 16, 6, 6).half().contiguous(memory_format=torch.channels_last)
    with torch.no_grad():
        expected = torch.relu(conv(x.float()))
    torch.testing.assert_close(runner({"x": x}).float(), expected, atol=2e-2, rtol=2e-2)


def test_a_variant_notes_only_the_tactics_that_failed_in_its_own_build():
    """The build context is shared by a study's variants: a tactic that failed while an earlier variant was built is
    that variant's note, not every later one's."""
    from types import SimpleNamespace

    from builders.engine.build import library_notes

    earlier, own = ("sig-a", "cuBLASLt"), ("sig-b", "cuBLASLt")
    backend = SimpleNamespace(library_us={earlier: "an earlier variant's failure", own: "this variant's failure"})
    notes = library_notes(backend, {earlier})  # type: ignore[arg-type]
    assert notes == ["1 tactics of other libraries than cuDNN did not run: this variant's failure"]
    assert library_notes(backend, {earlier, own}) == []  # type: ignore[arg-type]


@pytest.mark.parametrize("quantize_us, runs_fp16", [(2.0, True), (1.0, False), (0.5, False)])
def test_fp8_readers_that_save_less_than_their_quantize_layer_run_fp16(quantize_us, runs_fp16):
    """The grouped conv writing FP8 takes 40 us, so the pointwise conv reads a quantize layer; in FP8 it saves 1 us
    (9 against 10): where the quantize layer costs more than that, FP8 does not pay and the pointwise conv runs fp16,
    the quantize layer gone; at a tie or below FP8 stays."""
    times = Times(uniform(grouped_fp8_fp8out=40.0, grouped_fp16_fp8out=40.0, pointwise_fp8=9.0), quantize_us)
    steps, timed, _, _ = choose(times)
    pointwise = steps["pointwise"]
    assert (pointwise.precision == "fp16") is runs_fp16
    assert ("pointwise.input_quantizer" in steps) is not runs_fp16
    if runs_fp16:
        assert pointwise.fallback.startswith(CHOSEN_FP16)
        assert "save 1.0 us together, less than the quantize layer's 2.0 us" in pointwise.fallback
        assert (QUANTIZE_LAYER, "fp16", "fp8") in timed["pointwise"]


def test_a_quantize_layers_time_is_kept_so_a_later_build_weighs_it_the_same(tmp_path, monkeypatch):
    """Timed once, kept in the timing cache with how it was timed: a later build (another process: another
    BuildContext, the cache read back from its file) takes the kept time and times nothing; an entry that does not
    read is a miss."""
    from builders.engine.build import _quantize_us
    from builders.engine.plans import QUANTIZE_PREFIX, TimingCache

    monkeypatch.setattr(build, "time_captured", lambda _run: pytest.fail("a kept time was timed again"))
    header = {"gpu": "stand-in", "compute_capability": "90", "versions": "test"}
    path = tmp_path / "timing.json"
    first = TimingCache(path, header)
    key = f"{QUANTIZE_PREFIX}1x64x7x7 stand-in quantize"
    first.put_quantize(key, 12.5, CAPTURED_TIMING)
    first.save()
    backend, _ = context(TwoConvs().eval(), Times(uniform(), 1.0), FP8_LAYERS_TIMED)
    backend.cache = TimingCache(path, header)
    assert _quantize_us(backend, (1, 64, 7, 7)) == 12.5
    for unreadable in (float("nan"), float("inf"), 0.0, -1.0):  # what would not read back is never written
        first.put_quantize(f"{QUANTIZE_PREFIX}bad {unreadable}", unreadable, CAPTURED_TIMING)
        assert f"{QUANTIZE_PREFIX}bad {unreadable}" not in first.entries
    for garbled in ({"time_us": -1.0}, {"time_us": 3.0, "plan": "x"}, {"time_us": float("nan")}, {"timing": 1}):
        raw = json.loads(path.read_text())
        entry = {k: v for k, v in raw["plans"][key].items() if k != "digest"} | garbled
        assert not plans.quantize_entry_reads(entry)


@pytest.mark.parametrize("held", [{"time_us": 55.4}, {"time_us": 55.4, "timing": "eager launches"}])
def test_a_quantize_layer_is_timed_as_a_captured_graph_and_a_time_held_otherwise_is_timed_again(tmp_path,
                                                                                             monkeypatch, held):
    """The quantize layer's time is its captured graph's replays (`time_captured`), as the engine runs it: an entry
    held without that tag (written before entries said how they were timed, or timed another way) reads, but is
    timed again and replaced, tagged."""
    from builders.engine.build import _quantize_us
    from builders.engine.plans import QUANTIZE_PREFIX, TimingCache

    timed: list[torch.Tensor] = []

    def captured(run) -> float:
        timed.append(run())
        return 1.25

    monkeypatch.setattr(build, "time_captured", captured)
    header = {"gpu": "stand-in", "compute_capability": "90", "versions": "test"}
    path = tmp_path / "timing.json"
    key = f"{QUANTIZE_PREFIX}1x64x7x7 stand-in quantize"
    cache = TimingCache(path, header)
    assert plans.quantize_entry_reads(held)
    cache.entries[key] = dict(held)
    backend, _ = context(TwoConvs().eval(), Times(uniform(), 1.0), FP8_LAYERS_TIMED)
    backend.cache = cache
    assert _quantize_us(backend, (1, 64, 7, 7), device="cpu") == 1.25
    assert len(timed) == 1 and timed[0].shape == (1, 64, 7, 7)  # the quantize of a tensor of that shape, captured
    assert cache.entries[key] == {"time_us": 1.25, "timing": CAPTURED_TIMING}


def test_a_grouped_conv_runs_its_scaled_graph_where_that_plan_is_fastest():
    """cuDNN's plan of the grouped conv's fp16 graph scaled by ones (4 us) beats its plain fp16 plan (10 us): in an fp16
    build the conv runs the scaled graph; where only its reader is FP8 (and saves 2 us in FP8), writing fp16 on
    the scaled graph plus a quantize layer (4 + 1 us) beats writing FP8 (10 us), and it says so; where the scaled
    plan is slower, or was not built, the plain graph's plan runs and the grouped conv writes FP8 for its reader."""
    steps, _, _, libraries = choose(Times(uniform(), 1.0, scaled={"grouped": 4.0}), plan_limit=4, fp8=frozenset())
    assert (steps["grouped"].precision, libraries["grouped"]) == ("fp16", CUDNN_SCALED)
    assert libraries["stem"] == CUDNN  # dense: no scaled graph offered
    steps, _, outputs, libraries = choose(Times(uniform(pointwise_fp8=8.0), 1.0, scaled={"grouped": 4.0}),
                                          plan_limit=4, fp8=frozenset({"pointwise"}))
    assert not steps["grouped"].output_fp8 and libraries["grouped"] == CUDNN_SCALED
    assert outputs["grouped"].startswith(CHOSEN_FP16_OUTPUT) and f"({CUDNN_SCALED}) 4.0 us" in outputs["grouped"]
    for scaled in ({"grouped": 12.0}, {}):
        steps, _, _, libraries = choose(Times(uniform(), 1.0, scaled=scaled), plan_limit=4,
                                        fp8=frozenset({"pointwise"}))
        assert steps["grouped"].output_fp8 and libraries["grouped"] == CUDNN


@pytest.mark.parametrize("change, plan_limit, offered_one", [
    ({}, 4, True),
    ({"groups": 16, "input_shape": (1, 16, 6, 6), "out_channels": 16}, 4, True),  # depthwise
    ({}, 1, False),  # --opt-level 0: one plan, no other tactic
    ({"groups": 1}, 4, False),  # dense: its precompiled plans are not the weak ones
    ({"precision": "fp8"}, 4, False),  # an FP8 graph scales already
    ({"output_fp8": True}, 4, False),  # so does a graph writing FP8
    ({"unit_scale": True}, 4, False),  # the companion has none of its own
    ({"as_matmul": True}, 4, False),  # nor has the matmul companion
])
def test_the_scaled_graph_is_offered_to_grouped_fp16_convolutions_writing_fp16(change, plan_limit, offered_one):
    sig = dataclasses.replace(ConvSignature("fp16", (1, 16, 6, 6), 32, (3, 3), (1, 1), (1, 1), (1, 1), 4, ("relu",),
                                            False), **change)
    companion = scaled_companion(sig, plan_limit)
    assert (companion is not None) is offered_one
    if companion is not None:
        assert companion == dataclasses.replace(sig, unit_scale=True)
        assert companion.key() != sig.key() and companion.descaled() and not sig.descaled()


def test_a_scaled_graph_binds_a_descale_of_ones_and_runs_from_its_own_graph():
    from builders.engine.build import library_graph
    from builders.engine.kernels import ConvLayer, tensor_names

    backend, _ = context(TwoConvs().eval(), Times(uniform(), 1.0, scaled={"grouped": 4.0}), FP8_LAYERS_TIMED,
                         plan_limit=4)
    sig = next(s for s in backend.graphs if s.groups == 4 and s.precision == "fp16" and not s.output_fp8
               and not s.unit_scale and s.epilogue == ("relu",))
    scaled = library_graph(backend, sig, CUDNN_SCALED)
    assert scaled.sig.unit_scale and scaled.choice.name == "scaled-plan-grouped"
    assert library_graph(backend, sig, CUDNN).sig == sig
    with pytest.raises(ValueError):
        library_graph(backend, sig, CUBLASLT)
    unbuilt = dataclasses.replace(sig, epilogue=("swish",))
    with pytest.raises(LookupError):
        library_graph(backend, unbuilt, CUDNN_SCALED)
    assert "descale" in tensor_names(scaled.sig) and "descale" not in tensor_names(sig)
    conv = TwoConvs().grouped
    layer = ConvLayer(scaled, conv.weight, conv.bias, None, None, None, [torch.zeros(1)])
    torch.testing.assert_close(layer.values["descale"], torch.ones(1, 16, 1, 1))
    assert "descale" not in ConvLayer(backend.graphs[sig], conv.weight, conv.bias, None, None, None,
                                      [torch.zeros(1)]).values


def bound_fp16(times: Times, monkeypatch) -> tuple[dict[str, ConvGraph], dict]:
    """The graph each convolution of an fp16 build is bound to, and the engine's layers by name."""
    backend, program, _, _, traced, model, shapes = lowered(times, plan_limit=4, fp8=frozenset())
    bound: dict[str, ConvGraph] = {}

    def conv_runner(_backend, step, _conv, graph, _scales):
        bound[step.name] = graph
        return lambda env: None

    monkeypatch.setattr(build, "_conv_runner", conv_runner)
    _, layers = build._bind(backend, program, traced, model, {}, shapes)
    return bound, {layer.name: layer for layer in layers}


def test_a_conv_bound_to_its_scaled_graph_runs_and_names_that_graphs_plan(monkeypatch):
    bound, layers = bound_fp16(Times(uniform(), 1.0, scaled={"grouped": 4.0}), monkeypatch)
    assert bound["grouped"].sig.unit_scale and not bound["stem"].sig.unit_scale
    grouped = layers["grouped"]
    assert (grouped.attrs["library"], grouped.tactic) == (CUDNN_SCALED, "scaled-plan-grouped")
    assert grouped.attrs["signature"].endswith(" scale=1")


def test_an_fp8_grouped_conv_that_loses_to_its_scaled_fp16_graph_runs_fp16_and_says_so():
    """Only the grouped conv is quantized (its reader is not, so its fp16 graph writes fp16 and has a scaled
    companion): FP8 10 us against the scaled fp16 plan's 4 us runs fp16 by timing, on the scaled graph."""
    steps, _, _, libraries = choose(Times(uniform(), 1.0, scaled={"grouped": 4.0}), plan_limit=4,
                                        fp8=frozenset({"grouped"}))
    grouped = steps["grouped"]
    assert (grouped.asked, grouped.precision, libraries["grouped"]) == ("fp8", "fp16", CUDNN_SCALED)
    assert grouped.fallback == (f"{CHOSEN_FP16}: best FP8 tactic (cuDNN) 2.5x slower (10.0 us against 4.0 us, "
                                f"{CUDNN_SCALED} fp16)")
    steps, _, _, libraries = choose(Times(uniform(), 1.0, scaled={"grouped": 11.0}), plan_limit=4,
                                    fp8=frozenset({"grouped"}))
    assert (steps["grouped"].precision, libraries["grouped"]) == ("fp8", CUDNN)


def test_make_graphs_builds_the_companions_of_the_graphs_cuDNN_built(monkeypatch):
    """The asked graphs first, then the scaled companion of each that cuDNN built (a refused graph's layer runs
    elsewhere); each sent to the workers once unless the cache holds its plan, every companion sent ahead right after
    the asked graphs (before cuDNN is known to build them); a refused companion is its reason."""
    from types import SimpleNamespace

    built: list[ConvSignature] = []
    sent: list[tuple[str, list[ConvSignature]]] = []  # ("submit" or "ahead", the signatures) in the order sent
    held: set[str] = set()

    def build_graph(sig, _cudnn, _handle, _limit, cache, answer):  # as kernels.build_graph says how it made one
        built.append(sig)
        if sig.unit_scale and sig.epilogue or sig.epilogue == ("swish",):
            raise RuntimeError("cuDNN: no engine")
        source = "cached" if cache.holds_plan(sig.key()) else "answered" if answer is not None else "built"
        return ConvGraph(sig, None, None, None, Choice(0, "p", 1, 1, 1.0, False, []), None), 0.5, source

    def submit(sigs, _limit):
        sent.append(("submit", list(sigs)))
        return SimpleNamespace(take=lambda sig: (["p"], {0: b"plan"}) if sig == dense else None)  # a worker's answer

    monkeypatch.setattr(build, "build_graph", build_graph)
    marked: dict[str, str] = {}  # what the build marks in the timing cache as not to be foreseen
    cache = SimpleNamespace(holds_plan=lambda key: key in held, put_unforeseen=marked.__setitem__)
    compiler = SimpleNamespace(submit=submit, send_ahead=lambda sigs, _limit: sent.append(("ahead", list(sigs))),
                               ledger=CompileLedger())
    backend = BuildContext(None, None, torch.zeros(1), 4, cache, compiler,  # type: ignore[arg-type]
                           lambda: Quantizer(lambda x, s, c: x, "stand-in quantize"))
    grouped = ConvSignature("fp16", (1, 16, 6, 6), 16, (3, 3), (1, 1), (1, 1), (1, 1), 4, (), False)
    dense = dataclasses.replace(grouped, groups=1)
    relu = dataclasses.replace(grouped, epilogue=("relu",))
    refused = dataclasses.replace(grouped, epilogue=("swish",))
    scaled, scaled_relu = (dataclasses.replace(sig, unit_scale=True) for sig in (grouped, relu))
    pointwise = ConvSignature("fp8", (1, 16, 6, 6), 32, (1, 1), (1, 1), (0, 0), (1, 1), 1, (), True)  # a 1x1 conv
    strided = dataclasses.replace(pointwise, stride=(2, 2))  # no GEMM: no matmul companion
    matmul = dataclasses.replace(pointwise, as_matmul=True)
    held.add(scaled.key())
    build.make_graphs(backend, [grouped, dense, relu, refused, grouped, pointwise, strided])
    # the held plan is not sent; no companion of the refused graph is asked for, though it was sent ahead
    assert sent == [("submit", [grouped, dense, relu, refused, pointwise, strided]),
                    ("ahead", [scaled_relu, dataclasses.replace(refused, unit_scale=True), matmul]),
                    ("submit", [scaled_relu, matmul])]
    assert sorted(built, key=ConvSignature.key) == sorted(
        [grouped, dense, relu, refused, pointwise, strided, scaled, scaled_relu, matmul], key=ConvSignature.key)
    assert isinstance(backend.graphs[scaled], ConvGraph) and backend.graphs[scaled_relu] == "cuDNN: no engine"
    ledger = compiler.ledger
    made = (ledger.cached, ledger.answered, ledger.built, ledger.refused, ledger.built_s)
    assert made == (1, 1, 5, 2, 2.5)  # the held plan; the worker's answer; the rest built here; two refusals
    assert marked == {refused.key(): "refused", scaled_relu.key(): "refused"}  # no plan: never foreseen again
    build.make_graphs(backend, [grouped])
    assert len(sent) == 3 and len(built) == 9
    assert (ledger.cached, ledger.answered, ledger.built, ledger.refused, ledger.built_s) == made

@pytest.mark.parametrize("change, plan_limit, offered_one", [
    ({}, 4, True),  # 1x1, stride 1, no padding, one group: a GEMM over the pixels
    ({"precision": "fp8"}, 4, True),
    ({"output_fp8": True, "epilogue": ("add", "relu")}, 4, True),
    ({"input_shape": (2, 24, 5, 7), "out_channels": 40}, 4, True),  # channels no multiple of 16: cuDNN decides
    ({}, 1, False),  # --opt-level 0: one plan, no other tactic
    ({"kernel": (3, 3), "padding": (1, 1)}, 4, False),
    ({"kernel": (1, 3)}, 4, False),
    ({"stride": (2, 2)}, 4, False),  # a strided 1x1 reads every other pixel: not the rows of its input
    ({"padding": (1, 1)}, 4, False),  # a padded 1x1 writes a border its rows do not hold
    ({"dilation": (2, 2)}, 4, False),
    ({"groups": 2}, 4, False),  # a grouped 1x1 is several GEMMs, not one
    ({"groups": 16, "out_channels": 16}, 4, False),  # depthwise
    ({"unit_scale": True}, 4, False),  # a companion has none of its own
    ({"as_matmul": True}, 4, False),
])
def test_the_matmul_graph_is_offered_to_1x1_convolutions_that_are_gemms(change, plan_limit, offered_one):
    sig = dataclasses.replace(ConvSignature("fp16", (1, 16, 6, 6), 32, (1, 1), (1, 1), (0, 0), (1, 1), 1, ("relu",),
                                            False), **change)
    companion = matmul_companion(sig, plan_limit)
    assert (companion is not None) is offered_one
    assert (CUDNN_MATMUL in companions(sig, plan_limit)) is offered_one
    if companion is not None:
        assert companion == dataclasses.replace(sig, as_matmul=True)
        assert companion.key() == sig.key() + " matmul"
        assert companion.output_shape() == sig.output_shape()


def test_a_1x1_conv_runs_its_matmul_graph_where_that_plan_is_fastest(monkeypatch):
    """cuDNN's plans 10 us; the pointwise (1x1) conv's matmul graph 4 us in fp16: an fp16 build runs it there and
    says which graph; the grouped 3x3 is offered no matmul graph; where the matmul plan is slower, or was not built,
    the conv graph runs."""
    times = Times(uniform(), 1.0, matmul={("pointwise", "fp16"): 4.0})
    _, _, _, libraries = choose(times, plan_limit=4, fp8=frozenset())
    assert libraries == {"stem": CUDNN, "grouped": CUDNN, "pointwise": CUDNN_MATMUL}
    bound, layers = bound_fp16(times, monkeypatch)
    assert bound["pointwise"].sig.as_matmul and not bound["stem"].sig.as_matmul
    pointwise = layers["pointwise"]
    assert (pointwise.kind, pointwise.attrs["library"], pointwise.tactic) == (
        "cuDNN matmul graph (fp16)", CUDNN_MATMUL, "matmul-plan-pointwise")
    assert pointwise.attrs["signature"].endswith(" matmul")
    for slower in ({("pointwise", "fp16"): 12.0}, {}):
        _, _, _, libraries = choose(Times(uniform(), 1.0, matmul=slower), plan_limit=4, fp8=frozenset())
        assert libraries["pointwise"] == CUDNN


def test_the_precision_choice_weighs_the_matmul_graphs_of_both_precisions():
    """The pointwise conv is quantized. Its FP8 matmul plan (3 us) beats every fp16 tactic (10 us): it stays FP8 on
    the matmul graph. Where the fp16 matmul plan (2 us) beats the best FP8 one (3 us), it runs fp16 by timing and the
    reason names the fp16 matmul tactic."""
    fp8_wins = Times(uniform(), 1.0, matmul={("pointwise", "fp8"): 3.0})
    steps, _, _, libraries = choose(fp8_wins, plan_limit=4, fp8=frozenset({"pointwise"}))
    assert (steps["pointwise"].precision, libraries["pointwise"]) == ("fp8", CUDNN_MATMUL)
    fp16_wins = Times(uniform(), 1.0, matmul={("pointwise", "fp8"): 3.0, ("pointwise", "fp16"): 2.0})
    steps, timed, _, libraries = choose(fp16_wins, plan_limit=4, fp8=frozenset({"pointwise"}))
    pointwise = steps["pointwise"]
    assert (pointwise.asked, pointwise.precision, libraries["pointwise"]) == ("fp8", "fp16", CUDNN_MATMUL)
    assert pointwise.fallback == (f"{CHOSEN_FP16}: best FP8 tactic ({CUDNN_MATMUL}) 1.5x slower (3.0 us against "
                                  f"2.0 us, {CUDNN_MATMUL} fp16)")
    recorded = {(t["library"], t["precision"], t["time_us"]) for t in timed["pointwise"].values()}
    assert {(CUDNN_MATMUL, "fp8", 3.0), (CUDNN_MATMUL, "fp16", 2.0)} <= recorded


def test_an_fp8_input_a_linear_also_reads_is_not_priced_by_the_convolutions_alone():
    """The grouped conv writes FP8 for two readers with one scale: the pointwise conv (saving nothing in FP8) and an
    FP8 linear the rule cannot time. Writing FP8 adds 3 us to the grouped conv; the rule prices only inputs whose
    readers are all FP8 convolutions, so this one stays, and nothing is refused for it."""
    backend, shapes = context(TwoConvs().eval(), Times(uniform(grouped_fp8_fp8out=13.0, grouped_fp16_fp8out=13.0),
                                                       5.0), FP8_LAYERS_TIMED)
    backend.quantize_us = {sig.output_shape(): 5.0 for sig in backend.graphs}
    grouped = Step("grouped", "conv", "relu_1", ("relu",), "fp8", "conv", epilogue=("relu",), output_fp8=True,
                   output_scale_of="pointwise", asked="fp8")
    pointwise = Step("pointwise", "conv", "pointwise", ("relu_1",), "fp8", "conv", asked="fp8")
    linear = Step("fc", "linear", "fc", ("relu_1",), "fp8", "linear", asked="fp8")
    program = Program([grouped, pointwise, linear], "pointwise")
    model = TwoConvs()
    sigs = {step.name: build._signature(step, model.get_submodule(step.name), shapes[step.name], False)
            for step in (grouped, pointwise)}
    fp8 = {"pointwise": sigs["pointwise"]}
    fp16 = {"pointwise": dataclasses.replace(sigs["pointwise"], precision="fp16")}
    refused: dict[str, str] = {}
    assert not build._fp8_input_pays(backend, program, sigs, fp8, fp16, refused, {})
    assert refused == {}
    program.steps.remove(linear)  # the convolution its only reader: now priced, and it saves less than 3 us
    assert build._fp8_input_pays(backend, program, sigs, fp8, fp16, refused, {})
    assert "what writing it in FP8 adds to grouped" in refused["pointwise"]


class RecordingGraph:
    """A cuDNN frontend graph that records the tensors and operations it is given (the CPU has no cuDNN)."""

    def __init__(self) -> None:
        self.tensors: dict[str, tuple[list[int], list[int]]] = {}
        self.ops: list[str] = []
        self.output: dict[str, object] = {}

    def tensor(self, name, dim, stride, data_type, uid):
        self.tensors[name] = (dim, stride)
        return name

    def __getattr__(self, op):
        def node(*_args, **_kwargs):
            self.ops.append(op)
            return RecordingOutput(self)
        return node


class RecordingOutput:
    def __init__(self, graph: RecordingGraph) -> None:
        self.graph = graph

    def __getattr__(self, setter):
        def record(value):
            self.graph.output[setter] = value
            return self
        return record


def recorded_graph(sig: ConvSignature) -> RecordingGraph:
    from types import SimpleNamespace

    from builders.engine.kernels import define_graph

    graph = RecordingGraph()
    words = SimpleNamespace(HALF="half", FLOAT="float", FP8_E4M3="fp8")
    cudnn = SimpleNamespace(data_type=words, pygraph=lambda **_: graph,
                            heur_mode=SimpleNamespace(A="A", B="B", FALLBACK="fallback"))
    define_graph(sig, cudnn, None)
    return graph


def test_the_matmul_graph_reads_the_nhwc_tensors_as_rows():
    """A 1x1 convolution of a (2, 24, 5, 7) NHWC input into 40 channels is the (70, 24) rows times the (24, 40)
    weights, K-major (each weight row of the NHWC (40, 24, 1, 1) tensor is one column): the matmul graph's tensors
    are the conv graph's memory with those dims and strides; its epilogue and output are the conv graph's."""
    sig = ConvSignature("fp8", (2, 24, 5, 7), 40, (1, 1), (1, 1), (0, 0), (1, 1), 1, ("add", "relu"), True)
    conv, matmul = recorded_graph(sig), recorded_graph(dataclasses.replace(sig, as_matmul=True))
    rows = 2 * 5 * 7
    assert matmul.tensors["x"] == ([1, rows, 24], [rows * 24, 24, 1])
    assert matmul.tensors["w"] == ([1, 24, 40], [24 * 40, 1, 24])
    assert matmul.tensors["residual"] == ([1, rows, 40], [rows * 40, 40, 1])
    assert matmul.tensors["descale"] == ([1, 1, 40], [40, 40, 1]) == matmul.tensors["bias"]
    assert matmul.tensors["qscale"] == ([1, 1, 1], [1, 1, 1]) and conv.tensors["qscale"] == ([1, 1, 1, 1], [1, 1, 1, 1])
    assert (matmul.output["set_dim"], matmul.output["set_stride"]) == ([1, rows, 40], [rows * 40, 40, 1])
    assert conv.tensors["x"] == ([2, 24, 5, 7], [24 * 35, 1, 7 * 24, 24])
    assert (conv.output["set_dim"], conv.output["set_stride"]) == ([2, 40, 5, 7], [40 * 35, 1, 7 * 40, 40])
    assert matmul.ops[0] == "matmul" and conv.ops[0] == "conv_fprop"
    assert matmul.ops[1:] == conv.ops[1:] and matmul.output["set_data_type"] == conv.output["set_data_type"] == "fp8"
    for graph in (conv, matmul):  # the same number of elements in every tensor of either form
        assert {name: _elements(dim) for name, (dim, _) in graph.tensors.items()} == {
            name: _elements(dim) for name, (dim, _) in conv.tensors.items()}


def _elements(dim: list[int]) -> int:
    total = 1
    for size in dim:
        total *= size
    return total


@pytest.mark.parametrize("fp8_layers", [FP8_LAYERS_TIMED, FP8_LAYERS_KEPT])
def test_a_round_sends_its_graphs_ahead_in_the_order_it_asks_for_them(fp8_layers):
    """The program's graphs with their companions, then (precisions timed) each FP8 one in fp16 with its
    companions, then each of the program's that writes FP8 writing fp16, with its companions: so the workers compile
    the fp16 graphs while the FP8 ones are timed, and the graphs of the round's output choice (and of a later round's
    layers whose readers turn fp16) before they are asked for. Listed here by hand."""
    pointwise = ConvSignature("fp8", (1, 16, 6, 6), 32, (1, 1), (1, 1), (0, 0), (1, 1), 1, ("relu",), True)
    grouped = ConvSignature("fp16", (1, 16, 6, 6), 16, (3, 3), (1, 1), (1, 1), (1, 1), 4, (), False)
    stem = ConvSignature("fp8", (1, 8, 6, 6), 16, (3, 3), (1, 1), (1, 1), (1, 1), 1, (), False)
    pointwise16, stem16 = (dataclasses.replace(sig, precision="fp16") for sig in (pointwise, stem))
    writes16 = dataclasses.replace(pointwise, output_fp8=False)
    expected = [pointwise, grouped, stem, dataclasses.replace(pointwise, as_matmul=True),
                dataclasses.replace(grouped, unit_scale=True)]
    if fp8_layers == FP8_LAYERS_TIMED:
        expected += [pointwise16, stem16, dataclasses.replace(pointwise16, as_matmul=True)]
    expected += [writes16, dataclasses.replace(writes16, as_matmul=True)]
    assert build.round_graphs([pointwise, grouped, stem, grouped], 4, fp8_layers, {}) == expected
    # a graph cuDNN refused before: its companions are never asked for, so none is sent (its writer's are: where
    # cuDNN refuses the FP8 output, the next round lowers the layer writing fp16)
    refused = build.round_graphs([pointwise, grouped, stem], 4, fp8_layers, {pointwise: "cuDNN: no engine"})
    assert refused == [sig for sig in expected if sig != dataclasses.replace(pointwise, as_matmul=True)]


def test_a_first_build_sends_the_fp16_graphs_of_its_fp8_layers_ahead_before_it_asks_for_them(monkeypatch, tmp_path):
    """A first build (no graph built yet): the first round's graphs go to the workers in one batch, the fp16 ones
    that the precision choice asks for included, before any graph is asked for."""
    from types import SimpleNamespace

    model = TwoConvs().eval()
    backend, shapes = context(model, Times(uniform(), 5.0), FP8_LAYERS_TIMED)
    backend.quantize_us = {sig.output_shape(): 5.0 for sig in backend.graphs}
    compiled, backend.graphs = backend.graphs, {}
    events: list[tuple[str, list[ConvSignature]]] = []
    backend.compiler = SimpleNamespace(  # type: ignore[assignment]
        send_ahead=lambda sigs, _limit: events.append(("ahead", list(sigs))),
        withdraw_ahead=lambda: (events.append(("withdrawn", [])), [])[1])

    def build_new(ctx, sigs, then=None):
        events.append(("asked", [sig for sig in sigs if sig not in ctx.graphs]))
        ctx.graphs.update({sig: compiled[sig] for sig in sigs if sig in compiled})

    monkeypatch.setattr(build, "_build_new", build_new)
    backend.cache = TimingCache(tmp_path / "cache.json", {"gpu": "stand-in"})  # empty: every plan is to compile
    example = torch.randn(1, 8, 6, 6)
    traced = trace(model, example)
    lower_and_choose(backend, traced, model, {"grouped", "pointwise"}, {"grouped": 0.5, "pointwise": 0.5}, {},
                     shapes, value_shapes=record_run(traced, example).shapes)
    first_ahead = events[0]
    assert first_ahead[0] == "ahead"
    asked_in_fp16 = [sig for what, sigs in events if what == "asked" for sig in sigs
                     if sig.precision == "fp16" and sig.groups > 1 and not sig.unit_scale]
    # the program's FP8 grouped graphs (not the ones sent for its output choice: the same writing fp16)
    writers = {dataclasses.replace(sig, output_fp8=False) for sig in first_ahead[1] if sig.output_fp8}
    grouped_fp8 = [sig for sig in first_ahead[1] if sig.precision == "fp8" and sig.groups > 1 and sig not in writers]
    assert grouped_fp8 and asked_in_fp16
    assert {dataclasses.replace(sig, precision="fp16") for sig in grouped_fp8} <= set(first_ahead[1])
    # what was sent ahead and never asked for leaves the workers once, when every graph is made
    assert [what for what, _ in events].count("withdrawn") == 1 and events[-1][0] == "withdrawn"


def test_a_build_that_fails_leaves_nothing_sent_ahead_for_the_next(monkeypatch):
    from types import SimpleNamespace

    model = TwoConvs().eval()
    backend, shapes = context(model, Times(uniform(), 5.0), FP8_LAYERS_TIMED)
    withdrawn: list[bool] = []
    backend.compiler = SimpleNamespace(  # type: ignore[assignment]
        send_ahead=lambda sigs, _limit: None, withdraw_ahead=lambda: (withdrawn.append(True), [])[1])

    def broken(*_args):
        raise RuntimeError("cuDNN: out of memory")

    monkeypatch.setattr(build, "_build_graphs", broken)
    example = torch.randn(1, 8, 6, 6)
    traced = trace(model, example)
    with pytest.raises(RuntimeError, match="out of memory"):
        lower_and_choose(backend, traced, model, {"grouped"}, {"grouped": 0.5}, {}, shapes,
                         value_shapes=record_run(traced, example).shapes)
    assert withdrawn == [True]


def test_layers_reading_one_tensor_are_foreseen_to_share_an_input_scale():
    """Before calibration: one tensor read by two layers gives them one amax, so one key; other layers differ."""
    keys = build.foreseen_scale_keys({"a", "b", "c", "d"}, {"a": 7, "b": 7, "c": 9})
    assert set(keys) == {"a", "b", "c", "d"}
    assert keys["a"] == keys["b"]
    assert len({keys["a"], keys["c"], keys["d"]}) == 3


class SharedInput(torch.nn.Module):
    """stem -> relu -> two 1x1 convolutions reading that one tensor, added: stem writes for two readers."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = torch.nn.Conv2d(8, 16, 3, padding=1)
        self.left = torch.nn.Conv2d(16, 16, 1)
        self.right = torch.nn.Conv2d(16, 16, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.stem(x))
        return self.left(y) + self.right(y)


def test_foreseen_keys_lower_two_readers_of_one_tensor_as_calibrated_keys_do():
    """The stem writes FP8 for its two FP8 readers only where they share a key: with the keys foreseen from the
    structure, as with the equal scales calibration gives them, and not where the keys differ."""
    from builders.engine.lowering import lower
    from builders.models.structure import model_structure

    model = SharedInput().eval()
    example = torch.randn(1, 8, 6, 6)
    traced = trace(model, example)
    shapes = record_run(traced, example).shapes
    fp8 = {"left", "right"}
    reads = {layer.path: layer.input_key for layer in model_structure(model, example).layers}
    foreseen = build.foreseen_scale_keys(fp8, reads)

    def stem_writes_fp8(keys) -> bool:
        program = lower(traced.nodes, fp8, keys, {}, {}, shapes)
        return next(step for step in program.steps if step.name == "stem").output_fp8

    assert stem_writes_fp8({"left": 0.25, "right": 0.25})  # calibrated: one tensor, one amax
    assert stem_writes_fp8(foreseen)
    assert not stem_writes_fp8({"left": 0.25, "right": 0.5})


def test_the_first_round_sent_before_calibration_is_what_the_build_then_asks_for(monkeypatch, tmp_path):
    """`send_first_round_ahead`, with the keys foreseen from the model's structure, sends each graph of the first
    round once (FP8 and, precisions timed, fp16), and every one of them is a graph the build, lowering with its
    calibrated keys, then asks for: nothing sent is wasted where the keys were foreseen right."""
    from types import SimpleNamespace

    from builders.models.structure import model_structure

    model = TwoConvs().eval()
    backend, shapes = context(model, Times(uniform(), 5.0), FP8_LAYERS_TIMED)
    backend.quantize_us = {sig.output_shape(): 5.0 for sig in backend.graphs}
    compiled, backend.graphs = backend.graphs, {}
    sent: list[ConvSignature] = []
    backend.compiler = SimpleNamespace(  # type: ignore[assignment]
        send_ahead=lambda sigs, _limit: sent.extend(sigs), withdraw_ahead=list)
    backend.cache = TimingCache(tmp_path / "cache.json", {"gpu": "stand-in"})  # empty: every plan is to compile
    example = torch.randn(1, 8, 6, 6)
    traced = trace(model, example)
    value_shapes = record_run(traced, example).shapes
    fp8 = {"grouped", "pointwise"}
    reads = {layer.path: layer.input_key for layer in model_structure(model, example).layers}
    build.send_first_round_ahead(backend, traced, model, fp8, build.foreseen_scale_keys(fp8, reads), value_shapes)
    sent_before = list(sent)  # what the build then sends itself is not this function's
    assert sent_before and len(sent_before) == len(set(sent_before))
    layers = {(sig.groups, sig.kernel[0], sig.precision) for sig in sent_before
              if not sig.as_matmul and not sig.unit_scale}
    assert {(4, 3, "fp8"), (4, 3, "fp16"), (1, 1, "fp8"), (1, 1, "fp16"), (1, 3, "fp16")} <= layers

    asked: list[ConvSignature] = []

    def build_new(ctx, sigs, then=None):
        asked.extend(sig for sig in sigs if sig not in ctx.graphs)
        ctx.graphs.update({sig: compiled[sig] for sig in sigs if sig in compiled})

    monkeypatch.setattr(build, "_build_new", build_new)
    lower_and_choose(backend, traced, model, fp8, {"grouped": 0.5, "pointwise": 0.25}, {}, shapes,
                     value_shapes=value_shapes)  # the calibrated keys: each layer its own scale
    assert set(sent_before) <= set(asked)
