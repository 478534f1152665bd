"""A model's seeded random weights, kept in the cache folder after the first build.

A study without a checkpoint builds its model right after `torch.manual_seed(seed)`: the random initialisation
runs on the CPU, one generator, seconds for a large model (docs/evidence.md ("Grounds of rules in the code")). For
the sources that build from the name alone (`builders.models.catalog.NAME_ONLY_SOURCES`) the result is a pure function
of the model's name, the seed, the code that builds it and the CPU it runs on, so it is kept: a later study makes the
model on the meta device (no memory, no initialisation), gives it the kept tensors, and sets torch's CPU generator to
the state the initialisation left, so that whatever draws from it next draws what it would have.

Kept under a SHA-256 of everything the weights depend on: the model name, the seed, the default dtype, the versions of
torch (and its build), timm and transformers, the CPU's architecture and the vector instructions PyTorch's CPU kernels
use (random fills differ between them), and this project's model-building code (`builders/models/catalog.py`); in
safetensors (never a pickle), with the generator's state beside the tensors. A kept file is used only where it holds
exactly the meta model's parameters and buffers (names, shapes, dtypes) and a generator state torch accepts, and
leaves none of the model's tensors on the meta device; otherwise, and for models whose tensors share storage (tied
weights, which safetensors does not keep), the model is built as before. The file's safetensors metadata holds the
key, the model, the seed and a SHA-256 of its tensors (`weights_digest`), written with it and checked where it is
read (`builders.cache_files` reads it: a regular file, not a link, size-capped): a file altered since, or another
seed's or model's, costs a build, and is replaced. Writing happens on a thread, one per file in a process, through a
temporary file that a later write removes if its process died.

A caller that has built the model on the meta device already (the recipe preflight, for its structure) offers that
build (`offer_meta_model`); the next load of that model gives it its weights, kept or freshly built, so the study's
model is that very module and its structure (cached per module object by builders.models.structure) is not found
twice.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import hashlib
import importlib.metadata
import json
import os
import platform
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any

import torch

from builders.cache_files import MAX_WEIGHTS_BYTES, cache_folder, miss_on_failure, read_cache_bytes
from builders.models import catalog as models
from builders.models.catalog import NAME_ONLY_SOURCES, LoadedModel, model_source
from builders.models.meta_build import meta_device
from sessions.documents.errors import InputError
from sessions.documents.input_files import FileIdentity, file_identity, read_regular_file
from sessions.documents.paths import cache_dir

GENERATOR_STATE = "__torch_cpu_generator_state__"  # the entry beside the tensors; no module path has this name
FORMAT = "2"  # of the metadata: format, key, model, seed, digest (2: each tensor's bytes hashed apart)
DIGEST_THREADS = min(8, os.cpu_count() or 1)  # threads that hash the tensors' bytes
BUILDERS = ("torch", "timm", "transformers")  # the packages whose code decides the weights
_OFFERED: dict[str, LoadedModel] = {}  # one meta-device build, by model name
_WRITERS: dict[Path, threading.Thread] = {}  # the writes under way in this process, by file
_VERIFIED: dict[Path, FileIdentity] = {}  # a kept file -> its `file_identity` when its digest matched in this process
SETTLED_NS = 2_000_000_000  # far past the coarse clock (a few ms) file times are stamped with

Builder = Callable[[str, Callable[[], AbstractContextManager[Any]], Path | None], LoadedModel]


def _load_model(name: str, construct: Callable[[], AbstractContextManager[Any]],
                checkpoint: Path | None) -> LoadedModel:
    return models.load_model(name, checkpoint, construct)  # looked up when called: tests replace it


def weights_dir() -> Path:
    return cache_dir() / "seeded-weights"


def weights_key(name: str, seed: int) -> str:
    versions = {}
    for package in BUILDERS:
        try:
            versions[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            versions[package] = None
    spec = {"model": name, "seed": seed, "default_dtype": str(torch.get_default_dtype()), "versions": versions,
            "torch_build": torch.version.git_version, "machine": platform.machine(),
            "cpu_capability": torch.backends.cpu.get_cpu_capability(),
            "model_code": hashlib.sha256(read_regular_file(Path(models.__file__), "model code")).hexdigest()}
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()


def offer_meta_model(name: str, model: LoadedModel) -> None:
    """Hands `model`, `name` built on the meta device (builders.models.meta_build) and not changed since, to the next
    `SeededWeights.load` of `name`, which fills it where the weights come from the name alone. One at a time."""
    _OFFERED.clear()
    _OFFERED[name] = model


def _slots(module: torch.nn.Module) -> Iterator[tuple[str, dict, str, torch.Tensor]]:
    """(path, the dict that holds it, its name there, tensor) for every parameter and buffer, persistent or not."""
    for prefix, owner in module.named_modules(remove_duplicate=False):
        for store in (owner._parameters, owner._buffers):
            for attr, tensor in store.items():
                if tensor is not None:
                    yield (f"{prefix}.{attr}" if prefix else attr), store, attr, tensor


def _holds_meta(value: Any, depth: int = 0) -> bool:
    if isinstance(value, torch.Tensor):
        return value.is_meta
    if depth < 4 and isinstance(value, (list, tuple)):
        return any(_holds_meta(item, depth + 1) for item in value)
    if depth < 4 and isinstance(value, dict):
        return any(_holds_meta(item, depth + 1) for item in value.values())
    return False


def _meta_left(module: torch.nn.Module) -> bool:
    """Whether any tensor the modules hold (parameters, buffers, attributes, in lists, tuples and dicts too) is still
    on the meta device."""
    return any(_holds_meta(value) for owner in module.modules() for value in vars(owner).values())


def _same_layout(tensors: dict[str, torch.Tensor], reference: dict[str, torch.Tensor]) -> bool:
    """Whether `tensors` has exactly `reference`'s names, with their shapes and dtypes."""
    return tensors.keys() == reference.keys() and all(
        tensors[p].shape == t.shape and tensors[p].dtype == t.dtype for p, t in reference.items())


