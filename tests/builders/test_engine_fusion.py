"""Fused tactics on the CPU: the regions one generated kernel may run (a squeeze-excitation block found from ops and
data flow, whatever its modules are called; pointwise chains), what the fused function computes against the
engine's own steps (Inductor on the CPU, fp32 and fp16), the choice by timing (stand-in times), the timing cache's
entry and the bound on compiles. The engine's steps run through the CPU stand-in of its kernels
(tests/engine_stand_in.py); the expectations come from the test models' own structure and eager outputs."""

from __future__ import annotations

import copy
import dataclasses
import itertools
import json
import time
from collections.abc import Callable
from typing import Any

import pytest
import torch

from builders.cache_files import document_digest
from builders.engine.build import _frees, _layer
from builders.engine.fused_tactics import (
    CHOSEN_UNFUSED,
    ENGINE_STEPS,
    INDUCTOR,
    OUTDONE,
    FusedTactics,
    fuse_regions,
    fusion_reason,
)
from builders.engine.fusion_regions import POINTWISE, SQUEEZE_EXCITATION, SUBGRAPH, find_regions, widened
from builders.engine.graph import TracedModel, trace
from builders.engine.lowering import lower
from builders.engine.plans import TimingCache
from builders.engine.region_artifacts import compile_region
from builders.engine.region_graph import as_recorded, subgraph
from builders.engine.runtime import CudnnEngine
from builders.engine.shaped_tracer import TensorSpec
from builders.engine.tactics import Tactic
from sessions.analyses.captions import precision_of
from sessions.analyses.groups import builtin_rules
from sessions.analyses.precision_choice import asked_fp8, precision_by_role
from sessions.documents.covers import COVERED_LAYER, cover, covered_layers
from sessions.documents.model import Layer, Recipe, Variant
from sessions.documents.storage import decode, encode, load
from sessions.documents.vocab import CHOSEN_FP16, COVERS, FP16_BY_TIMING
from sessions.reports.layer_detail import layer_detail_table
from sessions.reports.study_export import Job, Row, fp16_layers_section
from tests.engine_stand_in import stand_in_engine

INPUT = (2, 16, 8, 8)


