"""The cuDNN / cuBLASLt engine's graph capture and lowering of Hugging Face SegFormer-B0 on the CPU (128 x 128,
random weights, no hub): the model traces whole (no module run as one PyTorch call), the `encoder-linears`
recipe's linears become FP8 GEMMs behind quantize layers, and the lowered program computes the model's logits
with the CPU stand-in for the kernels. Expected layers come from the model's module tree and call order."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from builders.engine.build import static_refusals, unexplained_fp16
from builders.engine.graph import TracedModel, trace
from builders.engine.lowering import QUANTIZE_SUFFIX, Program, lower
from builders.models.structure import model_structure
from builders.recipes.fp8 import select
from tests.engine_stand_in import stand_in_engine

pytest.importorskip("transformers")
pytestmark = pytest.mark.slow
INPUT = (1, 3, 128, 128)


def _output_projections(model: torch.nn.Module, x: torch.Tensor) -> set[str]:
    """In each module with three or more linears of its own reading one width (an attention: query, key, value,
    output), the linear called last: the one that reads the attention's result."""
    paths = {id(m): path for path, m in model.named_modules()}
    calls: list[str] = []
    handles = [m.register_forward_pre_hook(lambda m, _args: calls.append(paths[id(m)]))
               for m in model.modules() if isinstance(m, torch.nn.Linear)]
    with torch.no_grad():
        model(x)
    for handle in handles:
        handle.remove()
    found = set()
    for path, module in model.named_modules():
        own = [f"{path}.{name}" for name, child in module.named_children() if isinstance(child, torch.nn.Linear)]
        if len(own) >= 3 and len({module.get_submodule(p.rsplit(".", 1)[1]).in_features for p in own}) == 1:
            found.add(max(own, key=lambda p: max(i for i, called in enumerate(calls) if called == p)))
    return found


Lowered = tuple[torch.nn.Module, torch.Tensor, set[str], TracedModel, Program]


@pytest.fixture(scope="module")
def segformer() -> Lowered:
    from builders.models.catalog import load_model

    torch.manual_seed(0)
    model = load_model(f"hf:segformer-b0-{INPUT[-1]}").module
    x = torch.randn(INPUT)
    structure = model_structure(model, x)
    fp8 = set(select(structure, "encoder-linears", []).quantized)
    keys = {node.path: node.input_key for node in structure.layers}  # one input tensor, one amax: one scale
    traced = trace(model, x)
    program = lower(traced.nodes, fp8, keys, static_refusals(model, fp8))
    return model, x, fp8, traced, program


def test_the_encoder_linears_but_the_attention_outputs_are_fp8_gemms(segformer: Lowered) -> None:
    model, x, fp8, traced, program = segformer
    hf_model: Any = model.model  # transformers' SegformerForSemanticSegmentation inside the logits wrapper
    encoder = hf_model.segformer  # the Hugging Face backbone; the decode head reads its stage outputs
    linears = {f"model.segformer.{path}" for path, m in encoder.named_modules() if isinstance(m, torch.nn.Linear)}
    outputs = _output_projections(model, x)
    expected = linears - outputs
    blocks = sum(hf_model.config.depths)
    assert len(outputs) == blocks and len(expected) == 5 * blocks == 40  # B0: 8 blocks of q, k, v, MLP fc1, fc2
    assert fp8 == expected
    assert traced.leaves == {}
    steps = {step.name: step for step in program.steps}
    assert {s.name for s in program.steps if s.kind == "linear" and s.precision == "fp8"} == expected
    assert all(steps[path].kind == "linear" and steps[path].precision == "fp16" for path in outputs)
    assert unexplained_fp16(program, fp8) == [] and not [s for s in program.steps if s.fallback]
    quantizers = {s.name: s for s in program.steps if s.kind == "quantize"}
    for path in expected:
        assert steps[path].inputs[0] in quantizers, path


def test_layers_reading_one_tensor_share_one_quantize_layer(segformer: Lowered) -> None:
    """Key and value read one tensor: one quantize layer. The query reads it too where no strided convolution
    reduces the keys' sequence (the last stage): then one quantize layer feeds all three."""
    model, _, _, _, program = segformer
    steps = {step.name: step for step in program.steps}
    attentions = {path: m for path, m in model.named_modules() if hasattr(m, "k_proj") and hasattr(m, "v_proj")}
    assert len(attentions) == 8
    for path, attention in attentions.items():
        reduced = any(isinstance(m, torch.nn.Conv2d) for m in attention.modules())
        shared = f"{path}.{'k_proj' if reduced else 'q_proj'}{QUANTIZE_SUFFIX}"
        assert steps[f"{path}.v_proj"].inputs == steps[f"{path}.k_proj"].inputs == (shared,), path
        assert (steps[f"{path}.q_proj"].inputs[0] == shared) == (not reduced), path
    assert len([s for s in program.steps if s.kind == "quantize"]) == 4 * 6 + 3 * 2  # q, kv, fc1, fc2; last stage 3


def test_the_lowered_program_computes_the_models_logits(segformer: Lowered) -> None:
    model, x, _, traced, program = segformer
    with torch.no_grad():
        expected = model(x)
    assert expected.shape == (1, 150, INPUT[-1] // 4, INPUT[-1] // 4)
    torch.testing.assert_close(stand_in_engine(program, traced, x).infer(x), expected, rtol=1e-4, atol=1e-4)


def test_real_fp8_gemms_follow_the_simulated_variant_closer_than_fp16_does() -> None:
    """The engine's own FP8 kernels (torch._scaled_mm, per-tensor scales as the recipe asks, and its quantize) run
    on the CPU: with the scales calibrated by ModelOpt's simulated variant, the real engine's logits are nearer
    the simulated variant's than plain fp16's are, so the FP8 layers quantize as the simulation does."""
    pytest.importorskip("modelopt")
    import copy

    from builders.engine.twin import scales_of
    from builders.models.catalog import load_model
    from builders.pytorch.variant_modules import variant_module
    from sessions.documents.plan import VariantPlan

    torch.manual_seed(0)
    reference = load_model(f"hf:segformer-b0-{INPUT[-1]}").module.eval()
    x = torch.randn(2, *INPUT[1:])
    simulated = variant_module(reference, VariantPlan("fp8", "encoder-linears", ()), torch.randn(4, *INPUT[1:]),
                               torch.float16)
    plain = copy.deepcopy(reference).to(torch.float16).eval()
    fp8 = set(simulated.quantized)
    scales = scales_of(simulated)
    traced = trace(plain, x)
    program = lower(traced.nodes, fp8, {path: round(s[0], 12) for path, s in scales.items()},
                    static_refusals(plain, fp8))
    with torch.no_grad():
        real = stand_in_engine(program, traced, x, scales).infer(x)
        expected = simulated.module(x.half()).float()
        fp16 = plain(x.half()).float()
    assert len(fp8) == 40 and (real - expected).abs().mean() < 0.75 * (fp16 - expected).abs().mean()
