"""What the cuDNN / cuBLASLt engine takes from the simulated (ModelOpt) variant of its FP8 recipe, its "twin", and
that twin kept on disk, as TensorRT keeps an INT8 calibration cache.

The engine needs the layers the recipe quantizes, each one's input scale and weight scales (calibrated by ModelOpt
on the study's calibration images), the recipe's record, and the twin's outputs on the quality images (the
agreement between the real FP8 kernels and the simulation). A later study of the same model, recipe and images
reads them from the cache instead of importing ModelOpt, calibrating and running fake quantization; it builds the
simulated module only where it is asked about images the cache has no outputs for.

The cache key is the SHA-256 of everything these depend on: the reference model's structure (its `repr`) and every
parameter and buffer (name, dtype, shape, bytes), the calibration images' bytes, the recipe's definition and
excludes, the base dtype, and the versions of torch, ModelOpt and this file's format. Arrays are stored as
little-endian bytes in base64 inside JSON: exact, and never a pickle.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import importlib.metadata
import json
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from builders.cache_files import cache_folder, document_digest, miss_on_failure, read_cache_json, scale_ok, stored_array
from builders.fp8.format import amax_scale
from builders.pytorch.variant_modules import VariantModule
from sessions.documents.codec import build
from sessions.documents.errors import InspectError
from sessions.documents.model import Recipe
from sessions.documents.paths import cache_dir
from sessions.documents.storage import write_atomically

FORMAT = 3  # 2: the document carries its digest (builders.cache_files.document_digest); 3: layers made plain first,
# the recipe's unquantized layers apart
SIMULATED_CHUNK = 16  # samples per call of the simulated module: one eager call of fake quantization costs about
# what sixteen do on the GPU (what one sample a call cost: docs/evidence.md ("Grounds of rules in the code"))

Scales = dict[str, tuple[float, torch.Tensor]]  # layer path -> (input scale, weight scales)


def twin_dir() -> Path:
    return cache_dir() / "fp8-twins"


def _add_tensor(digest: Any, label: str, tensor: torch.Tensor) -> None:
    """Adds a host tensor's label, dtype, shape and bytes to `digest`."""
    digest.update(f"{label}:{tensor.dtype}:{tuple(tensor.shape)}".encode())
    digest.update(tensor.detach().reshape(-1).contiguous().view(torch.uint8).numpy())  # the bytes, not a copy


def model_digest(module: torch.nn.Module) -> str:
    """SHA-256 of a model's structure and of every parameter and buffer (name, dtype, shape, bytes)."""
    return host_digest(repr(module), host_tensors(module))


def host_tensors(module: torch.nn.Module) -> list[tuple[str, torch.Tensor]]:
    """Every parameter and buffer of `module` by name, copied to the host (the CUDA calls are the caller's thread's)."""
    return [(name, tensor.detach().cpu()) for name, tensor in [*module.named_parameters(), *module.named_buffers()]]


def host_digest(structure: str, tensors: list[tuple[str, torch.Tensor]]) -> str:
    """`model_digest` from a model's repr and its `host_tensors`: no CUDA call, so any thread may compute it; ValueError
    for a tensor not on the host (copying it here would be a CUDA call)."""
    digest = hashlib.sha256(structure.encode())
    for name, tensor in tensors:
        if tensor.device.type != "cpu":
            raise ValueError(f"host_digest: {name} is on {tensor.device}, not on the host")
        _add_tensor(digest, name, tensor)
    return digest.hexdigest()


def tensors_digest(tensors: Iterable[torch.Tensor]) -> str:
    """SHA-256 of tensors (dtype, shape, bytes), in order."""
    digest = hashlib.sha256()
    for tensor in tensors:
        _add_tensor(digest, "", tensor.detach().cpu())
    return digest.hexdigest()


def twin_key(model: str, recipe: dict[str, Any], exclude: Iterable[str], calibration: str, dtype: torch.dtype) -> str:
    """The cache key from a model digest, the recipe's definition, its excludes and the calibration images' digest."""
    try:
        modelopt = importlib.metadata.version("nvidia-modelopt")
    except importlib.metadata.PackageNotFoundError:
        modelopt = "absent"
    fields = {"format": FORMAT, "model": model, "recipe": recipe, "exclude": sorted(exclude),
              "calibration": calibration, "dtype": str(dtype), "torch": torch.__version__, "modelopt": modelopt}
    return hashlib.sha256(json.dumps(fields, sort_keys=True, default=str).encode()).hexdigest()


