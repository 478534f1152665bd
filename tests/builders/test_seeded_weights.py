"""Seeded random weights kept between studies: a later study gets exactly what building the model gives."""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import time
from pathlib import Path

import numpy as np
import pytest
import timm
import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from builders.models import seeded_weights
from builders.models.catalog import LoadedModel
from builders.models.meta_build import meta_device
from builders.models.seeded_weights import SeededWeights


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
        # path by alignment: weights that view one file buffer gave senet154 outputs a few ulp apart on the CPU)
        assert storage.nbytes() == tensor.untyped_storage().nbytes(), name
        assert storage.data_ptr() % 64 == tensor.untyped_storage().data_ptr() % 64, name
        assert have[name].stride() == tensor.stride(), name


def kept_once(folder, name: str, seed: int, build=None) -> SeededWeights:
    cache = SeededWeights(folder)
    cache.load(name, seed, build=build)
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


def digest_of(tensors: dict[str, torch.Tensor]) -> str:
    """The documented digest of kept weights, computed here with numpy: per tensor in name order, `NAME\nDTYPE\n
    SHAPE\n` and the SHA-256 of its bytes."""
    digest = hashlib.sha256()
    for name in sorted(tensors):
        tensor = tensors[name]
        digest.update(f"{name}\n{tensor.dtype}\n{list(tensor.shape)}\n".encode())
        digest.update(hashlib.sha256(np.ascontiguousarray(tensor.numpy()).tobytes()).digest())
    return digest.hexdigest()


def metadata_of(path: Path) -> dict[str, str]:
    with safe_open(path, "pt") as kept:
        return kept.metadata()


def resave(path: Path, tensors: dict[str, torch.Tensor], digest: str | None = None) -> None:
    """`tensors` saved at `path` with its metadata (where it has any), the digest replaced where given."""
    metadata = metadata_of(path) or {}
    save_file(tensors, path, {**metadata, "digest": digest} if digest else metadata or None)


def test_the_kept_file_is_what_a_later_study_reads(tmp_path):
    cache = kept_once(tmp_path, "test_resnet", 3)
    path = cache.path("test_resnet", 3)
    stored = load_file(path)
    assert metadata_of(path) == {"format": "2", "key": path.stem, "model": "test_resnet", "seed": "3",
                                 "digest": digest_of(stored)}
    stored["fc.bias"] = stored["fc.bias"] + 1
    resave(path, stored, digest_of(stored))  # altered, and its digest with it: the file is what is read
    model = SeededWeights(tmp_path).load("test_resnet", 3)
    module, _ = fresh("test_resnet", 3)
    assert torch.equal(model.module.fc.bias, module.fc.bias + 1)


@pytest.mark.parametrize("damage", ["a flipped byte", "a NaN weight", "another seed's file",
                                    "a link to another seed's"])
def test_kept_weights_that_are_not_what_was_written_for_this_model_and_seed_cost_a_build(tmp_path, damage):
    """Issue 41 H6: a file altered since it was written, or another seed's, is built again and replaced."""
    cache = kept_once(tmp_path, "test_resnet", 5)
    path = cache.path("test_resnet", 5)
    other = kept_once(tmp_path, "test_resnet", 4).path("test_resnet", 4)
    if damage == "a flipped byte":
        data = bytearray(path.read_bytes())
        data[-3] ^= 0x10
        path.write_bytes(bytes(data))
    elif damage == "a NaN weight":
        stored = load_file(path)
        stored["fc.bias"][0] = float("nan")
        resave(path, stored)
    elif damage == "another seed's file":
        path.write_bytes(other.read_bytes())
    else:
        path.unlink()
        path.symlink_to(other)
    again = SeededWeights(tmp_path)
    model = again.load("test_resnet", 5)
    after = torch.get_rng_state()
    module, state = fresh("test_resnet", 5)
    assert_same(module, model.module)
    assert torch.equal(after, state)
    assert again.writer is not None
    again.writer.join()
    assert not path.is_symlink() and metadata_of(path)["digest"] == digest_of(load_file(path)) and metadata_of(path)[
        "seed"] == "5"


