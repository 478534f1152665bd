"""Tactics timed with the weights where the engine's graph reads them: the rule per model, the copies a timing cycles
through, the packs of cuDNN's plans and the calls of other libraries' tactics (on the CPU: the timers stand in)."""

from __future__ import annotations

import dataclasses
import itertools

import pytest
import torch

from builders.engine import conv_tactics, kernels
from builders.engine.conv_tactics import companions
from builders.engine.kernels import TENSOR_UIDS, ConvSignature
from builders.engine.tactics import CUBLASLT, CUDNN_MATMUL
from builders.engine.weight_residency import (
    WEIGHT_COPIES_MAX,
    copies_to_evict,
    weight_copies,
    weight_packs,
    weights_cold,
)
from builders.fp8.quantizer import Quantizer

POINTWISE = ConvSignature("fp16", (1, 64, 7, 7), 32, (1, 1), (1, 1), (0, 0), (1, 1), 1, (), False)
COLD = dataclasses.replace(POINTWISE, cold_weights=True)


def stand_in_quantizer() -> Quantizer:
    return Quantizer(lambda x, s, c: x, "stand-in quantize")


@pytest.mark.parametrize("l2_bytes, cold", [
    (2 * 1000 - 1, True),  # the convolution's and linear's 1,000 weights take 2,000 bytes in fp16
    (2 * 1000, False),  # exactly the L2: they fit
    (4000, False),
])
def test_weights_are_cold_where_the_models_fp16_weights_exceed_l2(l2_bytes, cold):
    """Only convolutions' and linears' weights count: a model and its BatchNorm-folded copy (biases added, BatchNorm
    gone) get one answer, as the engine and the probe each ask it of one of them."""
    model = torch.nn.Sequential(torch.nn.Conv2d(4, 10, 3, bias=False), torch.nn.BatchNorm2d(10),  # 360 weights
                                torch.nn.Flatten(), torch.nn.Linear(64, 10))  # 640 weights and 10 biases
    folded = torch.nn.Sequential(torch.nn.Conv2d(4, 10, 3), torch.nn.Flatten(), torch.nn.Linear(64, 10))
    assert weights_cold(model, l2_bytes) is cold and weights_cold(folded, l2_bytes) is cold


@pytest.mark.parametrize("weight_bytes, l2_bytes, evicting", [
    (10, 50, 10),  # 2 x 50 / 10
    (30, 50, 4),  # 100 / 30 rounded up
    (100, 50, 2),  # one weight larger than the L2: two copies evict each other
    (1, 10**6, 2 * 10**6),  # a tiny weight: as many as twice the L2 takes
])
def test_copies_hold_twice_the_l2_and_a_captured_graphs_calls_are_capped(weight_bytes, l2_bytes, evicting):
    assert copies_to_evict(weight_bytes, l2_bytes) == evicting
    assert weight_copies(weight_bytes, l2_bytes) == min(evicting, WEIGHT_COPIES_MAX)


@pytest.mark.parametrize("dtype", [torch.float16, torch.float8_e4m3fn])
def test_weight_packs_share_every_tensor_but_the_weight(dtype):
    """The copies: as many as the weight's fp16 size needs (FP8 gets fp16's count), each the weight's values and
    layout at its own address, one after another in one buffer; every other tensor shared."""
    weight = torch.randn(8, 4, 3, 3).to(dtype).contiguous(memory_format=torch.channels_last)  # 288 values
    tensors = {TENSOR_UIDS["x"]: torch.randn(4), TENSOR_UIDS["w"]: weight, TENSOR_UIDS["y"]: torch.empty(4)}
    packs = weight_packs(tensors, TENSOR_UIDS["w"], l2_bytes=1000)  # 576 bytes in fp16: 4 copies hold 2,000
    assert len(packs) == 4
    copies = [pack[TENSOR_UIDS["w"]] for pack in packs]
    assert all(torch.equal(c.float(), weight.float()) and c.stride() == weight.stride() for c in copies)
    starts = sorted(c.data_ptr() for c in copies)
    assert [b - a for a, b in itertools.pairwise(starts)] == [weight.numel() * weight.element_size()] * 3
    for uid in (TENSOR_UIDS["x"], TENSOR_UIDS["y"]):
        assert all(pack[uid] is tensors[uid] for pack in packs)


def test_a_cold_signature_is_keyed_apart_and_its_companions_stay_cold():
    assert COLD.key() == POINTWISE.key() + " cold-w"
    assert companions(COLD, 4)[CUDNN_MATMUL] == dataclasses.replace(companions(POINTWISE, 4)[CUDNN_MATMUL],
                                                                    cold_weights=True)