def _array(data: np.ndarray) -> dict[str, Any]:
    data = np.ascontiguousarray(data, dtype=data.dtype.newbyteorder("<"))
    return {"dtype": data.dtype.str, "shape": list(data.shape), "data": base64.b64encode(data.tobytes()).decode()}


@dataclasses.dataclass(frozen=True)
class TwinFit:
    """What a kept twin must fit to be used, from the model it is the twin of: each convolution's and linear's
    output channels by module path (one weight scale per channel, or one), and one image's output shape."""

    channels: dict[str, int]
    sample: tuple[int, ...]

    @classmethod
    def of(cls, module: torch.nn.Module, sample: tuple[int, ...]) -> TwinFit:
        """The fit of `module`, whose output for one image has the shape `sample`."""
        channels = {path: int(m.out_channels if isinstance(m, torch.nn.modules.conv._ConvNd) else m.out_features)
                    for path, m in module.named_modules() if isinstance(m, (torch.nn.modules.conv._ConvNd,
                                                                           torch.nn.Linear))}
        return cls(channels, tuple(sample))


class Twin:
    """The simulated variant as the engine uses it: `quantized`, `scales`, `recipe`, and `infer`."""

    def __init__(self, key: str, quantized: set[str], scales: Scales, recipe: Recipe,
                 make: Callable[[], VariantModule], module: VariantModule | None = None,
                 outputs: dict[str, np.ndarray] | None = None, cached: bool = False) -> None:
        self.key, self.quantized, self.scales, self.recipe = key, quantized, scales, recipe
        self._make, self._module = make, module
        self.outputs = outputs if outputs is not None else {}
        self.cached = cached  # read from the cache (no ModelOpt in this process for it so far)
        self.saved: Callable[[Twin], None] = lambda twin: None  # called when new outputs were computed

    @classmethod
    def of(cls, key: str, module: VariantModule) -> Twin:
        """The twin of a calibrated simulated module (ModelOpt's quantizers hold its scales)."""
        assert module.recipe is not None
        return cls(key, set(module.quantized), scales_of(module), module.recipe, lambda: module, module)

    @torch.no_grad()
    def infer(self, batches: list[torch.Tensor], device: torch.device | str) -> torch.Tensor:
        """The simulated variant's outputs on `batches` (float32, on the CPU): from the cache where it holds them for
        exactly these images, else run in chunks of SIMULATED_CHUNK on `device` (its scales are static, so a
        sample's output does not depend on its neighbours, up to the fp16 rounding of the algorithm cuDNN picks
        for the chunk's size) and kept; the module waits in host memory between uses."""
        images = torch.cat(batches)
        digest = tensors_digest([images])
        if digest not in self.outputs or len(self.outputs[digest]) != len(images):  # one row an image, or made again
            if self._module is None:
                self._module = self._make()
            module = self._module.module.to(device)
            try:
                outputs = [module(chunk.to(device=device, dtype=torch.float16)).float().cpu()
                           for chunk in images.split(SIMULATED_CHUNK)]
            finally:
                module.to("cpu")
            self.outputs[digest] = torch.cat(outputs).numpy()
            self.saved(self)
        return torch.from_numpy(self.outputs[digest].copy())

    def park(self) -> None:
        """The simulated module (where one was made) to host memory: the engine's yardstick, not its part."""
        if self._module is not None:
            self._module.module.to("cpu")

    def scales_to(self, device: torch.device | str) -> None:
        """The weight scales moved to `device`: host memory while the twin waits for its build, the engine's device
        for the build."""
        self.scales = {path: (x_scale, w_scale.to(device)) for path, (x_scale, w_scale) in self.scales.items()}

    def document(self) -> dict[str, Any]:
        return {
            "format": FORMAT, "key": self.key, "quantized": sorted(self.quantized),
            "scales": {path: {"input": x_scale, "weight": _array(w_scale.detach().float().cpu().numpy())}
                       for path, (x_scale, w_scale) in sorted(self.scales.items())},
            "recipe": dataclasses.asdict(self.recipe),
            "outputs": {digest: _array(values) for digest, values in sorted(self.outputs.items())},
        }