def test_a_kept_generator_state_torch_refuses_costs_a_build_and_is_replaced(tmp_path):
    """Issue 41 M2: a state of the right size and dtype that torch refuses (all zeros) is a miss, not a traceback."""
    cache = kept_once(tmp_path, "test_resnet", 9)
    path = cache.path("test_resnet", 9)
    stored = load_file(path)
    stored[seeded_weights.GENERATOR_STATE] = torch.zeros_like(stored[seeded_weights.GENERATOR_STATE])
    resave(path, stored, digest_of(stored))
    again = SeededWeights(tmp_path)
    model = again.load("test_resnet", 9)
    after = torch.get_rng_state()
    module, state = fresh("test_resnet", 9)
    assert_same(module, model.module)
    assert torch.equal(after, state)
    assert again.writer is not None
    again.writer.join()
    assert torch.equal(load_file(path)[seeded_weights.GENERATOR_STATE], state)


def test_a_seeded_weights_folder_that_is_a_link_is_not_written_through(tmp_path):
    """Issue 41 L8: the cache's own folder made a symbolic link elsewhere: nothing is written into its target."""
    target = tmp_path / "elsewhere"
    target.mkdir()
    (tmp_path / "weights").symlink_to(target)
    cache = SeededWeights(tmp_path / "weights")
    model = cache.load("test_resnet", 6)
    if cache.writer is not None:
        cache.writer.join()
    assert list(target.iterdir()) == []
    assert_same(fresh("test_resnet", 6)[0], model.module)


@pytest.mark.parametrize("damage", ["truncated", "another model", "no generator state", "another shape"])
def test_a_file_that_does_not_fit_is_built_again_and_replaced(tmp_path, damage):
    cache = kept_once(tmp_path, "test_resnet", 5)
    path = cache.path("test_resnet", 5)
    stored = load_file(path)
    if damage == "truncated":
        path.write_bytes(path.read_bytes()[:1000])
    elif damage == "another model":
        torch.manual_seed(0)
        save_file({**tensors(timm.create_model("test_vit")), seeded_weights.GENERATOR_STATE: torch.get_rng_state()},
                  path)
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

    def __init__(self, tied: bool = False, attribute: bool = False, listed: bool = False) -> None:
        super().__init__()
        self.first = torch.nn.Linear(4, 4)
        self.second = torch.nn.Linear(4, 4)
        self.second.bias.requires_grad_(False)
        self.register_buffer("table", torch.randn(3), persistent=False)
        self.transposed = torch.nn.Parameter(torch.randn(3, 5).t())  # strides (1, 5): kept as the constructor made them
        self.register_buffer("none_yet", torch.empty(0))  # empty tensors all sit at storage address 0
        self.register_buffer("nor_here", torch.empty(0, 3))
        if tied:
            self.second.weight = self.first.weight
        if attribute:
            self.scale = torch.randn(2)
        if listed:
            self.scales = [torch.randn(2)]


def _builder(**options):
    def build(name, construct, checkpoint):
        with construct():
            module = _Custom(**options)
        return LoadedModel(name=name, source="timm", module=module, input_size=(4,))
    return build


def _fresh_custom(seed: int, **options) -> torch.nn.Module:
    torch.manual_seed(seed)
    return _Custom(**options)


def test_non_persistent_buffers_frozen_parameters_strides_and_empty_tensors_are_kept_as_built(tmp_path):
    kept_once(tmp_path, "custom", 11, _builder())
    assert list(tmp_path.glob("*.safetensors"))
    model = SeededWeights(tmp_path).load("custom", 11, build=_builder())
    assert_same(_fresh_custom(11), model.module)


def test_a_plain_tensor_attribute_left_on_the_meta_device_makes_the_model_built_for_real(tmp_path):
    kept_once(tmp_path, "custom", 2, _builder(attribute=True))
    model = SeededWeights(tmp_path).load("custom", 2, build=_builder(attribute=True))
    expected = _fresh_custom(2, attribute=True)
    assert not model.module.scale.is_meta
    assert torch.equal(model.module.scale, expected.scale)
    assert_same(expected, model.module)


