"""A model's seeded random weights, kept in the cache folder after the first build.

A study without a checkpoint builds its model right after `torch.manual_seed(seed)`: the random initialisation
runs on the CPU, one generator, seconds for a large model (1.3 s of a 19 s senet154 study on the H200's host). The
result is a pure function of the model's name, the seed and the code that builds it (for the sources that build from
the name alone, `builders.models.NAME_ONLY_SOURCES`), so it is kept: a later study
makes the model on the meta device (no memory, no initialisation), gives it the kept tensors, and sets torch's CPU
generator to the state the initialisation left, so that whatever draws from it next draws what it would have.

Kept under a SHA-256 of the model name, the seed, the default dtype and the versions of torch, timm and
transformers, in safetensors (never a pickle), with the generator's state beside the tensors. A kept file is used
only where it holds exactly the meta model's parameters and buffers (names, shapes, dtypes) and leaves none of the
model's tensors on the meta device; otherwise, and for models whose tensors share storage (tied weights, which
safetensors does not keep), the model is built as before. Writing happens on a thread.

A caller that has built the model on the meta device already (the recipe preflight, for its structure) offers that
build (`offer_meta_model`); the next load of that model gives it its weights, kept or freshly built, so the study's
model is that very module and its structure (cached per module object by builders.model_structure) is not found
twice.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import json
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any

import torch

from builders import models
from builders.meta_build import meta_device
from builders.models import NAME_ONLY_SOURCES, LoadedModel, model_source
from sessions.documents.errors import InputError
from sessions.documents.paths import cache_dir

GENERATOR_STATE = "__torch_cpu_generator_state__"  # the entry beside the tensors; no module path has this name
BUILDERS = ("torch", "timm", "transformers")  # the packages whose code decides the weights


Builder = Callable[[str, Callable[[], AbstractContextManager[Any]]], LoadedModel]


def _load_model(name: str, construct: Callable[[], AbstractContextManager[Any]]) -> LoadedModel:
    return models.load_model(name, construct=construct)  # looked up when called: tests replace it


def weights_dir() -> Path:
    return cache_dir() / "seeded-weights"


def weights_key(name: str, seed: int) -> str:
    versions = {}
    for package in BUILDERS:
        try:
            versions[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            versions[package] = None
    spec = {"model": name, "seed": seed, "default_dtype": str(torch.get_default_dtype()), "versions": versions}
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()


def _slots(module: torch.nn.Module) -> Iterator[tuple[str, dict, str, torch.Tensor]]:
    """(path, the dict that holds it, its name there, tensor) for every parameter and buffer, persistent or not."""
    for prefix, owner in module.named_modules(remove_duplicate=False):
        for store in (owner._parameters, owner._buffers):
            for attr, tensor in store.items():
                if tensor is not None:
                    yield (f"{prefix}.{attr}" if prefix else attr), store, attr, tensor


_OFFERED: dict[str, LoadedModel] = {}  # one meta-device build, by model name


def offer_meta_model(name: str, model: LoadedModel) -> None:
    """Hands `model`, `name` built on the meta device (builders.meta_build) and not changed since, to the next
    `SeededWeights.load` of `name`. One at a time."""
    _OFFERED.clear()
    _OFFERED[name] = model


def _meta_left(module: torch.nn.Module) -> bool:
    """Whether any tensor the modules hold (parameters, buffers, plain attributes) is still on the meta device."""
    for owner in module.modules():
        held = [*owner._parameters.values(), *owner._buffers.values(), *vars(owner).values()]
        if any(isinstance(t, torch.Tensor) and t.is_meta for t in held):
            return True
    return False


def _fill(module: torch.nn.Module, tensors: dict[str, torch.Tensor], copy: bool) -> bool:
    """Gives the meta-device `module` the values in `tensors` (copies of them where `copy`), each parameter staying a
    parameter with its `requires_grad`; False, `module` untouched, where `tensors` does not hold exactly its parameters
    and buffers with their shapes and dtypes; False also where a tensor of `module` is left on the meta device."""
    slots = list(_slots(module))
    if sorted(p for p, *_ in slots) != sorted(tensors):
        return False
    if any(tensors[p].shape != t.shape or tensors[p].dtype != t.dtype for p, _, _, t in slots):
        return False
    for path, store, attr, tensor in slots:
        value = tensors[path].detach()
        if copy:  # a storage of its own, aligned as a fresh build's (CPU kernels choose their path by alignment: a
            value = value.clone()  # weight that views one file buffer gives the same sums in another order)
        store[attr] = torch.nn.Parameter(value, tensor.requires_grad) if isinstance(tensor, torch.nn.Parameter) else value
    return not _meta_left(module)


class SeededWeights:
    """The kept weights of seeded models, one safetensors file per key under `folder`."""

    def __init__(self, folder: Path | None = None) -> None:
        self.folder = folder or weights_dir()
        self.writer: threading.Thread | None = None  # the last write, for callers that must wait for it

    def path(self, name: str, seed: int) -> Path:
        return self.folder / f"{weights_key(name, seed)}.safetensors"

    def load(self, name: str, seed: int, build: Builder | None = None) -> LoadedModel:
        """`build(name, construct)` (builders.models.load_model by default) right after `torch.manual_seed(seed)`,
        torch's CPU generator left as that build leaves it: from the kept weights where they fit, else built (and
        kept); in the meta-device build offered for `name` where there is one and the weights fit it. `construct` is
        the context the model's module is constructed in (its transform outside it)."""
        build = build or _load_model
        offered = _OFFERED.pop(name, None)
        torch.manual_seed(seed)
        if model_source(name) not in NAME_ONLY_SOURCES:  # weights or a config read from files: not the name's alone
            return build(name, nullcontext)
        path = self.path(name, seed)
        kept = _read(path)
        if kept is not None:
            state = kept.pop(GENERATOR_STATE, None)
            model = offered
            if model is None:
                try:
                    model = build(name, meta_device)
                except InputError:
                    raise
                except Exception:  # noqa: BLE001  (a model the meta device cannot build: built for real below)
                    model = None
            if model is not None and state is not None and _fill(model.module, kept, copy=True):
                torch.set_rng_state(state)
                return model
            offered = None  # maybe filled in part
            torch.manual_seed(seed)
        built = build(name, nullcontext)
        tensors = {p: t for p, _, _, t in _slots(built.module)}
        self._keep(tensors, torch.get_rng_state(), path)
        if offered is not None and _fill(offered.module, tensors, copy=False):
            return offered
        return built

    def _keep(self, tensors: dict[str, torch.Tensor], state: torch.Tensor, path: Path) -> None:
        """Writes `tensors` and `state` to `path` on a thread, straight from the tensors' memory (safetensors writes
        without copies: the study never changes its model's weights in place, its variants are copies); tensors that
        share storage are not kept. A write that fails leaves no file: the next study builds the model again."""
        storages = {t.untyped_storage().data_ptr() for t in tensors.values()}
        if len(storages) != len(tensors) or GENERATOR_STATE in tensors or any(t.device.type != "cpu" for t in tensors.values()):
            return
        kept = {p: t.detach().contiguous() for p, t in tensors.items()} | {GENERATOR_STATE: state}

        def write() -> None:
            from safetensors.torch import save_file

            partial = path.with_name(f".{path.name}.{os.getpid()}.tmp")
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                save_file(kept, partial)
                with open(partial, "rb") as written:
                    os.fsync(written.fileno())
                os.replace(partial, path)
            except (OSError, ValueError):  # an unwritable cache costs the next study its time only
                with contextlib.suppress(OSError):  # no folder to remove it from
                    partial.unlink(missing_ok=True)

        self.writer = threading.Thread(target=write, name="seeded-weights-writer")
        self.writer.start()


def _read(path: Path) -> dict[str, torch.Tensor] | None:
    """The tensors kept at `path`, or None where there is no file or it does not read."""
    from safetensors.torch import load_file

    if not path.is_file():
        return None
    try:
        return load_file(path)
    except Exception:  # noqa: BLE001  (safetensors raises its own errors for a damaged file: built again)
        return None