def _fill(module: torch.nn.Module, tensors: dict[str, torch.Tensor], copy: bool) -> bool:
    """Gives the meta-device `module` the values in `tensors` (copies of them, in the strides the module's tensors
    have, where `copy`), each parameter staying a parameter with its `requires_grad`; False, `module` untouched, where
    `tensors` does not hold exactly its parameters and buffers with their shapes and dtypes; False also where a tensor
    of `module` is left on the meta device."""
    slots = list(_slots(module))
    if not _same_layout(tensors, {p: t for p, _, _, t in slots}):
        return False
    for path, store, attr, tensor in slots:
        value = tensors[path].detach()
        if copy:  # a storage of its own, aligned as a fresh build's (CPU kernels choose their path by alignment: a
            # weight that views one file buffer gives the same sums in another order), in the constructor's strides
            value = torch.empty_strided(tensor.shape, tensor.stride(), dtype=tensor.dtype, device="cpu").copy_(value)
        store[attr] = (torch.nn.Parameter(value, tensor.requires_grad) if isinstance(tensor, torch.nn.Parameter)
                       else value)
    return not _meta_left(module)


def _generator_state(state: torch.Tensor | None) -> bool:
    """Whether `state` is a CPU generator state torch accepts (one of the right size but invalid, all zeros say,
    makes set_rng_state raise): tried on a generator of its own, torch's global one untouched."""
    if state is None or state.dtype != torch.uint8 or state.shape != torch.get_rng_state().shape:
        return False
    return miss_on_failure(lambda: torch.Generator().set_state(state)) is not None


def weights_digest(tensors: dict[str, torch.Tensor]) -> str:
    """SHA-256 of `tensors` in name order: for each, `NAME\nDTYPE\nSHAPE\n` (as torch prints the dtype, the
    shape as a list) and then the SHA-256 of its bytes in row-major order (32 bytes). The tensors' own hashes are
    computed side by side on `DIGEST_THREADS` threads (hashlib lets go of the interpreter lock): a large model's
    weights hashed in one stream took 0.40 s of every warm H100 main job
    (benchmarks/results/h100/freeze-count/sampled/)."""
    names = sorted(tensors)
    with concurrent.futures.ThreadPoolExecutor(DIGEST_THREADS, thread_name_prefix="weights-digest") as pool:
        own = list(pool.map(lambda name: _bytes_digest(tensors[name]), names))
    digest = hashlib.sha256()
    for name, tensor_digest in zip(names, own, strict=True):
        tensor = tensors[name]
        digest.update(f"{name}\n{tensor.dtype}\n{list(tensor.shape)}\n".encode())
        digest.update(tensor_digest)
    return digest.hexdigest()