def scales_of(simulated: VariantModule) -> Scales:
    """(input scale, weight scales) of every FP8 layer, from the simulated module's calibrated quantizers."""
    table = {}
    for path in simulated.quantized:
        module = simulated.module.get_submodule(path)
        x_amax = float(module.input_quantizer.amax.float().reshape(-1).max())
        w_amax = module.weight_quantizer.amax.detach().float().reshape(-1)
        table[path] = (amax_scale(x_amax), amax_scale(w_amax))
    return table


class TwinCache:
    """Twins on disk, one JSON file per key under `folder`; a file that does not read back whole is a miss."""

    def __init__(self, folder: Path | None = None) -> None:
        self.folder = folder or twin_dir()

    def _path(self, key: str) -> Path:
        return self.folder / f"{key}.json"

    def load(self, key: str, make: Callable[[], VariantModule], fit: TwinFit,
             device: torch.device | str = "cpu") -> Twin | None:
        """The twin kept under `key` of the model `fit` describes, its weight scales on `device` (where the engine's
        weights are), or None (a miss: the caller calibrates again and replaces the file) unless the file reads
        (`builders.cache_files`) and every value means what it should for that model (`_kept`)."""
        doc = read_cache_json(self._path(key), "FP8 calibration cache")
        kept = miss_on_failure(lambda: _kept(doc, key, fit))
        if kept is None:
            return None
        quantized, scales, recipe, outputs = kept
        return Twin(key, quantized, {path: (x, torch.from_numpy(w).to(device)) for path, (x, w) in scales.items()},
                    recipe, make, outputs=outputs, cached=True)

    def save(self, twin: Twin) -> None:
        """Keeps `twin`; a folder that cannot be written (or is a symbolic link: never written through) costs the
        next study its time, not this one its variant."""
        try:
            if not cache_folder(self.folder):
                return
            body = twin.document()
            body["digest"] = document_digest(body)
            write_atomically(self._path(twin.key), json.dumps(body).encode(), "FP8 twin cache")
        except (OSError, InspectError):
            return


def _kept(doc: Any, key: str, fit: TwinFit
          ) -> tuple[set[str], dict[str, tuple[float, np.ndarray]], Recipe, dict[str, np.ndarray]] | None:
    """What a calibration-cache document holds, where every value means what it should, else None: this format
    and key, and the digest of the rest (`document_digest`: a flipped bit is a miss); the quantized layers (the
    recipe's, each a convolution or linear of `fit`) each with scales and no others; an input scale and weight scales
    (one per output channel, or one) each finite and within [2^-14, 2^60] (`builders.cache_files.scale_ok`);
    outputs finite, each one image's output shape (`fit.sample`) a row."""
    if not (isinstance(doc, dict) and doc.get("format") == FORMAT and doc.get("key") == key):
        return None
    if doc.get("digest") != document_digest({k: v for k, v in doc.items() if k != "digest"}):
        return None
    quantized, table, stored = doc.get("quantized"), doc.get("scales"), doc.get("outputs")
    if not (isinstance(quantized, list) and all(isinstance(p, str) for p in quantized) and isinstance(table, dict)
            and isinstance(stored, dict) and set(quantized) == set(table) and len(set(quantized)) == len(quantized)):
        return None
    recipe = build(Recipe, doc.get("recipe"), "recipe")
    if set(recipe.quantized) != set(quantized) or not {*quantized, *recipe.unquantized} <= set(fit.channels):
        return None
    scales = {}
    for path, entry in table.items():
        weights = stored_array(entry.get("weight")) if isinstance(entry, dict) else None
        if weights is None or weights.ndim != 1 or not scale_ok(entry.get("input")):
            return None
        if len(weights) not in (1, fit.channels[path]) or not all(scale_ok(float(w)) for w in weights):
            return None
        scales[path] = (float(entry["input"]), weights)
    outputs = {digest: stored_array(values) for digest, values in stored.items()}
    if any(values is None or values.shape[1:] != fit.sample for values in outputs.values()):
        return None
    return set(quantized), scales, recipe, outputs  # type: ignore[return-value]  # None excluded above
