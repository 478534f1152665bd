"""The FP8 calibration cache of the cuDNN engine: a twin made by ModelOpt on the CPU, kept, and read back exactly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from builders.engine.twin import Twin, TwinCache, TwinFit, model_digest, tensors_digest, twin_key
from builders.pytorch.variant_modules import variant_module
from builders.recipes.fp8 import get_recipe
from sessions.documents.plan import VariantPlan

pytestmark = pytest.mark.slow  # ModelOpt calibrates a small model on the CPU (seconds)


def small_model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.BatchNorm2d(16), torch.nn.ReLU(),
        torch.nn.Conv2d(16, 32, 1), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(),
        torch.nn.Linear(32, 16),
    ).eval()


@pytest.fixture(scope="module")
def made():
    model = small_model()
    calibration = torch.randn(4, 3, 16, 16)
    key = twin_key(model_digest(model), {"name": "all"}, (), tensors_digest([calibration]), torch.float16)
    module = variant_module(model, VariantPlan("fp8", "all", ()), calibration, torch.float16)
    return model, calibration, key, Twin.of(key, module)


def fit_of(made) -> TwinFit:
    """The fit of the reference model: its layers' channels and one image's output (16 classes)."""
    return TwinFit.of(made[0], (16,))


def test_a_kept_twin_reads_back_exactly_without_modelopt(made, tmp_path):
    _, _, key, twin = made
    batches = [torch.randn(3, 3, 16, 16), torch.randn(2, 3, 16, 16)]
    expected = twin.infer(batches, "cpu")
    cache = TwinCache(tmp_path)
    cache.save(twin)

    loaded = cache.load(key, lambda: pytest.fail("ModelOpt asked for a cached twin"), fit_of(made))
    assert loaded is not None and loaded.cached
    assert loaded.quantized == twin.quantized and loaded.recipe == twin.recipe
    assert loaded.scales.keys() == twin.scales.keys()
    for path, (x_scale, w_scale) in twin.scales.items():
        assert loaded.scales[path][0] == x_scale and torch.equal(loaded.scales[path][1], w_scale.float())
    assert torch.equal(loaded.infer(batches, "cpu"), expected)


def test_images_the_cache_has_no_outputs_for_are_run_and_kept(made, tmp_path):
    _, _, key, twin = made
    cache = TwinCache(tmp_path)
    cache.save(twin)
    made_again: list[int] = []

    def make():
        made_again.append(1)
        return twin._module

    loaded = cache.load(key, make, fit_of(made))
    loaded.saved = cache.save
    fresh = [torch.randn(2, 3, 16, 16)]
    outputs = loaded.infer(fresh, "cpu")
    assert made_again == [1] and torch.equal(outputs, twin.infer(fresh, "cpu"))
    assert tensors_digest([torch.cat(fresh)]) in json.loads((tmp_path / f"{key}.json").read_text())["outputs"]


def test_the_key_follows_the_weights_the_images_and_the_recipe(made):
    model, calibration, key, _ = made
    recipe = {"name": "all"}
    assert twin_key(model_digest(small_model()), recipe, (), tensors_digest([calibration]), torch.float16) == key
    nudged = small_model()
    with torch.no_grad():
        weight = nudged[0].weight
        weight[0, 0, 0, 0] = torch.nextafter(weight[0, 0, 0, 0], torch.tensor(1.0))
    assert twin_key(model_digest(nudged), recipe, (), tensors_digest([calibration]), torch.float16) != key
    assert twin_key(model_digest(model), recipe, (), tensors_digest([calibration + 1e-6]), torch.float16) != key
    assert twin_key(model_digest(model), recipe, ("*.3",), tensors_digest([calibration]), torch.float16) != key
    other = json.loads(json.dumps(get_recipe("no-se").__dict__, default=str))
    assert twin_key(model_digest(model), other, (), tensors_digest([calibration]), torch.float16) != key


def _kept(made, folder) -> tuple[TwinCache, Path, dict]:
    """The made twin kept in a cache in `folder`: the cache, the file and its document."""
    _, _, key, twin = made
    cache = TwinCache(folder)
    cache.save(twin)
    path = folder / f"{key}.json"
    return cache, path, json.loads(path.read_text())


def test_a_damaged_or_foreign_cache_file_is_a_miss(made, tmp_path):
    key = made[2]
    cache, path, doc = _kept(made, tmp_path)
    path.write_text(json.dumps({**doc, "key": "another"}))
    assert cache.load(key, lambda: pytest.fail("made"), fit_of(made)) is None
    path.write_text(path.read_text()[:-40])
    assert cache.load(key, lambda: pytest.fail("made"), fit_of(made)) is None
    assert cache.load("absent", lambda: pytest.fail("made"), fit_of(made)) is None


def test_a_cache_folder_that_cannot_be_written_costs_the_cache_only(made, tmp_path):
    _, _, key, twin = made
    blocked = tmp_path / "a file where the folder would be"
    blocked.write_text("")
    cache = TwinCache(blocked)
    cache.save(twin)  # no error: the study goes on without the cache
    assert cache.load(key, lambda: pytest.fail("made"), fit_of(made)) is None


def test_the_background_digest_copies_tensors_on_the_callers_thread_only(monkeypatch):
    """A CUDA call from another thread while the engine captures a CUDA graph breaks the capture: the digest's
    thread must only hash. Its answer is the model's digest."""
    import hashlib
    import threading

    from builders.engine.cudnn_backend import _digest_in_background

    model = small_model()
    copied_on: set[str] = set()
    copy = torch.Tensor.cpu

    def recording_cpu(self, *args, **kwargs):
        copied_on.add(threading.current_thread().name)
        return copy(self, *args, **kwargs)

    monkeypatch.setattr(torch.Tensor, "cpu", recording_cpu)
    answer = _digest_in_background(model).result(timeout=60)
    assert copied_on == {threading.current_thread().name}
    expected = hashlib.sha256(repr(model).encode())  # the digest's rule, restated: name, dtype, shape, bytes
    for name, tensor in [*model.named_parameters(), *model.named_buffers()]:
        expected.update(f"{name}:{tensor.dtype}:{tuple(tensor.shape)}".encode())
        expected.update(tensor.detach().contiguous().numpy().tobytes())
    assert answer == expected.hexdigest()


def test_the_digest_thread_refuses_a_tensor_it_would_have_to_copy():
    from builders.engine.twin import host_digest

    with pytest.raises(ValueError, match="not on the host"):
        host_digest("a model", [("weight", torch.empty(3, device="meta"))])


def test_a_kept_twin_whose_unquantized_layers_are_not_the_models_is_a_miss(made, tmp_path):
    """Its notes name those layers' modules: a kept list that names another model's layers must cost a rebuild."""
    from builders.cache_files import document_digest

    key = made[2]
    cache, path, doc = _kept(made, tmp_path)
    doc["recipe"]["unquantized"] = ["no.such.layer"]
    doc["digest"] = document_digest({k: v for k, v in doc.items() if k != "digest"})
    path.write_text(json.dumps(doc))
    assert cache.load(key, lambda: pytest.fail("made"), fit_of(made)) is None
