"""Seeded random weights kept between studies: a later study gets exactly what building the model gives."""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

import pytest
import timm
import torch
from safetensors.torch import load_file, save_file

from builders import seeded_weights
from builders.models import LoadedModel
from builders.seeded_weights import SeededWeights


def fresh(name: str, seed: int) -> tuple[torch.nn.Module, torch.Tensor]:
    """What a study built before weights were kept: timm itself, right after torch.manual_seed."""
    torch.manual_seed(seed)
    module = timm.create_model(name, pretrained=False).eval()
    return module, torch.get_rng_state()


def tensors(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {**dict(module.named_parameters()), **dict(module.named_buffers())}  # buffers: persistent or not


def assert_same(expected: torch.nn.Module, got: torch.nn.Module) -> None:
    want, have = tensors(expected), tensors(got)
    assert want.keys() == have.keys()
    for name, tensor in want.items():
        assert type(have[name]) is type(tensor), name
        assert have[name].dtype == tensor.dtype and have[name].requires_grad == tensor.requires_grad, name
        assert torch.equal(have[name], tensor), name
        storage = have[name].untyped_storage()  # a storage of its own, aligned as a build's: CPU kernels choose their
        # path by alignment (senet154 on the CPU: outputs 3e-8 apart with the weights views of one file buffer)
        assert storage.nbytes() == tensor.untyped_storage().nbytes(), name
        assert storage.data_ptr() % 64 == tensor.untyped_storage().data_ptr() % 64, name


def kept_once(folder, name: str, seed: int, build=None) -> SeededWeights:
    cache = SeededWeights(folder)
    cache.load(name, seed, build)
    assert cache.writer is not None
    cache.writer.join()
    return cache


@pytest.mark.parametrize("name", ["test_resnet", "test_vit"])
def test_a_later_study_gets_the_weights_outputs_and_generator_state_a_build_gives(tmp_path, name):
    kept_once(tmp_path, name, 7)
    model = SeededWeights(tmp_path).load(name, 7)
    state = torch.get_rng_state()
    module, fresh_state = fresh(name, 7)
    assert torch.equal(state, fresh_state)
    assert_same(module, model.module)
    assert not model.module.training
    example = torch.randn(2, *model.input_size)
    with torch.no_grad():  # bit for bit: CPU kernels choose their path by the weights' alignment
        assert torch.equal(module(example), model.module(example))


def test_the_kept_file_is_what_a_later_study_reads(tmp_path):
    cache = kept_once(tmp_path, "test_resnet", 3)
    path = cache.path("test_resnet", 3)
    stored = load_file(path)
    stored["fc.bias"] = stored["fc.bias"] + 1
    save_file(stored, path)
    model = SeededWeights(tmp_path).load("test_resnet", 3)
    module, _ = fresh("test_resnet", 3)
    assert torch.equal(model.module.fc.bias, module.fc.bias + 1)


@pytest.mark.parametrize("damage", ["truncated", "another model", "no generator state", "another shape"])
def test_a_file_that_does_not_fit_is_built_again_and_replaced(tmp_path, damage):
    cache = kept_once(tmp_path, "test_resnet", 5)
    path = cache.path("test_resnet", 5)
    stored = load_file(path)
    if damage == "truncated":
        path.write_bytes(path.read_bytes()[:1000])
    elif damage == "another model":
        torch.manual_seed(0)
        save_file({**tensors(timm.create_model("test_vit")), seeded_weights.GENERATOR_STATE: torch.get_rng_state()}, path)
    elif damage == "no generator state":
        del stored[seeded_weights.GENERATOR_STATE]
        save_file(stored, path)
    else:
        stored["fc.bias"] = torch.zeros(stored["fc.bias"].numel() + 1)
        save_file(stored, path)
    again = SeededWeights(tmp_path)
    model = again.load("test_resnet", 5)
    state = torch.get_rng_state()
    module, fresh_state = fresh("test_resnet", 5)
    assert_same(module, model.module)
    assert torch.equal(state, fresh_state)
    assert again.writer is not None
    again.writer.join()
    assert load_file(path).keys() == {*tensors(module), seeded_weights.GENERATOR_STATE}


class _Custom(torch.nn.Module):
    """A non-persistent buffer, a frozen parameter, and optionally a tied weight or a plain tensor attribute."""

    def __init__(self, tied: bool = False, attribute: bool = False) -> None:
        super().__init__()
        self.first = torch.nn.Linear(4, 4)
        self.second = torch.nn.Linear(4, 4)
        self.second.bias.requires_grad_(False)
        self.register_buffer("table", torch.randn(3), persistent=False)
        if tied:
            self.second.weight = self.first.weight
        if attribute:
            self.scale = torch.randn(2)


def _builder(**options):
    def build(name, construct):
        with construct():
            module = _Custom(**options)
        return LoadedModel(name=name, source="timm", module=module, input_size=(4,))
    return build


def _fresh_custom(seed: int, **options) -> torch.nn.Module:
    torch.manual_seed(seed)
    return _Custom(**options)


def test_non_persistent_buffers_and_frozen_parameters_are_kept_as_built(tmp_path):
    kept_once(tmp_path, "custom", 11, _builder())
    model = SeededWeights(tmp_path).load("custom", 11, _builder())
    assert_same(_fresh_custom(11), model.module)


def test_a_plain_tensor_attribute_left_on_the_meta_device_makes_the_model_built_for_real(tmp_path):
    kept_once(tmp_path, "custom", 2, _builder(attribute=True))
    model = SeededWeights(tmp_path).load("custom", 2, _builder(attribute=True))
    expected = _fresh_custom(2, attribute=True)
    assert not model.module.scale.is_meta
    assert torch.equal(model.module.scale, expected.scale)
    assert_same(expected, model.module)


def test_tied_weights_are_not_kept(tmp_path):
    cache = SeededWeights(tmp_path)
    model = cache.load("custom", 4, _builder(tied=True))
    assert cache.writer is None and not list(tmp_path.iterdir())
    assert model.module.second.weight is model.module.first.weight


def test_models_read_from_files_are_never_kept(tmp_path):
    folder = tmp_path / "hf-model"  # a folder name: a Hugging Face model whose weights are the folder's
    folder.mkdir()
    calls = []

    def build(name, construct):
        calls.append(construct)
        return _builder()(name, construct)

    cache = SeededWeights(tmp_path / "cache")
    cache.load(str(folder), 1, build)
    cache.load(str(folder), 1, build)
    assert cache.writer is None and not (tmp_path / "cache").exists()
    assert [c.__name__ for c in calls] == ["nullcontext", "nullcontext"]


def test_the_key_follows_the_seed_the_model_and_the_versions_that_build_it(monkeypatch):
    keys = {seeded_weights.weights_key("test_resnet", 1), seeded_weights.weights_key("test_resnet", 2),
            seeded_weights.weights_key("test_vit", 1)}
    real = importlib.metadata.version
    monkeypatch.setattr(seeded_weights.importlib.metadata, "version",
                        lambda package: "0.0" if package == "timm" else real(package))
    keys.add(seeded_weights.weights_key("test_resnet", 1))
    assert len(keys) == 4


@pytest.mark.parametrize("weights", ["built", "kept"])
def test_the_study_fills_the_module_the_preflight_built_and_finds_its_structure_once(tmp_path, monkeypatch, weights):
    from builders import fp8_recipes, model_structure
    from sessions.documents.plan import parse_variants

    if weights == "kept":
        kept_once(tmp_path, "test_resnet", 9)
    fp8_recipes._structure_of.cache_clear()
    analysed = []
    real = model_structure._analyse
    monkeypatch.setattr(model_structure, "_analyse", lambda module, example: analysed.append(module) or real(module, example))
    fp8_recipes.preflight("test_resnet", None, parse_variants("fp8", ["all"], []), True)
    [meta_module] = analysed
    model = SeededWeights(tmp_path).load("test_resnet", 9)
    state = torch.get_rng_state()
    assert model.module is meta_module
    model_structure.model_structure(model.module, torch.zeros(1, *model.input_size))
    assert analysed == [meta_module]
    module, fresh_state = fresh("test_resnet", 9)
    assert_same(module, model.module)
    assert torch.equal(state, fresh_state)
    assert SeededWeights(tmp_path).load("test_resnet", 9).module is not meta_module  # offered once


@pytest.mark.filterwarnings("error::pytest.PytestUnhandledThreadExceptionWarning")  # the writer raises nothing
def test_a_cache_that_cannot_be_written_leaves_no_file_and_the_model_as_built(tmp_path):
    (tmp_path / "taken").write_text("a file where the cache folder would be")
    cache = SeededWeights(tmp_path / "taken" / "weights")
    model = cache.load("test_resnet", 6)
    assert cache.writer is not None
    cache.writer.join()
    module, _ = fresh("test_resnet", 6)
    assert_same(module, model.module)
    assert list(tmp_path.iterdir()) == [tmp_path / "taken"]


@pytest.mark.filterwarnings("error::pytest.PytestUnhandledThreadExceptionWarning")
def test_a_failed_write_removes_its_partial_file(tmp_path, monkeypatch):
    import safetensors.torch

    def partial_then_fail(tensors, filename):
        Path(filename).write_bytes(b"partial")
        raise OSError("disk full")

    monkeypatch.setattr(safetensors.torch, "save_file", partial_then_fail)
    cache = SeededWeights(tmp_path)
    cache.load("test_resnet", 6)
    cache.writer.join()
    assert not list(tmp_path.iterdir())