class Recalibrate(torch.nn.Module):
    """A squeeze-excitation block under other names: mean over H, W -> 1x1 conv -> SiLU -> 1x1 conv -> hard sigmoid."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.shrink = torch.nn.Conv2d(channels, channels // 4, 1)
        self.act = torch.nn.SiLU()
        self.grow = torch.nn.Conv2d(channels // 4, channels, 1)
        self.squash: torch.nn.Module = torch.nn.Hardsigmoid()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.squash(self.grow(self.act(self.shrink(x.mean((2, 3), keepdim=True)))))


class LinearGate(torch.nn.Module):
    """Squeeze-excitation with linears: adaptive pool -> flatten -> linear -> ReLU -> linear -> sigmoid -> view."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.pool = torch.nn.AdaptiveAvgPool2d(1)
        self.first = torch.nn.Linear(channels, channels // 4)
        self.second = torch.nn.Linear(channels // 4, channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        weights = torch.sigmoid(self.second(torch.relu(self.first(self.pool(x).flatten(1)))))
        return weights.view(x.shape[0], x.shape[1], 1, 1) * x


class NoSigmoid(Recalibrate):
    """As Recalibrate, with a ReLU where the gate should be: no squeeze-excitation."""

    def __init__(self, channels: int) -> None:
        super().__init__(channels)
        self.squash = torch.nn.ReLU()


class OtherTensor(Recalibrate):
    """The gate of x multiplies another tensor: no squeeze-excitation."""

    def __init__(self, channels: int) -> None:
        super().__init__(channels)
        self.side = torch.nn.Conv2d(channels, channels, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.side(x) * self.squash(self.grow(self.act(self.shrink(x.mean((2, 3), keepdim=True)))))


class Block(torch.nn.Module):
    """conv -> relu, then per block: conv -> `gate` (any module) -> + the block's input -> relu; then a 1x1 conv."""

    def __init__(self, gate: Callable[[int], torch.nn.Module], blocks: int = 1) -> None:
        super().__init__()
        self.stem = torch.nn.Conv2d(16, 16, 3, padding=1)
        self.bodies = torch.nn.ModuleList(torch.nn.Conv2d(16, 16, 3, padding=1) for _ in range(blocks))
        self.gates = torch.nn.ModuleList(gate(16) for _ in range(blocks))
        self.head = torch.nn.Conv2d(16, 16, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.stem(x))
        for body, gate in zip(self.bodies, self.gates, strict=True):
            x = torch.relu(gate(body(x)) + x)
        return self.head(x)


class Chain(torch.nn.Module):
    """Pointwise ops cuDNN does not fuse between two convolutions: tanh, the add of the stem's output, relu, a halving;
    then a lone tanh after a third convolution (one op: no chain)."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = torch.nn.Conv2d(16, 16, 3, padding=1)
        self.body = torch.nn.Conv2d(16, 16, 3, padding=1)
        self.head = torch.nn.Conv2d(16, 16, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stem(x)
        x = torch.relu(torch.tanh(self.body(x)) + x) * 0.5
        return torch.tanh(self.head(x))


class Mixed(torch.nn.Module):
    """A squeeze-excitation block, then a pointwise chain: two region signatures."""

    def __init__(self) -> None:
        super().__init__()
        self.first, self.then = Block(Recalibrate), Chain()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.then(self.first(x))


class TwoReaders(torch.nn.Module):
    """tanh then a scale and shift, read by two convolutions: the tanh's value and the shift's both leave the region."""

    def __init__(self) -> None:
        super().__init__()
        self.stem, self.left, self.right = (torch.nn.Conv2d(16, 16, 3, padding=1) for _ in range(3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.tanh(self.stem(x))
        z = y * 0.5 + 1.0
        return self.left(z) + self.right(y)


class ReadBetween(torch.nn.Module):
    """tanh, a convolution of it, the product of the two, its sigmoid: the convolution stands between the tanh and the
    product and reads the tanh, so they cannot run as one step where the product stood."""

    def __init__(self) -> None:
        super().__init__()
        self.stem, self.side = torch.nn.Conv2d(16, 16, 3, padding=1), torch.nn.Conv2d(16, 16, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = torch.tanh(self.stem(x))
        return torch.sigmoid(a * self.side(a))


class Mlp(torch.nn.Module):
    """A transformer's MLP on a convolution's tokens (LayerNorm, linear, GELU, linear, residual add), back to an
    image, a 1x1 convolution and a bilinear upsampling (one op)."""

    def __init__(self) -> None:
        super().__init__()
        self.patch, self.head = torch.nn.Conv2d(16, 16, 3, padding=1), torch.nn.Conv2d(16, 16, 1)
        self.norm, self.fc1, self.act, self.fc2 = (torch.nn.LayerNorm(16), torch.nn.Linear(16, 32), torch.nn.GELU(),
                                                   torch.nn.Linear(32, 16))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.patch(x)
        n, c, h, w = x.shape
        t = x.flatten(2).transpose(1, 2)
        t = t + self.fc2(self.act(self.fc1(self.norm(t))))
        x = self.head(t.transpose(1, 2).reshape(n, c, h, w))
        return torch.nn.functional.interpolate(x, scale_factor=2.0, mode="bilinear")


def regions_of(model: torch.nn.Module, fp8: set[str] | None = None):
    traced = trace(model.eval(), torch.zeros(INPUT))
    program = lower(traced.nodes, fp8 or set(), {}, {})
    return find_regions(traced.nodes, program.steps), program, traced


def conv_paths(region, traced: TracedModel, kinds: tuple[str, ...] = ("conv", "linear")) -> set[str]:
    return {node.path for node in traced.nodes if node.name in region.nodes and node.kind in kinds}


@pytest.mark.parametrize("gate", [Recalibrate, LinearGate])
def test_a_squeeze_excitation_block_is_found_whatever_its_modules_are_called(gate):
    regions, program, traced = regions_of(Block(gate))
    assert [r.kind for r in regions] == [SQUEEZE_EXCITATION]
    expected = {path for path, m in Block(gate).named_modules() if isinstance(m, (torch.nn.Conv2d, torch.nn.Linear))
                and path.startswith("gates.0.")}
    assert conv_paths(regions[0], traced) == expected
    # the residual add and relu after the multiply are in the region (and, for LinearGate, the shape reads of x); the
    # block's input and the skip come from outside; the head convolution reads its one output
    body, stem = (next(n.name for n in traced.nodes if n.path == path) for path in ("bodies.0", "stem"))
    skip = next(n.name for n in traced.nodes if n.args[:1] == (stem,))  # the stem's relu
    assert set(regions[0].inputs) == {body, skip}
    head = next(n for n in traced.nodes if n.path == "head")
    assert regions[0].outputs == head.args[:1]
    assert [program.steps[i].name for i in regions[0].steps] == [s.name for s in program.steps
                                                                  if s.name not in ("stem", "bodies.0", "head")]


@pytest.mark.parametrize("gate", [NoSigmoid, OtherTensor])
def test_a_near_squeeze_excitation_is_not_one(gate):
    regions, _, _ = regions_of(Block(gate))
    assert SQUEEZE_EXCITATION not in [r.kind for r in regions]


def test_two_or_more_pointwise_ops_back_to_back_are_a_region_and_one_alone_is_not():
    regions, _, traced = regions_of(Chain())
    assert [r.kind for r in regions] == [POINTWISE]
    ops = {node.name: node for node in traced.nodes}
    assert sorted(ops[name].fn for name in regions[0].nodes) == ["add", "mul", "relu", "tanh"]
    assert set(regions[0].inputs) == {ops[n].name for n in ops if ops[n].path in ("stem", "body")}
    assert len(regions[0].steps) == 4


def test_every_value_that_leaves_a_region_is_one_of_its_outputs():
    regions, _, traced = regions_of(TwoReaders())
    ops = {node.name: node for node in traced.nodes}
    assert [r.kind for r in regions] == [POINTWISE]
    readers = {path: next(n for n in traced.nodes if n.path == path).args[0] for path in ("left", "right")}
    assert set(regions[0].outputs) == set(readers.values()) and ops[regions[0].outputs[0]].fn == "tanh"


NCHW = TensorSpec((2, 16, 8, 8), (1024, 64, 8, 1), torch.float32, torch.device("cpu"))
NHWC = TensorSpec((2, 16, 8, 8), (1024, 1, 128, 16), torch.float32, torch.device("cpu"))


GAPPED = TensorSpec((2, 16, 8, 8), (2048, 128, 16, 2), torch.float32, torch.device("cpu"))  # every other element
BROADCAST = TensorSpec((2, 16, 8, 8), (0, 64, 8, 1), torch.float32, torch.device("cpu"))  # one image, expanded
OVERLAPPING = TensorSpec((2, 16, 8, 8), (512, 32, 4, 1), torch.float32, torch.device("cpu"))  # rows 4 apart, 8 long


def region_outputs(recorded: TensorSpec) -> tuple[Any, list[torch.Tensor] | None]:
    """TwoReaders' region (two outputs) as a function, its inputs NCHW (so its ops give NCHW) and both outputs
    recorded in the `recorded` layout; its outputs on one seeded input (None where it is no function)."""
    (region,), _, traced = regions_of(TwoReaders())
    sub = subgraph(traced, region, {**dict.fromkeys(region.inputs, NCHW), **dict.fromkeys(region.outputs, recorded)})
    if isinstance(sub, str):
        return sub, None
    assert len(region.outputs) == 2
    torch.manual_seed(0)
    with torch.no_grad():
        return sub, list(sub.module(*(NCHW.scratch() for _ in sub.inputs), *sub.tensors))


@pytest.mark.parametrize("recorded", [NHWC, NCHW, GAPPED], ids=["nhwc", "nchw", "gapped"])
def test_each_value_a_regions_function_returns_is_laid_out_as_the_engines_steps_laid_it_out(recorded):
    _, outputs = region_outputs(recorded)
    _, as_the_ops_give = region_outputs(NCHW)
    assert outputs is not None and as_the_ops_give is not None
    assert [tuple(value.stride()) for value in outputs] == [recorded.stride] * 2
    torch.testing.assert_close(outputs, as_the_ops_give, rtol=0, atol=0)  # the same values, laid out otherwise


def test_a_compiled_output_takes_the_recorded_size_1_strides_as_a_view_and_a_misfit_is_copied():
    x = torch.randn(1, 16, 8, 8).contiguous(memory_format=torch.channels_last)  # batch stride 1024
    recorded = (16, 1, 128, 16)  # the same elements, the batch of 1 given another stride (as a view can leave it)
    kept = as_recorded(x, recorded)
    assert kept.stride() == recorded and kept.data_ptr() == x.data_ptr()
    torch.testing.assert_close(kept, x, rtol=0, atol=0)
    assert as_recorded(x, None) is x and as_recorded(x, x.stride()) is x
    nchw = as_recorded(x, (1024, 64, 8, 1))  # a reinterpreted view would misread the NHWC value: a copy
    assert nchw.stride() == (1024, 64, 8, 1) and nchw.data_ptr() != x.data_ptr()
    torch.testing.assert_close(nchw, x, rtol=0, atol=0)


@pytest.mark.parametrize("recorded", [BROADCAST, OVERLAPPING], ids=["broadcast", "overlapping"])
def test_a_region_whose_output_the_engine_left_as_a_view_sharing_memory_is_no_function(recorded):
    why, _ = region_outputs(recorded)
    assert isinstance(why, str) and "share memory" in why and str(recorded.stride) in why


def test_a_region_is_cut_where_a_step_between_its_steps_reads_it():
    regions, program, traced = regions_of(ReadBetween())
    assert [[program.steps[i].name for i in r.steps] for r in regions] == [["mul", "sigmoid"]]  # tanh alone: one act
    side = next(n.name for n in traced.nodes if n.path == "side")
    assert side in regions[0].inputs


def test_linears_norms_and_activations_between_convolutions_are_one_region_and_an_upsampling_another():
    regions, program, traced = regions_of(Mlp())
    assert [r.kind for r in regions] == [SUBGRAPH, SUBGRAPH]
    names = [[program.steps[i].name for i in r.steps] for r in regions]
    assert {"norm", "fc1", "act", "fc2"} <= set(names[0]) and "patch" not in names[0] and "head" not in names[0]
    assert [program.steps[i].op for i in regions[1].steps] == ["elementwise"] and names[1][0].startswith("interp")
    assert regions[1].outputs == (next(n for n in traced.nodes if n.kind == "output").args[0],)


@pytest.mark.parametrize("model", [TwoReaders, ReadBetween, Mlp])
def test_regions_run_fused_compute_what_the_engines_steps_compute(model):
    torch.manual_seed(0)
    built = model()
    x = torch.randn(INPUT)
    engine, fused = fused_engine(copy.deepcopy(built), FusedTactics(timer=stand_in_times(1.0, 2.0), compiler=eager))
    assert fused is not None and any(step.kind == "fused" for step in engine.program.steps)
    with torch.no_grad():
        torch.testing.assert_close(engine.infer(x), built(x), rtol=1e-5, atol=1e-5)


class WithPReLU(torch.nn.Module):
    """A PReLU (a module whose weight a region's function does not pass) between pointwise ops."""

    def __init__(self) -> None:
        super().__init__()
        self.stem, self.head = torch.nn.Conv2d(16, 16, 3, padding=1), torch.nn.Conv2d(16, 16, 1)
        self.prelu = torch.nn.PReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.prelu(torch.tanh(self.stem(x)) * 2.0)
        return self.head(torch.relu(x) - 1.0)


def test_a_module_a_region_cannot_pass_stays_a_step_and_the_ops_around_it_still_fuse():
    engine, fused = fused_engine(WithPReLU(), FusedTactics(timer=stand_in_times(1.0, 5.0), compiler=eager))
    assert fused is not None
    names = [step.name for step in engine.program.steps]
    assert "prelu" in names and [n for n in names if " + " in n] == ["tanh + mul", "relu + sub"]
    assert not any("offered no fused tactic" in note for note in fused.notes)


SE_LAYERS = {"gates.0.shrink", "gates.0.grow"}  # Block(Recalibrate)'s squeeze-excitation convolutions
CHOSEN_BY_TIMING = {path: f"{CHOSEN_FP16}: best FP8 plan 1.5x slower" for path in SE_LAYERS}
STORED_SESSION = "tests/data/h200/segformer-b0-probe-b1.json"  # a committed session to hold the variant


def test_a_block_whose_layers_run_fp8_keeps_them_and_one_that_runs_fp16_is_offered_asked_or_not():
    regions, program, traced = regions_of(Block(Recalibrate), fp8=SE_LAYERS)
    taken = {program.steps[i].name for r in regions for i in r.steps}
    assert not taken & SE_LAYERS and SQUEEZE_EXCITATION not in [r.kind for r in regions]  # FP8 layers stay FP8
    fp16_by_choice = lower(traced.nodes, SE_LAYERS, {}, CHOSEN_BY_TIMING)
    assert {s.precision for s in fp16_by_choice.steps if s.name in SE_LAYERS} == {"fp16"}
    regions = find_regions(traced.nodes, fp16_by_choice.steps)  # asked FP8, run fp16 by timing: an fp16 layer
    assert [r.kind for r in regions] == [SQUEEZE_EXCITATION]
    assert {fp16_by_choice.steps[i].name for i in regions[0].steps} >= SE_LAYERS
    regions, program, _ = regions_of(Block(Recalibrate), fp8={"bodies.0", "head"})
    assert [r.kind for r in regions] == [SQUEEZE_EXCITATION]


@pytest.mark.parametrize("lie", [{"groups": "2"}, {"kernel_shape": 3}, {"op": ["conv"]}, {"attrs": [1, 2]},
                                 {"name": None}])
def test_a_covered_record_that_lies_is_left_out_and_covers_that_are_no_list_are_none(lie):
    asked = Layer(name="fc", kind="conv", op="conv", precision="fp16", kernel_shape=[1, 1],
                  attrs={"asked": "fp8", "fallback": CHOSEN_BY_TIMING["gates.0.grow"]})
    good = cover(asked, INDUCTOR)
    bad = {**good, COVERED_LAYER: {**good[COVERED_LAYER], **lie}}
    assert [layer.name for layer in covered_layers(Layer(name="r", kind="fused", attrs={COVERS: [good, bad]}))] == [
        "fc"]
    assert all(covered_layers(Layer(name="r", kind="fused", attrs={COVERS: held})) == [] for held in (5, None, "x"))


def test_a_layer_run_fp16_that_writes_fp8_for_its_fp8_reader_joins_no_region():
    _, _, traced = regions_of(Block(Recalibrate), fp8=SE_LAYERS)
    program = lower(traced.nodes, SE_LAYERS, {}, {"gates.0.shrink": CHOSEN_BY_TIMING["gates.0.shrink"]})
    shrink = next(step for step in program.steps if step.name == "gates.0.shrink")
    assert shrink.precision == "fp16" and shrink.output_fp8  # its quantize fused, for the FP8 grow
    taken = {program.steps[i].name for r in find_regions(traced.nodes, program.steps) for i in r.steps}
    assert taken and "gates.0.shrink" not in taken


def test_a_fused_region_keeps_the_record_of_each_layer_asked_for_in_fp8_it_covers():
    engine, fused = fused_engine(Block(Recalibrate), FusedTactics(timer=stand_in_times(1.0, 5.0), compiler=eager),
                                 fp8=SE_LAYERS, refused=CHOSEN_BY_TIMING)
    assert fused is not None and any(step.kind == "fused" for step in engine.program.steps)
    variant = Variant("cudnn-fp8-all", "cudnn", "fp8", "cpu", layers=engine.layers())
    asked = {layer.name: outcome for layer, outcome in asked_fp8(variant)}
    assert asked == dict.fromkeys(SE_LAYERS, FP16_BY_TIMING)  # counted, though no layer of its own runs them
    (role,) = precision_by_role(variant, builtin_rules())
    assert role.asked == 2 and role.ran[FP16_BY_TIMING] == 2 and role.libraries == {INDUCTOR: 2}
    session = dataclasses.replace(load(STORED_SESSION), variants=[variant])
    stored = decode(encode(session), "round trip").variants[0]  # the records are JSON: written and read back
    assert {layer.name: outcome for layer, outcome in asked_fp8(stored)} == asked
    region = next(layer for layer in stored.layers if layer.attrs.get("covers"))
    said = precision_of(stored, region)  # the detail pane and `show --layers` say what the region runs
    assert not said.honoured and "2 layer(s) the recipe quantizes" in said.words and FP16_BY_TIMING in said.words
    table = layer_detail_table(stored)
    labels = [column.label for column in table.columns]
    rows = {key: dict(zip(labels, row, strict=True)) for key, row in zip(table.keys, table.rows, strict=True)}
    assert all(rows[name]["fp8 choice"] == FP16_BY_TIMING and rows[name]["ms"] is None for name in SE_LAYERS)
    stored.recipe = Recipe("stand-in", "fp8 e4m3", None, [], sorted(SE_LAYERS), [], "max", "images", 1)
    section = fp16_layers_section([Row(Job("-", session, {}), stored, stored, 1.0, None)])
    # the export: 5 convolutions (stem, body, head and the region's two), none in FP8, 2 of them quantized by the recipe
    assert "| 5 | 0 | 5 | 2 | gates.0.shrink, gates.0.grow |" in section


@pytest.mark.slow
@pytest.mark.parametrize("name, blocks", [("senet154", 50), ("seresnext26d_32x4d", 8), ("efficientnet_b0", 16),
                                          ("mobilenetv3_large_100", 8)])  # sigmoid gates; hard-sigmoid gates
def test_every_squeeze_excitation_module_of_a_timm_model_is_found(name, blocks):
    timm = pytest.importorskip("timm")
    model = timm.create_model(name, pretrained=False).eval()
    se = [path for path, module in model.named_modules() if type(module).__name__ in ("SEModule", "SqueezeExcite")]
    assert len(se) == blocks
    regions, program, traced = regions_of(model)
    found = [r for r in regions if r.kind == SQUEEZE_EXCITATION]
    expected = [{f"{p}.{child}" for child, module in model.get_submodule(p).named_children()
                 if isinstance(module, torch.nn.Conv2d)} for p in se]
    # a block's region may reach past it (the last one's: the head's pool and classifier linear), never another's
    assert sorted(map(sorted, (conv_paths(r, traced, ("conv",)) for r in found))) == sorted(map(sorted, expected))
    assert all({program.steps[i].kind for i in r.steps} <= {"torch", "conv", "linear"} for r in found)


def engine_of(model: torch.nn.Module, dtype: torch.dtype = torch.float32, fp8: set[str] | None = None,
              nhwc: bool = False, shape: tuple[int, ...] = INPUT, refused: dict[str, str] | None = None
              ) -> tuple[CudnnEngine, TracedModel]:
    """The engine's steps for `model` (FP8 where `fp8` says, fp16 where `refused` gives a reason) with the CPU
    stand-ins of its kernels, and each step's layer, in `dtype`, for an input of `shape`; `nhwc`: each convolution step
    writes NHWC whatever its input's layout, as cuDNN's plans do."""
    torch.manual_seed(0)
    model = model.eval().to(dtype)
    x = torch.randn(shape).to(dtype)
    traced = trace(model, x)
    program = lower(traced.nodes, fp8 or set(), {}, refused or {})
    base = stand_in_engine(program, traced, x)
    runners = [(step, _writing_nhwc(runner) if nhwc and step.kind == "conv" else runner)
               for step, runner in base.runners]
    return CudnnEngine(runners, program, base.consts, base.frees, x, [_layer(s) for s in program.steps], None,
                       "cpu", dtype), traced


def _writing_nhwc(runner: Callable[[dict], torch.Tensor]) -> Callable[[dict], torch.Tensor]:
    return lambda env: runner(env).contiguous(memory_format=torch.channels_last)


def eager(module: torch.fx.GraphModule, _args: list[torch.Tensor]) -> tuple[Callable[..., object], None]:
    """A stand-in for Inductor: the region's function as it is, no compiled code to keep."""
    return module, None


def stand_in_times(fused_us: float, unfused_us: float, calls: list[str] | None = None):
    def timer(library: str, run: Callable[[], object]) -> float:
        run()
        if calls is not None:
            calls.append(library)
        return fused_us if library == INDUCTOR else unfused_us

    return timer


def fused_engine(model: torch.nn.Module, tactics: FusedTactics, dtype: torch.dtype = torch.float32,
                 cache: TimingCache | None = None, plan_limit: int = 4, fp8: set[str] | None = None,
                 nhwc: bool = False, shape: tuple[int, ...] = INPUT, refused: dict[str, str] | None = None):
    engine, traced = engine_of(model, dtype, fp8, nhwc, shape, refused)
    fused = fuse_regions(tactics, plan_limit, cache, traced, engine, engine.layers())
    if fused is not None:
        engine.rebind(fused.program, fused.runners, _frees(fused.program, traced), fused.layers)
    return engine, fused


@pytest.mark.slow
@pytest.mark.parametrize("model", [lambda: Block(Recalibrate), lambda: Block(LinearGate), Chain, TwoReaders, Mlp])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_inductors_fused_kernels_compute_what_the_engines_steps_compute(model, dtype):
    torch.manual_seed(0)
    built = model()
    x = torch.randn(INPUT)
    unfused, _ = engine_of(copy.deepcopy(built), dtype)
    engine, fused = fused_engine(copy.deepcopy(built), FusedTactics(timer=stand_in_times(1.0, 2.0)), dtype)
    assert fused is not None and any(step.kind == "fused" for step in engine.program.steps)
    with torch.no_grad():
        expected = built.to(dtype)(x.to(dtype)).float()
        torch.testing.assert_close(unfused.infer(x), expected)
        tolerance = 1e-5 if dtype == torch.float32 else 2e-2
        torch.testing.assert_close(engine.infer(x), expected, rtol=tolerance, atol=tolerance)


def test_a_fused_tactic_that_times_slower_keeps_the_engines_steps_and_says_so():
    tactics = FusedTactics(timer=stand_in_times(9.0, 5.0), compiler=eager)
    engine, fused = fused_engine(Block(Recalibrate), tactics)
    assert fused is not None and not [s for s in engine.program.steps if s.kind == "fused"]
    records = [layer.attrs["fusion"] for layer in engine.layers() if "fusion" in layer.attrs]
    # mean, the 1x1 conv (SiLU fused), the 1x1 conv, the hard sigmoid (cuDNN fuses none), the multiply, add and relu
    assert len(records) == 7
    assert {r["chosen"] for r in records} == {ENGINE_STEPS}
    assert records[0]["why"].startswith(CHOSEN_UNFUSED)
    assert [(t["library"], t["time_us"]) for t in records[0]["tactics"]] == [(INDUCTOR, 9.0), (ENGINE_STEPS, 5.0)]
    assert "0 run fused, 1 the engine's steps" in fused.notes[0]


def test_a_fused_tactic_that_times_faster_runs_as_one_layer_named_as_tensorrt_names_it():
    engine, fused = fused_engine(Block(Recalibrate), FusedTactics(timer=stand_in_times(3.0, 5.0), compiler=eager))
    assert fused is not None
    layers = [layer for layer in engine.layers() if layer.attrs.get("fusion")]
    assert len(layers) == 1
    names = [cover["name"] for cover in layers[0].attrs["covers"]]
    assert layers[0].name == " + ".join(names) and len(names) == 7
    assert layers[0].attrs["fusion"]["chosen"] == INDUCTOR and "SqueezeExcitation" in layers[0].kind
    assert [s.name for s in engine.program.steps if s.kind == "fused"] == [layers[0].name]


class Masked(torch.nn.Module):
    """Two regions cut at a convolution that reads the first: the second's first value from outside is the first's
    bool mask (where(mask, conv, 0), tanh, relu)."""

    def __init__(self) -> None:
        super().__init__()
        self.stem, self.head = torch.nn.Conv2d(16, 16, 1), torch.nn.Conv2d(16, 16, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.stem(x)
        mask = y > 0
        z = self.head(y * mask)
        return torch.relu(torch.tanh(torch.where(mask, z, 0.0)))


@pytest.mark.parametrize("dtype, word", [(torch.float32, "fp32"), (torch.float16, "fp16")])
def test_a_fused_tactics_precision_is_its_outputs_whatever_its_first_input_is(dtype, word):
    engine, fused = fused_engine(Masked(), FusedTactics(timer=stand_in_times(3.0, 5.0), compiler=eager), dtype)
    assert fused is not None
    layers = {layer.name: layer for layer in engine.layers()
              if layer.attrs.get("fusion", {}).get("chosen") == INDUCTOR}  # `head` records the wider form it lost
    assert sorted(layers) == ["gt + mul", "where + tanh + relu"]
    layer = layers["where + tanh + relu"]
    assert layer.precision == word
    assert {t["precision"] for t in layer.attrs["fusion"]["tactics"]} == {word}


@pytest.mark.parametrize("fused, unfused, keeps", [(9.0, 5.0, True), (5.0, 5.0, True), (4.9, 5.0, False)])
def test_fusion_reason(fused, unfused, keeps):
    reason = fusion_reason(Tactic(INDUCTOR, "fp16", "fp16", fused), Tactic(ENGINE_STEPS, "fp16", "fp16", unfused))
    assert (reason is not None) == keeps


def test_opt_level_0_offers_no_fused_tactic():
    calls: list[str] = []
    engine, fused = fused_engine(Block(Recalibrate), FusedTactics(timer=stand_in_times(1.0, 5.0, calls),
                                                                  compiler=eager), plan_limit=1)
    assert fused is None and calls == [] and not [s for s in engine.program.steps if s.kind == "fused"]


def counting(calls: list[str]):
    def compiler(module: torch.fx.GraphModule, _args: list[torch.Tensor]) -> tuple[Callable[..., object], None]:
        calls.append("compile")
        return module, None

    return compiler


def test_every_value_that_leaves_a_fused_region_is_laid_out_as_the_engines_steps_laid_it_out():
    codes: list[str] = []

    def recording(module: torch.fx.GraphModule, _args: list[torch.Tensor]) -> tuple[Callable[..., object], None]:
        codes.append(module.code)
        return module, None

    (region,), _, _ = regions_of(TwoReaders())  # two values leave it: the tanh's and the shift's
    fused_engine(TwoReaders(), FusedTactics(timer=stand_in_times(1.0, 2.0), compiler=recording))
    assert len(region.outputs) == 2 and len(codes) == 1
    assert codes[0].count("laid_out(") == 2


class Widths(torch.nn.Module):
    """Twenty convolutions of growing widths, each followed by tanh and relu: twenty pointwise regions, each of its
    own signature."""

    def __init__(self) -> None:
        super().__init__()
        widths = [16, *range(17, 37)]
        self.convs = torch.nn.ModuleList(torch.nn.Conv2d(a, b, 1) for a, b in itertools.pairwise(widths))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for conv in self.convs:
            x = torch.relu(torch.tanh(conv(x)))
        return x


def test_regions_of_one_signature_compile_once_and_every_signature_compiles_within_the_budget():
    calls: list[str] = []
    engine, fused = fused_engine(Block(Recalibrate, blocks=3), FusedTactics(timer=stand_in_times(1.0, 5.0, calls),
                                                                            compiler=counting(calls)))
    assert fused is not None and calls.count("compile") == 1 and calls.count(INDUCTOR) == 1  # three blocks alike
    assert len([s for s in engine.program.steps if s.kind == "fused"]) == 3
    calls.clear()
    engine, fused = fused_engine(Widths(), FusedTactics(timer=stand_in_times(1.0, 5.0), compiler=counting(calls)))
    assert calls.count("compile") == 20 and len([s for s in engine.program.steps if s.kind == "fused"]) == 20


def test_past_the_compile_budget_no_signature_compiles_the_largest_first_and_the_notes_say_what_was_left():
    calls: list[str] = []

    def slow(module: torch.fx.GraphModule, _args: list[torch.Tensor]) -> tuple[Callable[..., object], None]:
        calls.append("compile")
        time.sleep(0.05)
        return module, None

    engine, fused = fused_engine(Mixed(), FusedTactics(timer=stand_in_times(1.0, 5.0), compiler=slow, budget_s=0.01))
    assert fused is not None and calls.count("compile") == 1
    unfused, traced = engine_of(Mixed())
    regions = find_regions(traced.nodes, unfused.program.steps)
    largest = max(regions, key=lambda r: len(r.steps))
    assert [s.absorbed for s in engine.program.steps if s.kind == "fused"] == [largest.nodes]
    left = len(regions) - 1
    assert any(note.startswith(f"{left} regions (") and "compile budget was spent" in note for note in fused.notes)


def test_inductors_compile_workers_are_asked_to_end_after_the_compiles_and_before_any_timing():
    calls: list[str] = []
    fused_engine(Mixed(), FusedTactics(timer=stand_in_times(1.0, 5.0, calls), compiler=counting(calls),
                                       ask_workers_to_end=lambda: calls.append("shutdown")))
    assert calls.count("shutdown") == 1 and calls.count("compile") >= 2
    last_compile = max(index for index, call in enumerate(calls) if call == "compile")
    assert calls.index("shutdown") == last_compile + 1 < calls.index(INDUCTOR)


def test_a_build_whose_regions_times_are_all_held_times_nothing(tmp_path):
    cache = TimingCache(tmp_path / "timing.json", {"gpu": "stand-in"})
    fused_engine(Block(Recalibrate), FusedTactics(timer=stand_in_times(1.0, 5.0), compiler=eager), cache=cache)
    calls: list[str] = []
    fused_engine(Block(Recalibrate), FusedTactics(timer=stand_in_times(1.0, 5.0, calls), compiler=counting(calls),
                                                  ask_workers_to_end=lambda: calls.append("shutdown")), cache=cache)
    assert calls.count("compile") == 1 and calls.count("shutdown") == 1  # the winner compiled (loaded), then asked
    assert INDUCTOR not in calls  # nothing timed, so the timer never waited


def test_the_default_ask_is_inductors_own_and_the_default_timer_waits_for_the_workers():
    from builders.engine import kernels
    from builders.pytorch import inductor_workers

    assert FusedTactics().ask_workers_to_end is inductor_workers.begin_ending_compile_workers
    assert kernels.end_compile_workers is inductor_workers.end_compile_workers


def test_the_timing_cache_keeps_the_choice_so_a_second_build_times_nothing(tmp_path):
    path = tmp_path / "timing.json"
    calls: list[str] = []
    for fused_us, runs_fused in ((3.0, True), (9.0, False)):
        path.unlink(missing_ok=True)
        cache = TimingCache(path, {"gpu": "stand-in"})
        fused_engine(Block(Recalibrate), FusedTactics(timer=stand_in_times(fused_us, 5.0), compiler=eager), cache=cache)
        cache.save()
        calls.clear()
        engine, fused = fused_engine(Block(Recalibrate), FusedTactics(timer=stand_in_times(1.0, 1.0, calls),
                                                                      compiler=counting(calls)),
                                     cache=TimingCache(path, {"gpu": "stand-in"}))
        assert INDUCTOR not in calls and ENGINE_STEPS not in calls  # nothing timed again
        assert calls.count("compile") == (1 if runs_fused else 0)  # compiled only where the fused tactic runs
        assert any(s.kind == "fused" for s in engine.program.steps) == runs_fused
        assert fused is not None and "1 timing cache" in fused.notes[0]


@pytest.mark.parametrize("garble", ["digest", "field"])
def test_a_garbled_fused_entry_is_a_miss(tmp_path, garble):
    path = tmp_path / "timing.json"
    cache = TimingCache(path, {"gpu": "stand-in"})
    fused_engine(Block(Recalibrate), FusedTactics(timer=stand_in_times(3.0, 5.0), compiler=eager), cache=cache)
    cache.save()
    body = json.loads(path.read_text())
    (signature, entry), = body["plans"].items()
    entry["fused_us"] = -1.0 if garble == "field" else 2.0
    if garble == "field":  # a digest that matches: the entry reads, and its time means nothing
        entry["digest"] = document_digest([signature, {k: v for k, v in entry.items() if k != "digest"}])
    path.write_text(json.dumps(body))
    calls: list[str] = []
    fused_engine(Block(Recalibrate), FusedTactics(timer=stand_in_times(3.0, 5.0, calls), compiler=eager),
                 cache=TimingCache(path, {"gpu": "stand-in"}))
    assert calls == [INDUCTOR, ENGINE_STEPS]


def test_a_quantized_block_leaves_the_pointwise_ops_after_its_gate_to_fuse():
    tactics = FusedTactics(timer=stand_in_times(1.0, 5.0), compiler=eager)
    engine, _ = fused_engine(Block(Recalibrate), tactics, fp8={"gates.0.shrink", "gates.0.grow"})
    fused = [layer for layer in engine.layers() if layer.attrs.get("fusion")]
    # the pool alone (a reduction: one op Inductor may run faster), then the gate module and what follows it
    assert [layer.name for layer in fused] == ["gates.0.mean", "gates.0.squash + gates.0.mul + add + relu_1"]
    assert fused[1].kind.startswith("PointWise") and fused[0].kind.startswith("Ops")
    assert {layer.precision for layer in engine.layers() if layer.name in ("gates.0.shrink", "gates.0.grow")} == {
        "fp8"}


class Projected(torch.nn.Module):
    """A convolution's tokens through a LayerNorm and a linear, back to an image (a SUBGRAPH region), then
    `kernels`: one convolution per entry, of that kernel size, each reading the one before; `tapped`: the image is
    also added to the last convolution's output (a second reader of the region's output)."""

    def __init__(self, kernels: tuple[int, ...] = (1,), tapped: bool = False) -> None:
        super().__init__()
        self.patch, self.norm, self.fc = torch.nn.Conv2d(16, 16, 3, padding=1), torch.nn.LayerNorm(16), \
            torch.nn.Linear(16, 16)
        self.heads = torch.nn.ModuleList(torch.nn.Conv2d(16, 16, k, padding=k // 2) for k in kernels)
        self.tapped = tapped

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.patch(x)
        n, c, h, w = x.shape
        image = self.fc(self.norm(x.flatten(2).transpose(1, 2))).transpose(1, 2).reshape(n, c, h, w)
        y = image
        for head in self.heads:
            y = torch.relu(head(y))
        return y + image if self.tapped else y


def widened_of(model: torch.nn.Module, fp8: set[str] | None = None):
    regions, program, traced = regions_of(model, fp8)
    return regions, widened(traced.nodes, program.steps, regions), program


@pytest.mark.parametrize("heads", [1, 2])
def test_a_subgraph_region_read_by_1x1_convolutions_alone_is_also_offered_with_them(heads):
    regions, wider, program = widened_of(Projected((1,) * heads))
    (position, region), = wider.items()
    narrow = regions[position]
    assert narrow.kind == region.kind == SUBGRAPH
    convs = [i for i, step in enumerate(program.steps) if step.name.startswith("heads.")]
    assert len(convs) == heads and region.steps == (*narrow.steps, *convs)
    assert region.output == program.steps[convs[-1]].node  # the last convolution's value (its ReLU fused)
    assert set(region.inputs) == set(narrow.inputs)


@pytest.mark.parametrize("model, fp8", [
    (lambda: Projected((3,)), None),  # a 3x3 convolution reads the region
    (lambda: Projected((1,), tapped=True), None),  # the region's output has a second reader
    (lambda: Projected((1,)), {"heads.0"}),  # the 1x1 convolution runs in FP8
    (lambda: Projected((1, 1)), {"heads.1"}),  # the fp16 1x1 convolution writes FP8 for the FP8 one after it
    (lambda: Chain(), None),  # a pointwise region read by a 1x1 convolution
    (lambda: Block(Recalibrate), None),  # a squeeze-excitation region read by one
])
def test_no_wider_form_where_the_reader_is_not_an_fp16_1x1_convolution_alone_or_the_region_is_pointwise(model, fp8):
    regions, wider, _ = widened_of(model(), fp8)
    assert regions and wider == {}


def times_in_turn(times: list[float], calls: list[str] | None = None):
    """A timer that answers `times` in turn (each region's fused tactic, then its steps, in the order timed)."""
    answers = iter(times)

    def timer(library: str, run: Callable[[], object]) -> float:
        run()
        if calls is not None:
            calls.append(library)
        return next(answers)

    return timer


@pytest.mark.parametrize("wide_saves_more", [True, False])
def test_of_a_regions_two_forms_the_one_that_saves_more_runs_and_the_other_says_why(wide_saves_more):
    model = Projected((1,))
    # the region as it is: 4 us fused against 10 us of steps (6 saved); with the 1x1 convolution: 5 us against 20
    # (15 saved) or against 10.5 (5.5 saved: less than the narrower form's 6)
    steps_us = 20.0 if wide_saves_more else 10.5
    engine, fused = fused_engine(copy.deepcopy(model), FusedTactics(timer=times_in_turn([4.0, 10.0, 5.0, steps_us]),
                                                                    compiler=eager))
    assert fused is not None
    runs = [layer for layer in engine.layers() if layer.attrs.get("fusion", {}).get("chosen") == INDUCTOR]
    assert len(runs) == 1
    covered = [cover["name"] for cover in runs[0].attrs["covers"]]
    assert ("heads.0" in covered) == wide_saves_more
    other = runs[0].attrs["fusion"]["other form"]  # the form that did not run, with its times
    assert [t["time_us"] for t in other["tactics"]] == ([4.0, 10.0] if wide_saves_more else [5.0, steps_us])
    assert other["layers"] == len(covered) + (-1 if wide_saves_more else 1)
    if not wide_saves_more:
        head = next(layer for layer in engine.layers() if layer.name == "heads.0")
        assert head.attrs["fusion"]["chosen"] == ENGINE_STEPS and head.attrs["fusion"]["why"].startswith(OUTDONE)
        assert "(6.0 us saved against 5.5 us)" in head.attrs["fusion"]["why"]
    expected = "1 run wider, 0 as they are" if wide_saves_more else "0 run wider, 1 as they are"
    assert any(expected in note for note in fused.notes), fused.notes
    assert "1 run fused, 0 the engine's steps" in fused.notes[0]  # the outdone form is counted apart
    x = torch.randn(INPUT)
    with torch.no_grad():
        torch.testing.assert_close(engine.infer(x), model(x), rtol=1e-5, atol=1e-5)


class ProjectedThenChain(Projected):
    """`Projected`'s tokens made an NCHW image (a SUBGRAPH region) and a 1x1 convolution of it (the region's wider
    form), then a pointwise chain that reads that convolution's value (a second region), then a 3x3 convolution."""

    def __init__(self) -> None:
        super().__init__((1,))
        self.tail = torch.nn.Conv2d(16, 16, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.patch(x)
        n, c, h, w = x.shape
        image = self.fc(self.norm(x.flatten(2).transpose(1, 2))).transpose(1, 2).contiguous().view(n, c, h, w)
        return self.tail(torch.tanh(torch.relu(self.heads[0](image))) * 0.5 + 1.0)


def strided(module: torch.fx.GraphModule, args: list[torch.Tensor]) -> tuple[Callable[..., object], None]:
    """A stand-in for Inductor's code: the region's function, refusing inputs laid out otherwise than those it was
    compiled for, in every dimension (Inductor's code asserts the strides of those of more than one element, and code
    compiled for a layout takes another where PyTorch's memory-format heuristic reads a size-1 dimension's stride),
    and returning its tensors with the strides of their dimensions of size 1 changed, as compiled code may leave
    them."""
    compiled_for = [arg.stride() for arg in args]

    def moved(value: object) -> object:
        if not isinstance(value, torch.Tensor):
            return value
        return value.as_strided(value.shape, [stride + 1 if size == 1 else stride
                                              for size, stride in zip(value.shape, value.stride(), strict=True)])

    def run(*values: torch.Tensor) -> object:
        got = [value.stride() for value in values]
        assert got == compiled_for, f"strides {got} against {compiled_for}"
        result = module(*values)
        return tuple(map(moved, result)) if isinstance(result, tuple) else moved(result)

    return run, None


@pytest.mark.parametrize("compiler", [strided, pytest.param(compile_region, marks=pytest.mark.slow)],
                         ids=["stand-in", "inductor"])
def test_a_fused_region_gives_its_outputs_the_layout_the_engines_steps_gave_them_for_the_regions_that_read_them(
        compiler):
    model = ProjectedThenChain()
    # the SUBGRAPH region 4 us fused against 10 us of steps, the chain 1 against 5, the wider form 5 against 20: the
    # wider form runs, its 1x1 convolution computed by `F.conv2d` of the region's NCHW value, where the engine's
    # convolution wrote NHWC: the chain was compiled for the NHWC value
    engine, fused = fused_engine(copy.deepcopy(model), FusedTactics(timer=times_in_turn([4.0, 10.0, 1.0, 5.0, 5.0,
                                                                                         20.0]), compiler=compiler),
                                 nhwc=True)
    assert fused is not None
    runs = [layer.name for layer in engine.layers() if layer.attrs.get("fusion", {}).get("chosen") == INDUCTOR]
    assert len(runs) == 2 and any("heads.0" in name for name in runs), runs
    x = torch.randn(INPUT)
    with torch.no_grad():
        torch.testing.assert_close(engine.infer(x), model(x), rtol=1e-5, atol=1e-5)


class MixFfn(torch.nn.Module):
    """SegFormer's Mix-FFN on a convolution's tokens: LayerNorm and a linear (one region), the tokens viewed as an
    NHWC image and a depthwise 3x3 convolution of it, back to tokens, GELU, a linear and the residual add (a second
    region, and its wider form with the convolution)."""

    def __init__(self) -> None:
        super().__init__()
        self.patch = torch.nn.Conv2d(16, 16, 3, padding=1)
        self.norm, self.fc1, self.fc2 = torch.nn.LayerNorm(16), torch.nn.Linear(16, 64), torch.nn.Linear(64, 16)
        self.dwconv, self.act = torch.nn.Conv2d(64, 64, 3, padding=1, groups=64), torch.nn.GELU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.patch(x)
        n, c, h, w = x.shape
        t = x.flatten(2).transpose(1, 2)
        hidden = self.fc1(self.norm(t)).transpose(1, 2).view(n, 64, h, w)
        t = t + self.fc2(self.act(self.dwconv(hidden).flatten(2).transpose(1, 2)))
        return t.transpose(1, 2).reshape(n, c, h, w)


@pytest.mark.parametrize("compiler", [strided, pytest.param(compile_region, marks=pytest.mark.slow)],
                         ids=["stand-in", "inductor"])
def test_a_convolution_compiled_in_a_region_reads_a_batch_of_one_as_the_engines_steps_laid_it_out(compiler):
    # Inductor compiles the wider form's convolution for the layout the first region's output had in the engine's
    # steps, batch stride included (PyTorch's memory-format heuristic reads it), and asserts the layout the real
    # convolution then writes: the first region must return its output with that batch stride, not Inductor's
    model = MixFfn()
    regions, wider, _ = widened_of(model)
    assert [r.kind for r in regions] == [SUBGRAPH, SUBGRAPH] and list(wider) == [1]
    times = [1.0, 10.0, 1.0, 10.0, 1.0, 30.0]  # each region's fused tactic against its steps, then the wider form
    engine, fused = fused_engine(copy.deepcopy(model), FusedTactics(timer=times_in_turn(times), compiler=compiler),
                                 nhwc=True, shape=(1, *INPUT[1:]))
    assert fused is not None and "1 run wider" in fused.notes[-1], fused.notes
    x = torch.randn(1, *INPUT[1:])
    with torch.no_grad():
        torch.testing.assert_close(engine.infer(x), model(x), rtol=1e-5, atol=1e-5)


def test_where_both_forms_times_are_held_the_form_that_saves_less_is_not_compiled(tmp_path):
    path = tmp_path / "timing.json"
    cache = TimingCache(path, {"gpu": "stand-in"})
    fused_engine(Projected((1,)), FusedTactics(timer=times_in_turn([4.0, 10.0, 5.0, 20.0]), compiler=eager),
                 cache=cache)
    cache.save()
    calls: list[str] = []
    engine, _ = fused_engine(Projected((1,)), FusedTactics(timer=times_in_turn([], calls), compiler=counting(calls)),
                             cache=TimingCache(path, {"gpu": "stand-in"}))
    assert calls == ["compile"]  # the wider form only, nothing timed
    fused_steps = [s for s in engine.program.steps if s.kind == "fused"]
    assert len(fused_steps) == 1 and "heads.0" in fused_steps[0].name
    record = next(layer for layer in engine.layers() if layer.name == fused_steps[0].name).attrs["fusion"]
    assert record["other form"]["why"].startswith(OUTDONE)


def test_a_form_outdone_before_compiling_is_compiled_and_runs_where_the_other_does_not_compile(tmp_path):
    path = tmp_path / "timing.json"
    cache = TimingCache(path, {"gpu": "stand-in"})
    fused_engine(Projected((1,)), FusedTactics(timer=times_in_turn([4.0, 10.0, 5.0, 20.0]), compiler=eager),
                 cache=cache)  # the wider form saves 15 us, the narrower 6
    cache.save()

    def refusing_convolutions(module: torch.fx.GraphModule, _args: list[torch.Tensor]
                              ) -> tuple[Callable[..., object], None]:
        if "conv2d" in module.code:
            raise RuntimeError("no kernel for this")
        return module, None

    model = Projected((1,))
    engine, fused = fused_engine(copy.deepcopy(model), FusedTactics(timer=times_in_turn([]),
                                                                    compiler=refusing_convolutions),
                                 cache=TimingCache(path, {"gpu": "stand-in"}))
    runs = [layer for layer in engine.layers() if layer.attrs.get("fusion", {}).get("chosen") == INDUCTOR]
    assert len(runs) == 1 and "heads.0" not in runs[0].name  # the narrower form runs
    assert not runs[0].attrs["fusion"].get("why")
    assert fused is not None and "0 run wider, 1 as they are" in fused.notes[-1]
    assert "; 1 signature's code: 1 compiled here in " in fused.notes[0]  # the refused form has no code to count
    x = torch.randn(INPUT)
    with torch.no_grad():
        torch.testing.assert_close(engine.infer(x), model(x), rtol=1e-5, atol=1e-5)


def test_where_neither_form_runs_fused_each_layer_keeps_the_narrowest_record_it_was_timed_in():
    # the region as it is ties its steps (a tie keeps them), the wider form is slower than its steps
    engine, fused = fused_engine(Projected((1,)), FusedTactics(timer=times_in_turn([10.0, 10.0, 25.0, 20.0]),
                                                               compiler=eager))
    assert fused is not None and not [s for s in engine.program.steps if s.kind == "fused"]
    steps = len(engine.program.steps) - 2  # every step but the two convolutions is in the region as it is
    records = {layer.name: layer.attrs["fusion"] for layer in engine.layers() if "fusion" in layer.attrs}
    assert not any(str(record.get("why", "")).startswith(OUTDONE) for record in records.values())
    assert records.pop("heads.0")["layers"] == steps + 1  # the wider form's record
    assert {record["layers"] for record in records.values()} == {steps}
    assert "for 1 subgraph regions: 0 run fused, 1 the engine's steps" in fused.notes[0]  # one region, two forms
    assert "0 run wider, 0 as they are, 1 keep their steps" in fused.notes[-1]


class DepthwiseTokens(torch.nn.Module):
    """A convolution, then a 3x3 convolution of `groups` groups, its tokens through a LayerNorm and a linear back to
    an image (a SUBGRAPH region), then a 3x3 convolution; `tapped`: the grouped convolution's value is also added
    to the last convolution's (read outside the region)."""

    def __init__(self, groups: int = 16, tapped: bool = False) -> None:
        super().__init__()
        self.stem, self.head = torch.nn.Conv2d(16, 16, 3, padding=1), torch.nn.Conv2d(16, 16, 3, padding=1)
        self.grouped = torch.nn.Conv2d(16, 16, 3, padding=1, groups=groups)
        self.norm, self.fc, self.tapped = torch.nn.LayerNorm(16), torch.nn.Linear(16, 16), tapped

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.grouped(self.stem(x))
        n, c, h, w = y.shape
        image = self.fc(self.norm(y.flatten(2).transpose(1, 2))).transpose(1, 2).reshape(n, c, h, w)
        out = self.head(image)
        return out + y if self.tapped else out


def test_a_subgraph_region_is_also_offered_with_the_depthwise_convolution_only_it_reads():
    regions, wider, program = widened_of(DepthwiseTokens())
    (position, region), = wider.items()
    narrow = regions[position]
    grouped = next(i for i, step in enumerate(program.steps) if step.name == "grouped")
    assert region.steps == (grouped, *narrow.steps)
    assert program.steps[grouped].node not in region.inputs and program.steps[grouped].inputs[0] in region.inputs
    assert region.output == narrow.output


@pytest.mark.parametrize("model, fp8", [
    (lambda: DepthwiseTokens(groups=4), None),  # grouped, not depthwise
    (lambda: DepthwiseTokens(tapped=True), None),  # its value is read outside the region too
    (lambda: DepthwiseTokens(), {"grouped"}),  # asked for in FP8
])
def test_no_wider_form_with_a_convolution_before_that_is_not_a_depthwise_fp16_one_only_the_region_reads(model, fp8):
    regions, wider, _ = widened_of(model(), fp8)
    assert regions and wider == {}


def test_a_region_run_with_its_depthwise_convolution_computes_what_the_steps_compute():
    model = DepthwiseTokens()
    engine, fused = fused_engine(copy.deepcopy(model), FusedTactics(timer=times_in_turn([4.0, 10.0, 5.0, 20.0]),
                                                                    compiler=eager))
    assert fused is not None
    runs = [layer for layer in engine.layers() if layer.attrs.get("fusion", {}).get("chosen") == INDUCTOR]
    assert len(runs) == 1 and runs[0].attrs["covers"][0]["name"] == "grouped"
    x = torch.randn(INPUT)
    with torch.no_grad():
        torch.testing.assert_close(engine.infer(x), model(x), rtol=1e-5, atol=1e-5)


class SideBetween(torch.nn.Module):
    """A SUBGRAPH region with two outputs: a gate read by a 3x3 convolution `side`, then an image read by a 1x1
    convolution `head` alone; `side` stands between the region's last step and `head`."""

    def __init__(self) -> None:
        super().__init__()
        self.patch, self.side = torch.nn.Conv2d(16, 16, 3, padding=1), torch.nn.Conv2d(16, 16, 3, padding=1)
        self.head = torch.nn.Conv2d(16, 16, 1)
        self.norm, self.fc = torch.nn.LayerNorm(16), torch.nn.Linear(16, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.patch(x)
        n, c, h, w = x.shape
        t = self.fc(self.norm(x.flatten(2).transpose(1, 2)))
        gate = torch.sigmoid(t).transpose(1, 2).reshape(n, c, h, w)
        image = torch.tanh(t).transpose(1, 2).reshape(n, c, h, w)
        s = self.side(gate)
        return self.head(image) * s  # a product: no convolution takes it as its epilogue


def test_no_wider_form_where_a_step_between_would_read_a_value_it_computes():
    regions, wider, program = widened_of(SideBetween())
    names = [step.name for step in program.steps]
    region = next(r for r in regions if r.kind == SUBGRAPH)
    assert names.index("side") > region.steps[-1] and names.index("head") > names.index("side")  # the case itself
    assert wider == {}


class ActivatedDepthwise(DepthwiseTokens):
    """DepthwiseTokens with a ReLU after the depthwise convolution (its epilogue)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.grouped(self.stem(x)))
        n, c, h, w = y.shape
        return self.head(self.fc(self.norm(y.flatten(2).transpose(1, 2))).transpose(1, 2).reshape(n, c, h, w))


def test_a_depthwise_convolution_is_taken_with_its_epilogue():
    regions, wider, program = widened_of(ActivatedDepthwise())
    (position, region), = wider.items()
    grouped = next(i for i, step in enumerate(program.steps) if step.name == "grouped")
    assert program.steps[grouped].absorbed  # the ReLU is the convolution step's epilogue
    assert region.steps == (grouped, *regions[position].steps)
    assert set(program.steps[grouped].absorbed) <= set(region.nodes)
