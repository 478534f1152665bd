"""Model sources: timm names, Hugging Face vision models, local ONNX files; weights from local files.

Nothing here downloads: timm models are built with `pretrained=False`, Hugging Face models from a
local folder, a model type (`hf:segformer`) or the local cache, and `--checkpoint` loads weights.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from builders.models.info import ModelInfo
from sessions.documents.errors import InputError, first_line
from sessions.documents.input_files import MAX_TEXT_FILE_BYTES, read_regular_file

# SegFormer (MiT-B0..B5) architectures as published by NVIDIA, so that `hf:segformer-b5` or a
# `nvidia/segformer-bN-finetuned-ade-S-S` id absent from the local cache builds without the hub
# (random weights, or --checkpoint). ADE20K: 150 classes.
SEGFORMER_SIZES = {
    "b0": ((2, 2, 2, 2), (32, 64, 160, 256), 256),
    "b1": ((2, 2, 2, 2), (64, 128, 320, 512), 256),
    "b2": ((3, 4, 6, 3), (64, 128, 320, 512), 768),
    "b3": ((3, 4, 18, 3), (64, 128, 320, 512), 768),
    "b4": ((3, 8, 27, 3), (64, 128, 320, 512), 768),
    "b5": ((3, 6, 40, 3), (64, 128, 320, 512), 768),
}
SEGFORMER_NAME = re.compile(r"^(?:hf:segformer-(b[0-5])(?:-(\d+))?|nvidia/segformer-(b[0-5])-finetuned-ade-(\d+)-\d+)$")
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


@dataclass
class LoadedModel(ModelInfo):
    module: Any = None  # torch.nn.Module in eval mode; None for ONNX files
    transform: Callable | None = None  # PIL image -> CHW float tensor
    onnx_path: Path | None = None
    details: dict[str, Any] = field(default_factory=dict)


def torch_module(model: LoadedModel) -> Any:
    """`model`'s PyTorch module; one InputError line for an ONNX file (no module), which only the TensorRT backend
    runs."""
    if model.module is None:
        raise InputError(f"{model.name}: an ONNX file runs on TensorRT only (a GPU with TensorRT: --backend "
                         "tensorrt); elsewhere give the model's name, with --checkpoint for its weights")
    return model.module


# Sources whose model `load_model` builds from the name alone (architecture from code, random weights): the same
# name, seed and package versions always give the same weights (builders.models.seeded_weights keeps them)
NAME_ONLY_SOURCES = frozenset({"timm", "segformer-table", "hf-model-type"})


def model_source(name: str) -> str:
    """Which builder `load_model` takes for `name`: onnx-file, hf-folder, segformer-table, hf-model-type, hf-cache
    (a hub id's config from the local cache) or timm."""
    path = Path(name)
    if name.endswith(".onnx"):
        return "onnx-file"
    if _is(path, Path.is_dir):
        return "hf-folder"
    if SEGFORMER_NAME.match(name) and (name.startswith("hf:") or not _hf_cached(name)):
        return "segformer-table"
    if name.startswith("hf:"):
        return "hf-model-type"
    return "hf-cache" if "/" in name else "timm"


def load_model(name: str, checkpoint: Path | None = None,
               construct: Callable[[], AbstractContextManager[Any]] = nullcontext) -> LoadedModel:
    """The model `name` names, in eval mode, with `checkpoint`'s weights where given. Its module is constructed
    inside `construct()` (builders.models.meta_build.meta_device: shapes without values), its transform outside it."""
    path = Path(name)
    source = model_source(name)
    if source == "onnx-file":
        if not _is(path, Path.is_file):
            raise InputError(f"no such ONNX file: {name}")
        return _onnx_model(path)
    if source == "hf-folder":
        if not (path / "config.json").is_file():
            raise InputError(f"{name} is a folder without config.json, not a Hugging Face model")
        model = _hf_model(str(path), construct, local=True)
    elif source == "segformer-table":
        model = _segformer_model(name, construct)
    elif source == "hf-model-type":
        model = _hf_model(name[3:], construct, model_type=True, shown=name)
    elif source == "hf-cache":
        model = _hf_model(name, construct)
    else:
        model = _timm_model(name, construct)
    if checkpoint is not None:
        load_checkpoint(model.module, checkpoint)
        model.details["checkpoint"] = str(checkpoint)
    return model


def _is(path: Path, test: Callable[[Path], bool]) -> bool:
    try:
        return test(path)
    except OSError:  # a name longer than a file name may be is no file and no folder
        return False


def _timm_model(name: str, construct: Callable[[], AbstractContextManager[Any]]) -> LoadedModel:
    import timm
    from timm.data import create_transform, resolve_data_config

    known = timm.list_models()
    if name not in known:
        close = difflib.get_close_matches(name, known, n=3, cutoff=0.6)
        hint = f"; did you mean {', '.join(close)}?" if close else "; see timm.list_models()"
        raise InputError(f"unknown model {name!r}: not a timm model, ONNX file or Hugging Face id{hint}")
    with construct():
        module = timm.create_model(name, pretrained=False).eval()
    config = resolve_data_config({}, model=module)
    return LoadedModel(
        name=name,
        source="timm",
        module=module,
        input_size=tuple(config["input_size"]),
        transform=create_transform(**config),
        details={"data_config": {k: v for k, v in config.items() if isinstance(v, (int, float, str, tuple))}},
    )


class HFLogits:
    """Wraps a transformers vision model so that calling it returns the logits tensor."""

    @staticmethod
    def wrap(model):
        import torch

        class _Wrapped(torch.nn.Module):
            def __init__(self, inner):
                super().__init__()
                self.model = inner

            def forward(self, pixel_values):
                return self.model(pixel_values=pixel_values).logits

        return _Wrapped(model).eval()


def _hf_cached(name: str) -> bool:
    import transformers

    _check_cached_config(name)
    try:
        transformers.AutoConfig.from_pretrained(name, local_files_only=True)
    except (OSError, ValueError):
        return False
    return True


def _segformer_model(name: str, construct: Callable[[], AbstractContextManager[Any]]) -> LoadedModel:
    """SegFormer-bN from the published architecture table: `hf:segformer-b5[-640]` or an nvidia ADE id."""
    import transformers

    match = SEGFORMER_NAME.match(name)
    assert match is not None
    size = match.group(1) or match.group(3)
    side = int(match.group(2) or match.group(4) or (640 if size == "b5" else 512))
    depths, hidden, decoder = SEGFORMER_SIZES[size]
    config = transformers.SegformerConfig(depths=list(depths), hidden_sizes=list(hidden), decoder_hidden_size=decoder,
                                          num_labels=150)
    with construct():
        model = transformers.SegformerForSemanticSegmentation(config)
    return LoadedModel(
        name=name,
        source="hf",
        module=HFLogits.wrap(model),
        input_size=(3, side, side),
        transform=_plain_transform(side),
        details={"model_type": "segformer", "config": f"trt-inspect's SegFormer-{size.upper()} table (no hub)",
                 "task": "segmentation"},
    )


def _hf_model(name: str, construct: Callable[[], AbstractContextManager[Any]], local: bool = False,
              model_type: bool = False, shown: str | None = None) -> LoadedModel:
    """The Hugging Face model `name` (a folder, a cached hub id, or a model type); `shown`, the name as given
    (`hf:levit`) where it differs, is what error lines name."""
    import transformers

    if local:
        _check_config(Path(name) / "config.json")
    elif not model_type:
        _check_cached_config(name)
    try:
        if model_type:
            config = transformers.AutoConfig.for_model(name)
        else:
            config = transformers.AutoConfig.from_pretrained(name, local_files_only=True)
    except ValueError as exc:
        raise InputError(f"unknown Hugging Face model type {name!r}: {first_line(exc)}") from None
    except OSError:
        raise InputError(
            f"{name!r} is not in the local Hugging Face cache and there is no hub here; "
            "pass a local folder with config.json, or hf:<model_type> (e.g. hf:segformer) for random weights"
        ) from None
    except Exception as exc:  # noqa: BLE001  (transformers raises TypeError, KeyError, ... on configs it cannot read)
        raise InputError(f"cannot read the Hugging Face config of {name}: {first_line(exc)}") from None
    with construct():
        model = _hf_module(name, config, local, shown or name)
    size = getattr(config, "image_size", 224)
    size = size if isinstance(size, int) else int(size[0])
    channels = getattr(config, "num_channels", 3)
    return LoadedModel(
        name=name,
        source="hf",
        module=HFLogits.wrap(model),
        input_size=(channels, size, size),
        transform=_plain_transform(size),
        details={"model_type": config.model_type},
    )


def _hf_module(name: str, config: Any, local: bool, shown: str) -> Any:
    """The image-classification or segmentation model, built from `config` with random weights (a model type, a
    cached config, or inside a meta-device build), else with a folder's weights that must all fit. `shown`: the name
    as the user gave it (`hf:levit`), which every error line names. Raises InputError in one line."""
    import transformers

    autos = [transformers.AutoModelForImageClassification, transformers.AutoModelForSemanticSegmentation]
    if any("Segmentation" in str(arch) for arch in getattr(config, "architectures", None) or []):
        autos.reverse()  # a segmentation folder also loads as a classifier, with a random head
    errors = []
    for auto in autos:
        try:
            if not local or _on_meta_device():
                return _from_config(auto, config, shown)
        except ValueError as exc:  # not this kind of model
            errors.append(first_line(exc))
            continue
        try:
            model, info = auto.from_pretrained(name, local_files_only=True, output_loading_info=True)
        except (ValueError, OSError) as exc:  # not this kind of model, or no weights file it reads
            errors.append(first_line(exc))
            continue
        except Exception as exc:  # noqa: BLE001  (weights that are not plain tensors, shapes that differ, ...)
            raise InputError(f"cannot load the weights in {shown}: {load_error(exc)}") from None
        if info["missing_keys"]:
            missing = sorted(info["missing_keys"])
            raise InputError(f"the weights in {shown} do not fit {type(model).__name__}: {len(missing)} missing "
                             f"(first: {missing[0]})")
        return model
    raise InputError(f"{shown!r} is not an image-classification or segmentation model ({errors[-1]})")


def _from_config(auto: Any, config: Any, shown: str) -> Any:
    """`auto.from_config(config)`: random weights, nothing loaded. ValueError (not this kind of model) passes on to
    the next auto class; any other failure of transformers' building is one InputError naming `shown`."""
    try:
        return auto.from_config(config)
    except ValueError:
        raise
    except Exception as exc:  # noqa: BLE001  (transformers raises TypeError, KeyError, ... building some types)
        raise InputError(f"cannot build {shown} from its config (transformers' {auto.__name__}.from_config, random "
                         f"weights): {first_line(exc)}") from None


def _on_meta_device() -> bool:
    """Inside `with torch.device("meta")` (the recipe preflight's structure): nothing to load weights into."""
    import torch

    return torch.get_default_device().type == "meta"


def _check_config(path: Path) -> None:
    """One line for a config.json that transformers would call missing or fail on with a traceback."""
    import json

    data = read_regular_file(path, "config.json", MAX_TEXT_FILE_BYTES)  # one line for a FIFO, a folder, a huge file
    try:
        config = json.loads(data)
    except json.JSONDecodeError as exc:
        raise InputError(f"{path} is malformed: {exc.msg} at line {exc.lineno}, column {exc.colno}") from None
    except UnicodeDecodeError:
        raise InputError(f"{path} is malformed: not UTF-8 text") from None
    if not isinstance(config, dict):
        raise InputError(f"{path} is malformed: a JSON object is expected, not {type(config).__name__}")
    model_type = config.get("model_type")
    if model_type is not None and not isinstance(model_type, str):
        raise InputError(f"{path} is malformed: model_type is {type(model_type).__name__}, not a name")
    architectures = config.get("architectures")
    if architectures is not None and not (
        isinstance(architectures, list) and all(isinstance(a, str) for a in architectures)
    ):
        raise InputError(f"{path} is malformed: architectures is not a list of names")


def _check_cached_config(name: str) -> None:
    """A hub id's config.json in the local cache, checked like a folder's (a bad one is not a missing one)."""
    from huggingface_hub import try_to_load_from_cache

    try:
        found = try_to_load_from_cache(name, "config.json")
    except ValueError:  # not a repository id
        return
    if isinstance(found, str):
        _check_config(Path(found))


def load_error(exc: BaseException) -> str:
    """Why weights did not load; torch's refusal to unpickle objects said plainly (its advice would run them)."""
    if type(exc).__name__ == "UnpicklingError":
        return "not a file of plain tensors (torch refused to unpickle it; arbitrary pickles are never loaded)"
    return first_line(exc)


def _plain_transform(size: int) -> Callable:
    from torchvision import transforms

    return transforms.Compose(
        [
            transforms.Resize((size, size)),
            transforms.ToTensor(),
            transforms.Normalize(IMAGENET_MEAN, IMAGENET_STD),
        ]
    )


def _onnx_model(path: Path) -> LoadedModel:
    import onnx

    try:
        graph = onnx.load(str(path), load_external_data=False).graph
    except Exception as exc:  # noqa: BLE001  (onnx raises DecodeError and others for damaged files)
        raise InputError(f"{path} is not a readable ONNX file: {exc}") from None
    dims = [d.dim_value for d in graph.input[0].type.tensor_type.shape.dim] if graph.input else []
    if len(dims) != 4 or not all(dims[1:]):
        raise InputError(f"{path}: expected one NCHW image input with fixed C, H, W; found {dims}")
    return LoadedModel(
        name=path.stem,
        source="onnx",
        module=None,
        input_size=(dims[1], dims[2], dims[3]),
        transform=_plain_transform(dims[2]),
        onnx_path=path,
    )


def load_checkpoint(module, path: Path) -> None:
    """Weights from safetensors or a torch file (weights_only: never unpickle arbitrary objects)."""
    import torch

    path = Path(path)
    if not path.is_file():
        raise InputError(f"no such checkpoint: {path}")
    if path.stat().st_size == 0:
        raise InputError(f"checkpoint {path} is empty (0 bytes)")
    try:
        if path.suffix == ".safetensors":
            from safetensors.torch import load_file

            state = load_file(str(path))
        else:
            state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001  (safetensors, pickle and zip errors mean the same to the user)
        raise InputError(f"cannot read checkpoint {path}: {load_error(exc)}") from None
    for key in ("state_dict", "model", "model_state_dict"):
        if isinstance(state, dict) and isinstance(state.get(key), dict):
            state = state[key]
    if not isinstance(state, dict):
        raise InputError(f"checkpoint {path} holds no state dict")
    if not state:
        raise InputError(f"checkpoint {path} holds no weights (an empty state dict)")
    for key, value in state.items():
        if not isinstance(key, str):
            raise InputError(f"checkpoint {path} is not a state dict: key {key!r} is not a parameter name")
        if not isinstance(value, torch.Tensor):
            raise InputError(f"checkpoint {path} is not a state dict: "
                             f"{key!r} is a {type(value).__name__}, not a tensor")
    state = {k.removeprefix("module."): v for k, v in state.items()}
    target = module.model if hasattr(module, "model") and not any(k.startswith("model.") for k in state) else module
    expected = target.state_dict()
    for key, tensor in state.items():
        if key in expected and tensor.shape != expected[key].shape:
            raise InputError(f"checkpoint {path} does not fit the model: {key} is {_shape(tensor)} in the file and "
                             f"{_shape(expected[key])} in the model")
    result = target.load_state_dict(state, strict=False)
    if result.missing_keys or result.unexpected_keys:
        raise InputError(
            f"checkpoint {path} does not fit the model: {len(result.missing_keys)} missing and "
            f"{len(result.unexpected_keys)} unexpected keys (first: "
            f"{(result.missing_keys or result.unexpected_keys)[0]})"
        )


def _shape(tensor) -> str:
    return " x ".join(map(str, tensor.shape)) or "a scalar"
