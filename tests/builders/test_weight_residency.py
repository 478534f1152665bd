"""Tactics timed with the weights where the engine's graph reads them: the rule per model, the copies a timing cycles
through, the packs of cuDNN's plans and the calls of other libraries' tactics (on the CPU: the timers stand in)."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from builders.engine import conv_tactics, kernels
from builders.engine.conv_tactics import companions
from builders.engine.kernels import TENSOR_UIDS, ConvSignature
from builders.engine.tactics import CUBLASLT, CUDNN_MATMUL
from builders.engine.weight_residency import WEIGHT_COPIES_MAX, weight_copies, weight_packs, weights_cold
from builders.fp8.quantizer import Quantizer

POINTWISE = ConvSignature("fp16", (1, 64, 7, 7), 32, (1, 1), (1, 1), (0, 0), (1, 1), 1, (), False)
COLD = dataclasses.replace(POINTWISE, cold_weights=True)


def stand_in_quantizer() -> Quantizer:
    return Quantizer(lambda x, s, c: x, "stand-in quantize")


@pytest.mark.parametrize("parameters, l2_bytes, cold", [
    (1000, 1999, True),  # 2,000 bytes in fp16 against an L2 of 1,999
    (1000, 2000, False),  # exactly the L2: they fit
    (1000, 4000, False),
])
def test_weights_are_cold_where_the_models_fp16_parameters_exceed_l2(parameters, l2_bytes, cold):
    model = torch.nn.Sequential(torch.nn.Linear(10, 90, bias=False), torch.nn.Linear(parameters - 900, 1, bias=False))
    assert weights_cold(model, l2_bytes) is cold


@pytest.mark.parametrize("weight_bytes, l2_bytes, copies", [
    (10, 50, 10),  # 2 x 50 / 10: the other nine copies hold 90 bytes, more than the L2 twice over less one copy
    (30, 50, 4),  # 100 / 30 rounded up
    (100, 50, 2),  # one weight larger than the L2: two copies evict each other
    (1, 10**6, WEIGHT_COPIES_MAX),  # a tiny weight: the copies are capped
])
def test_weight_copies_hold_twice_the_l2(weight_bytes, l2_bytes, copies):
    assert weight_copies(weight_bytes, l2_bytes) == copies


def test_weight_packs_share_every_tensor_but_the_weight():
    tensors = {TENSOR_UIDS["x"]: torch.randn(4), TENSOR_UIDS["w"]: torch.randn(8), TENSOR_UIDS["y"]: torch.empty(4)}
    packs = weight_packs(tensors, TENSOR_UIDS["w"], l2_bytes=64)  # 32 bytes of weight: 4 copies hold 128
    assert len(packs) == 4 and packs[0] is tensors
    weights = [pack[TENSOR_UIDS["w"]] for pack in packs]
    assert len({w.data_ptr() for w in weights}) == 4
    assert all(torch.equal(w, tensors[TENSOR_UIDS["w"]]) for w in weights)
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


@pytest.mark.parametrize("sig, copies", [(POINTWISE, 1), (COLD, 5)])
def test_a_library_tactic_of_a_cold_signature_runs_one_call_per_weight_copy(monkeypatch, sig, copies):
    weight_bytes = 32 * 64 * 2
    monkeypatch.setattr(conv_tactics, "gpu_l2_bytes", lambda device=None: 2 * weight_bytes + 1)
    built: list[torch.Tensor] = []
    library_conv = conv_tactics.library_conv

    def recording(library, sig, weight, *args, **kwargs):
        built.append(weight)
        return library_conv(library, sig, weight, *args, **kwargs)

    ran: list[torch.Tensor] = []
    monkeypatch.setattr(conv_tactics, "library_conv", recording)
    monkeypatch.setattr(conv_tactics, "time_captured", lambda run: (ran.append(run()), 40.0)[1])
    assert conv_tactics.time_library(CUBLASLT, sig, stand_in_quantizer, "cpu") == 40.0 / copies
    assert len(built) == copies and len({w.data_ptr() for w in built}) == copies
    (out,) = ran
    assert out.shape == sig.output_shape()