def _bytes_digest(tensor: torch.Tensor) -> bytes:
    return hashlib.sha256(tensor.detach().contiguous().reshape(-1).view(torch.uint8).numpy()).digest()


def weights_metadata(name: str, seed: int) -> dict[str, str]:
    """The metadata a kept file of `name` and `seed` holds, but for its digest."""
    return {"format": FORMAT, "key": weights_key(name, seed), "model": name, "seed": str(seed)}


class SeededWeights:
    """The kept weights of seeded models, one safetensors file per key under `folder`."""

    def __init__(self, folder: Path | None = None) -> None:
        self.folder = folder or weights_dir()
        self.writer: threading.Thread | None = None  # this load's write, if it started one (tests wait for it)

    def path(self, name: str, seed: int) -> Path:
        return self.folder / f"{weights_key(name, seed)}.safetensors"

    def load(self, name: str, seed: int, checkpoint: Path | None = None, build: Builder | None = None) -> LoadedModel:
        """`build(name, construct, checkpoint)` (builders.models.catalog.load_model by default) right after
        `torch.manual_seed(seed)`, torch's CPU generator left as that build leaves it. Without a checkpoint, for a
        model whose weights come from its name alone: from the kept weights where they fit, else built (and kept);
        in the meta-device build offered for `name` where there is one and the weights fit it. `construct` is the
        context the model's module is constructed in (its transform outside it)."""
        build = build or _load_model
        offered = _OFFERED.pop(name, None)
        torch.manual_seed(seed)
        if checkpoint is not None or model_source(name) not in NAME_ONLY_SOURCES:
            return build(name, nullcontext, checkpoint)
        path = self.path(name, seed)
        pending = _WRITERS.get(path)
        if pending is not None:  # this process is writing the file: wait for it rather than build again
            pending.join()
        metadata = weights_metadata(name, seed)
        kept = _read(path, metadata)
        state = kept.pop(GENERATOR_STATE, None) if kept is not None else None
        usable = kept is not None and _generator_state(state)
        if usable:
            model = offered or _meta_build(name, build)
            if model is not None and _fill(model.module, kept, copy=True):
                torch.set_rng_state(state)
                return model
            offered = None  # maybe filled in part
            torch.manual_seed(seed)
        built = build(name, nullcontext, None)
        tensors = {p: t for p, _, _, t in _slots(built.module)}
        if not usable or not _same_layout(kept, tensors):  # a file that fits is kept (a model the meta device
            self._keep(tensors, torch.get_rng_state(), path, metadata)  # cannot build or fill)
        if offered is not None and _fill(offered.module, tensors, copy=False):
            return offered
        return built

    def _keep(self, tensors: dict[str, torch.Tensor], state: torch.Tensor, path: Path,
              metadata: dict[str, str]) -> None:
        """Writes `tensors` and `state` to `path` on a thread, with `metadata` and their digest, from the tensors
        themselves (the study never changes its model's weights in place: its variants are copies); tensors that
        share storage are not kept, nor a file this process is writing already. A write that fails leaves no file:
        the next study builds the model again."""
        sized = [t for t in tensors.values() if t.numel()]  # every empty tensor's storage is at address 0
        if (len({t.untyped_storage().data_ptr() for t in sized}) != len(sized) or GENERATOR_STATE in tensors
                or any(t.device.type != "cpu" for t in tensors.values())):
            return
        running = _WRITERS.get(path)
        if running is not None and running.is_alive():
            return
        kept = {p: t.detach().contiguous() for p, t in tensors.items()} | {GENERATOR_STATE: state}
        self.writer = _WRITERS[path] = threading.Thread(target=_write, args=(kept, path, metadata),
                                                        name="seeded-weights-writer")
        self.writer.start()