def test_tied_weights_are_not_kept(tmp_path):
    cache = SeededWeights(tmp_path)
    model = cache.load("custom", 4, build=_builder(tied=True))
    assert cache.writer is None and not list(tmp_path.iterdir())
    assert model.module.second.weight is model.module.first.weight


def test_models_read_from_files_are_never_kept(tmp_path):
    folder = tmp_path / "hf-model"  # a folder name: a Hugging Face model whose weights are the folder's
    folder.mkdir()
    calls = []

    def build(name, construct, checkpoint):
        calls.append(construct)
        return _builder()(name, construct, checkpoint)

    cache = SeededWeights(tmp_path / "cache")
    cache.load(str(folder), 1, build=build)
    cache.load("custom", 1, tmp_path / "weights.safetensors", build)  # a checkpoint: its weights are the file's
    cache.load(str(folder), 1, build=build)
    assert cache.writer is None and not (tmp_path / "cache").exists()
    assert [c.__name__ for c in calls] == ["nullcontext"] * 3


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
    from builders.models import structure as model_structure
    from builders.recipes import fp8 as fp8_recipes
    from sessions.documents.plan import parse_variants

    if weights == "kept":
        kept_once(tmp_path, "test_resnet", 9)
    fp8_recipes._structure_of.cache_clear()
    analysed = []
    real = model_structure._analyse
    monkeypatch.setattr(model_structure, "_analyse",
                        lambda module, example: analysed.append(module) or real(module, example))
    fp8_recipes.preflight("test_resnet", None, parse_variants("fp8", ["all"], []), {"fp8-all"})
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

    def partial_then_fail(tensors, filename, metadata=None):
        Path(filename).write_bytes(b"partial")
        raise OSError("disk full")

    monkeypatch.setattr(safetensors.torch, "save_file", partial_then_fail)
    cache = SeededWeights(tmp_path)
    cache.load("test_resnet", 6)
    cache.writer.join()
    assert not list(tmp_path.iterdir())


def test_a_tensor_in_a_list_attribute_left_on_the_meta_device_makes_the_model_built_for_real(tmp_path):
    kept_once(tmp_path, "custom", 2, _builder(listed=True))
    model = SeededWeights(tmp_path).load("custom", 2, build=_builder(listed=True))
    assert torch.equal(model.module.scales[0], _fresh_custom(2, listed=True).scales[0])


def test_a_file_that_fits_a_model_the_meta_device_cannot_build_is_not_written_again(tmp_path):
    def refuses_meta(name, construct, checkpoint):
        if construct is meta_device:
            raise NotImplementedError("no meta kernel")
        return _builder()(name, construct, checkpoint)

    kept_once(tmp_path, "custom", 8, refuses_meta)
    again = SeededWeights(tmp_path)
    model = again.load("custom", 8, build=refuses_meta)
    assert again.writer is None
    assert_same(_fresh_custom(8), model.module)


@pytest.mark.filterwarnings("error::pytest.PytestUnhandledThreadExceptionWarning")
def test_a_damaged_generator_state_or_an_unreadable_folder_costs_a_build_not_the_study(tmp_path, monkeypatch):
    cache = kept_once(tmp_path, "test_resnet", 12)
    path = cache.path("test_resnet", 12)
    stored = load_file(path)
    stored[seeded_weights.GENERATOR_STATE] = torch.zeros(10, dtype=torch.uint8)
    save_file(stored, path)
    model = SeededWeights(tmp_path).load("test_resnet", 12)
    module, state = fresh("test_resnet", 12)
    assert_same(module, model.module)
    real_is_file = Path.is_file

    def unreadable(self):
        if self.parent == tmp_path:
            raise PermissionError(13, "Permission denied", str(self))
        return real_is_file(self)

    monkeypatch.setattr(Path, "is_file", unreadable)
    model = SeededWeights(tmp_path).load("test_resnet", 12)
    assert torch.equal(torch.get_rng_state(), state)
    assert_same(module, model.module)