@pytest.mark.parametrize("sig, packs", [(POINTWISE, 1), (COLD, 5)])
def test_plans_of_a_cold_signature_cycle_through_copies_of_the_weights(monkeypatch, sig, packs):
    weight_bytes = 32 * 64 * 2
    monkeypatch.setattr(kernels, "gpu_l2_bytes", lambda device=None: 2 * weight_bytes + 1)  # 2.x copies' worth
    pack = kernels.scratch_packs(sig, "cpu")
    seen = [pack() for _ in range(2 * packs)]
    weights = [p[TENSOR_UIDS["w"]].data_ptr() for p in seen]
    assert len(set(weights)) == packs  # packs cycle: the first again after the last
    assert weights[:packs] == weights[packs:]
    assert len({p[TENSOR_UIDS["x"]].data_ptr() for p in seen}) == 1  # one input: just written, as in the graph


@pytest.mark.parametrize("sig, copies", [(POINTWISE, 1), (COLD, 5), (dataclasses.replace(COLD, precision="fp8"), 5)])
def test_a_library_tactic_of_a_cold_signature_runs_each_weight_copy_once(monkeypatch, sig, copies):
    """One captured graph of one call per copy (FP8 gets the copies of its fp16 size, as the cuDNN plans do), each
    runner called once a run, the graph's time divided by the calls."""
    weight_bytes = 32 * 64 * 2
    monkeypatch.setattr(conv_tactics, "gpu_l2_bytes", lambda device=None: 2 * weight_bytes + 1)
    built: list[torch.Tensor] = []
    calls: list[int] = []
    library_conv = conv_tactics.library_conv

    def recording(library, sig, weight, *args, **kwargs):
        built.append(weight)
        runner, index = library_conv(library, sig, weight, *args, **kwargs), len(built) - 1
        return lambda x, residual: (calls.append(index), runner(x, residual))[1]

    ran: list[torch.Tensor] = []
    monkeypatch.setattr(conv_tactics, "library_conv", recording)
    monkeypatch.setattr(conv_tactics, "time_captured", lambda run: (ran.append(run()), 40.0)[1])
    assert conv_tactics.time_library(CUBLASLT, sig, stand_in_quantizer, "cpu") == 40.0 / copies
    assert len({w.data_ptr() for w in built}) == copies and sorted(calls) == list(range(copies))
    (out,) = ran
    assert out.shape == sig.output_shape()


class FakeGraph:
    """A cuDNN frontend graph as the engine's plan timing calls it: two plans, each execution's tensors recorded."""

    def __init__(self) -> None:
        self.read: list[dict[int, torch.Tensor]] = []

    def get_execution_plan_count(self) -> int:
        return 2

    def get_plan_name_at_index(self, index: int) -> str:
        return f"plan{index}"

    def build_plan_at_index(self, index: int) -> None:
        pass

    def get_workspace_size_plan_at_index(self, index: int) -> int:
        return 0

    def get_workspace_size(self) -> int:
        return 0

    def execute_plan_at_index(self, tensors, workspace, index, handle=None) -> None:
        self.read.append(tensors)

    def execute(self, tensors, workspace, handle=None) -> None:
        self.read.append(tensors)

    def serialize(self, as_bytes=True) -> bytes:
        return b"plan"

    def deserialize(self, handle, plan) -> None:
        pass


@pytest.mark.parametrize("how", ["in process", "compiled", "chosen before"])
def test_every_plan_timing_reads_the_signatures_packs(monkeypatch, how):
    """Plans built here, plans a worker compiled, and a chosen plan timed again: each timed execution reads the next
    of `scratch_packs`' tensors (on the CPU: the GPU's stream, workspace and timer stand in)."""
    from types import SimpleNamespace

    from builders.engine.plans import Choice

    graph = FakeGraph()
    handed: list[dict[int, torch.Tensor]] = []

    def packs(sig, device="cuda"):
        def pack():
            handed.append({TENSOR_UIDS["w"]: torch.zeros(1)})
            return handed[-1]
        return pack

    def time_execution(run):
        for _ in range(3):
            run()
        return 1.0

    empty = torch.empty
    monkeypatch.setattr(kernels, "scratch_packs", packs)
    monkeypatch.setattr(kernels, "time_execution", time_execution)
    monkeypatch.setattr(kernels, "define_graph", lambda sig, cudnn, handle: graph)
    monkeypatch.setattr(torch, "empty", lambda *a, **k: empty(*a, **{**k, "device": "cpu"}))
    monkeypatch.setattr(torch.cuda, "current_stream", lambda: SimpleNamespace(cuda_stream=0))
    cudnn = SimpleNamespace(set_stream=lambda handle, stream: None, pygraph=lambda handle=None: graph)
    if how == "in process":
        kernels.select_in_process(COLD, cudnn, None, 2, None)
    elif how == "compiled":
        kernels.select_compiled(COLD, cudnn, None, 2, ["plan0", "plan1"], {0: b"a", 1: b"b"})
    else:
        chosen = kernels.ConvGraph(COLD, cudnn, None, graph, Choice(0, "plan0", 1, 2, None, True, []), None)
        assert chosen.time_us() == 1.0
    assert handed and [id(t) for t in graph.read] == [id(t) for t in handed]
