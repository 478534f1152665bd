"""Simulated FP8 compared fairly: one graph for every variant, weights quantized once, layers labelled as simulated."""

from types import SimpleNamespace

import pytest
import torch

from builders.backend import BackendContext
from builders.pytorch.torch_backend import TorchBackend
from builders.pytorch.variant_modules import variant_module
from sessions.analyses import captions
from sessions.analyses.summary import summarize_session
from sessions.documents.model import Layer, Recipe, Session, Study, Variant
from sessions.documents.plan import StudyPlan, TimingPlan, parse_variants
from sessions.reports.views import session_variant_table
from tests.models import resnet_with_random_batchnorm

pytest.importorskip("modelopt")


CALIBRATION = torch.randn(4, 3, 64, 64, generator=torch.Generator().manual_seed(1))


def build_study(variants: str, recipes: list[str]):
    """The variants as the PyTorch backend builds them for one study, on the CPU: (plan, build results)."""
    plan = StudyPlan(model="test_resnet", backend="torch", device="cpu", variants=parse_variants(variants, recipes, []),
                     batch=1, timing=TimingPlan(0.0, 1, 1), tracer="none")
    model = SimpleNamespace(name="test_resnet", module=resnet_with_random_batchnorm())
    backend = TorchBackend(BackendContext(plan, model, CALIBRATION[:1]))
    return plan, [backend.build(v, CALIBRATION) for v in plan.variants]


@pytest.fixture(scope="module")
def study():
    return build_study("fp32,bf16,fp8", ["all", "all-per-tensor"])


def test_every_variant_runs_the_same_folded_graph(study):
    _, results = study
    folded = {r.variant.name: r.variant.batchnorm_folded for r in results}
    assert len(set(folded.values())) == 1 and next(iter(folded.values())) > 0, folded
    for result in results:
        kinds = {layer.kind for layer in result.engine.layers()}
        assert not any("BatchNorm" in kind for kind in kinds), (result.variant.name, kinds)


def test_a_row_is_the_same_graph_whatever_the_variants_beside_it(study):
    """BatchNorm is folded in a study without an FP8 variant, and in one with another recipe, as in a study with
    `all`: a variant's graph never depends on its neighbours."""
    _, with_fp8 = study
    for variants, recipes in (("fp32,bf16", []), ("bf16,fp8", ["pointwise"])):
        _, results = build_study(variants, recipes)
        by_name = {r.variant.name: r for r in results}
        assert by_name["bf16"].variant.batchnorm_folded == with_fp8[1].variant.batchnorm_folded > 0
        assert [layer.kind for layer in by_name["bf16"].engine.layers()] == \
            [layer.kind for layer in with_fp8[1].engine.layers()]


def test_fp8_forward_runs_no_weight_quantizer_and_stores_quantized_weights(study):
    _, results = study
    fp8 = next(r for r in results if r.variant.name == "fp8-all")
    module = fp8.engine.module
    calls: list[str] = []
    hooks = [quantizer.register_forward_hook(
                 lambda m, args, out, name=name: calls.append(name) if m.is_enabled else None)
             for name, quantizer in module.named_modules() if name.endswith("weight_quantizer")]
    assert hooks
    fp8.engine.run_once()
    assert calls == []
    layers = dict(module.named_modules())
    for path in fp8.variant.recipe.quantized:
        layer = layers[path]
        amax = layer.weight_quantizer.amax.reshape(-1, *([1] * (layer.weight.dim() - 1)))
        codes = layer.weight * (448 / amax)
        on_grid = codes.to(torch.float8_e4m3fn).float()
        torch.testing.assert_close(codes, on_grid, rtol=1e-5, atol=1e-5)


def test_baked_weights_compute_what_per_call_quantization_computed(study):
    plan, results = study
    fp8 = next(r for r in results if r.variant.name == "fp8-all")
    source = results[0].engine.module  # the fp32 variant is the folded module every variant starts from
    per_call = variant_module(source, plan.variants[2], CALIBRATION, torch.float32)
    assert any(q.is_enabled for name, q in per_call.module.named_modules() if name.endswith("weight_quantizer"))
    with torch.no_grad():
        torch.testing.assert_close(fp8.engine.module(CALIBRATION), per_call.module(CALIBRATION), rtol=1e-5, atol=1e-5)


def test_simulated_layers_record_the_precision_their_kernels_run(study):
    _, results = study
    fp8 = next(r for r in results if r.variant.name == "fp8-all")
    layers = [layer for layer in fp8.engine.layers() if layer.quantized]
    assert {layer.name for layer in layers} == set(fp8.variant.recipe.quantized)
    assert {layer.precision for layer in layers} == {"fp32"}
    assert {captions.layer_precision(layer) for layer in layers} == {"fp32, simulated fp8"}


def _session(folded: dict[str, int]) -> Session:
    study = Study(model="m", source="timm", input_shape=[3, 8, 8], batch=1, command=[], created="", backend="torch",
                  device="cpu", tool_version="0")
    variants = [Variant(name=name, backend="torch", precision="fp8" if name.startswith("fp8") else name, device="cpu",
                        batchnorm_folded=count) for name, count in folded.items()]
    return Session(study=study, environment=None, method=None, variants=variants)  # type: ignore[arg-type]


def test_a_variant_table_whose_variants_fold_differently_says_so():
    unequal = captions.session_caveats(_session({"fp16": 0, "fp8-all": 157}))
    assert any("BatchNorm folded" in line and "fp16 0" in line and "fp8-all 157" in line for line in unequal)
    equal = captions.session_caveats(_session({"fp16": 157, "fp8-all": 157}))
    assert [line for line in equal if "BatchNorm" in line] == [captions.EQUAL_GRAPHS.format(count=157)]
    assert not any("BatchNorm" in line for line in captions.session_caveats(_session({"fp16": 0, "fp8-all": 0})))


def test_variant_table_shows_the_fp8_weight_size():
    session = _session({"fp16": 0, "fp8-all": 0})
    session.variants[1].recipe = Recipe(method="", number_format="", layout="all", exclude_patterns=[], quantized=["a"],
                                        excluded=[], scales="", calibration_source="", calibration_count=1,
                                        weight_bytes_base=4 << 20, weight_bytes_fp8=1 << 20)
    table = session_variant_table(session)
    column = table.labels.index("FP8 weights MiB")
    assert [row[column] for row in table.rows] == [None, 1.0]
    assert [s.fp8_weight_mib for s in summarize_session(session)] == [None, 1.0]


def test_layer_precision_label_of_a_real_fp8_layer_is_its_precision():
    assert captions.layer_precision(Layer(name="x", kind="Conv", precision="fp8")) == "fp8"