def _write(tensors: dict[str, torch.Tensor], path: Path, metadata: dict[str, str]) -> None:
    """`tensors` to `path` in safetensors, `metadata` and their digest (`weights_digest`) in its metadata, through a
    temporary file (fsync, rename); partial files of processes that died while writing are removed first; nothing
    is raised, and nothing written into a folder that is a symbolic link."""
    from safetensors.torch import save_file

    partial: Path | None = None
    try:
        if not cache_folder(path.parent):
            return
        _remove_partials_of_dead_processes(path.parent)
        fd, name = tempfile.mkstemp(prefix=f".{path.name}.{os.getpid()}.", suffix=".tmp", dir=path.parent)
        os.close(fd)
        partial = Path(name)
        save_file(tensors, partial, metadata={**metadata, "digest": weights_digest(tensors)})
        with open(partial, "rb") as written:
            os.fsync(written.fileno())
        os.replace(partial, path)
    except (OSError, ValueError, RuntimeError):  # an unwritable cache (or, at the interpreter's exit, a digest that
        # cannot start its threads) costs the next study its time only
        if partial is not None:
            with contextlib.suppress(OSError):
                partial.unlink(missing_ok=True)


def _remove_partials_of_dead_processes(folder: Path) -> None:
    """Removes `.KEY.safetensors.PID.*.tmp` files whose process is gone (one ended by os._exit mid-write)."""
    for partial in folder.glob(".*.safetensors.*.tmp"):
        pid = partial.name.split(".safetensors.")[-1].split(".")[0]
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            with contextlib.suppress(OSError):
                partial.unlink()
        except OSError:  # alive, another user's
            continue


def _meta_build(name: str, build: Builder) -> LoadedModel | None:
    """`name` built on the meta device, or None where it cannot be built there."""
    try:
        return build(name, meta_device, None)
    except InputError:
        raise
    except Exception:  # noqa: BLE001  (an op without a meta kernel, a constructor that reads values: built for real)
        return None


def _read(path: Path, metadata: dict[str, str]) -> dict[str, torch.Tensor] | None:
    """The tensors kept at `path`, or None (a miss: built again) where there is no file, it does not read
    (`builders.cache_files.read_cache_bytes`; safetensors' own errors), its metadata is not `metadata` and a digest,
    or its tensors do not hash to that digest.

    The digest is computed once per file in a process: a file whose identity (`file_identity`: device, inode, size,
    modification and change times) is the same before and after the read as when its digest matched is not hashed
    again. Every write changes the change time, which no program can set back, so a file altered since costs its
    hash (and, altered, a build); a check is remembered only for a file last changed `SETTLED_NS` before it, so a
    write in the same tick of the clock as the check, which can leave the change time as it was, is never missed."""
    before = file_identity(path)
    data = read_cache_bytes(path, "seeded weights", MAX_WEIGHTS_BYTES)
    if data is None:
        return None
    after = file_identity(path)
    known = before is not None and before == after and _VERIFIED.get(path) == before
    tensors = miss_on_failure(lambda: _checked(data, metadata, hashed=not known))
    if tensors is not None and not known and before == after and before is not None and _settled(before):
        _VERIFIED[path] = before
    return tensors


def _settled(identity: FileIdentity) -> bool:
    """Whether the file of `identity` was last changed at least `SETTLED_NS` ago."""
    return identity.changed_ns <= time.time_ns() - SETTLED_NS


def _checked(data: bytes, metadata: dict[str, str], hashed: bool = True) -> dict[str, torch.Tensor] | None:
    """The tensors of the safetensors `data` where its metadata is `metadata` with a digest and, where `hashed`, the
    tensors hash to that digest (`weights_digest`)."""
    from safetensors.torch import load

    header = json.loads(data[8:8 + int.from_bytes(data[:8], "little")])
    stored = header.get("__metadata__")
    if not isinstance(stored, dict) or stored.keys() != {*metadata, "digest"} or any(
            stored[k] != v for k, v in metadata.items()):
        return None
    tensors = load(data)
    return tensors if not hashed or weights_digest(tensors) == stored["digest"] else None