def test_a_second_load_while_the_file_is_written_waits_for_it_and_writes_nothing(tmp_path, monkeypatch):
    import threading

    import safetensors.torch

    release = threading.Event()
    real = safetensors.torch.save_file

    def slow(tensors, filename, metadata=None):
        release.wait(10)
        real(tensors, filename, metadata)

    monkeypatch.setattr(safetensors.torch, "save_file", slow)
    first = SeededWeights(tmp_path)
    first.load("test_resnet", 13)
    threading.Timer(0.3, release.set).start()
    second = SeededWeights(tmp_path)
    model = second.load("test_resnet", 13)
    assert release.is_set() and second.writer is None
    assert_same(fresh("test_resnet", 13)[0], model.module)


def test_a_partial_file_of_a_process_that_died_is_removed_by_the_next_write(tmp_path):
    import subprocess
    import sys

    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], check=True, capture_output=True,
                           text=True)
    dead = tmp_path / f".{'0' * 64}.safetensors.{ended.stdout.strip()}.abc.tmp"
    alive = tmp_path / f".{'1' * 64}.safetensors.{os.getpid()}.abc.tmp"
    dead.write_bytes(b"partial")
    alive.write_bytes(b"partial")
    kept_once(tmp_path, "test_resnet", 14)
    assert not dead.exists() and alive.exists()


def test_the_key_follows_the_cpu_the_torch_build_and_the_model_code(monkeypatch):
    key = seeded_weights.weights_key("test_resnet", 1)
    with monkeypatch.context() as patch:
        patch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "DEFAULT")
        assert seeded_weights.weights_key("test_resnet", 1) != key
    with monkeypatch.context() as patch:
        patch.setattr(seeded_weights.platform, "machine", lambda: "aarch64")
        assert seeded_weights.weights_key("test_resnet", 1) != key
    with monkeypatch.context() as patch:
        patch.setattr(torch.version, "git_version", "0" * 40)
        assert seeded_weights.weights_key("test_resnet", 1) != key
    with monkeypatch.context() as patch:
        patch.setattr(torch, "get_default_dtype", lambda: torch.float64)
        assert seeded_weights.weights_key("test_resnet", 1) != key
    assert seeded_weights.weights_key("test_resnet", 1) == key


def test_the_digest_is_computed_once_per_file_and_again_after_any_write(tmp_path, monkeypatch):
    """H6 review: a kept file is hashed at its first load in a process, not at every load; a byte flipped since, its
    modification time set back as it was, is hashed again (its change time moved) and costs a build."""
    cache = kept_once(tmp_path, "test_resnet", 6)
    path = cache.path("test_resnet", 6)
    hashed: list[int] = []
    real = seeded_weights.weights_digest
    monkeypatch.setattr(seeded_weights, "weights_digest", lambda t: hashed.append(len(t)) or real(t))
    monkeypatch.setattr(seeded_weights, "SETTLED_NS", 0)  # the write above is long past
    module, _ = fresh("test_resnet", 6)
    for _ in range(3):
        assert_same(module, SeededWeights(tmp_path).load("test_resnet", 6).module)
    assert len(hashed) == 1
    times = path.stat()
    data = bytearray(path.read_bytes())
    data[-3] ^= 0x10
    time.sleep(0.05)  # past the coarse clock's tick: the write gets a change time of its own
    path.write_bytes(bytes(data))
    os.utime(path, ns=(times.st_atime_ns, times.st_mtime_ns))
    again = SeededWeights(tmp_path)
    assert_same(module, again.load("test_resnet", 6).module)
    assert again.writer is not None
    again.writer.join()
    assert len(hashed) == 3  # the flipped file's tensors, refused; then the build's, written again


def test_a_check_of_a_file_changed_just_before_is_not_kept(tmp_path, monkeypatch):
    """A write in the same clock tick as a check may leave the change time as it was: such a check is not kept."""
    cache = kept_once(tmp_path, "test_resnet", 6)
    hashed: list[int] = []
    real = seeded_weights.weights_digest
    monkeypatch.setattr(seeded_weights, "weights_digest", lambda t: hashed.append(len(t)) or real(t))
    for _ in range(2):
        SeededWeights(tmp_path).load("test_resnet", 6)
    assert len(hashed) == 2 and cache.path("test_resnet", 6) not in seeded_weights._VERIFIED
