"""A PyTorch module per variant: the base precisions, and FP8 through NVIDIA ModelOpt.

The one source of variant modules: the PyTorch backend runs them, and the ONNX export that the
TensorRT backend builds from exports them. FP8 here is ModelOpt's simulated quantization (fake
quant: quantize, then dequantize, then run the layer in the base precision): its numerics are the
recipe's; its speed is not FP8 kernel speed.

Fair comparison, for the backend that runs these modules: every variant is made from one source with each
BatchNorm that reads a convolution folded into it (`folded_reference`, as TensorRT and the cuDNN engine fold it),
whatever the variants beside it, so every variant runs the same graph and none moves with its neighbours;
`bake_fp8_weights` stores each quantized weight once, so no weight quantizer runs per call.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import sys
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import torch

from builders.fp8.format import E4M3_MAX, MIN_SCALE
from builders.models.plain_layers import PlainLayer, plain_layers, plain_layers_notes
from builders.models.structure import model_structure
from builders.recipes.fp8 import OPS, check_exclusions, check_selections, variant_selection
from sessions.analyses.captions import SIMULATED_FP8
from sessions.documents.errors import InspectError, MissingEnvironment, first_line
from sessions.documents.model import Recipe
from sessions.documents.plan import VariantPlan

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
# A zero amax becomes 448 x 2**-14: scale 2**-14, the smallest normal fp16 value, the floor the ONNX
# export writes for it, so the simulated module and the graph agree.
MIN_AMAX = E4M3_MAX * MIN_SCALE
# Images per calibration forward, whatever the study's batch: max calibration takes the largest |x| over
# all images, which chunking does not change, and one call in Python costs what sixteen do on the GPU.
CALIBRATION_CHUNK = 16


@dataclass
class VariantModule:
    module: torch.nn.Module
    dtype: torch.dtype
    quantized: set[str] = field(default_factory=set)  # module paths running in FP8
    recipe: Recipe | None = None
    notes: list[str] = field(default_factory=list)


def precision_name(dtype: torch.dtype) -> str:
    return {v: k for k, v in DTYPES.items()}[dtype]


def variant_module(reference: torch.nn.Module, variant: VariantPlan, calibration: torch.Tensor,
                   fp8_base: torch.dtype, calibrations: Calibrations | None = None) -> VariantModule:
    """`reference` (fp32, eval) as `variant`; FP8 calibrates on `calibration`, once per `calibrations` where given."""
    if variant.precision == "fp32":
        return VariantModule(reference, torch.float32)
    if variant.precision in DTYPES:
        dtype = DTYPES[variant.precision]
        return VariantModule(copy.deepcopy(reference).to(dtype=dtype), dtype)
    return _fp8_module(reference, variant, calibration, fp8_base, calibrations)


@dataclass
class Calibrated:
    """A max-calibrated module and what its calibration did."""

    module: torch.nn.Module
    folded: int  # BatchNorm layers folded into their convolutions
    dtype: torch.dtype  # the precision it calibrated in, and the one its variant runs in
    overflow: str | None = None  # why the asked-for precision was given up for fp32 (ModelOpt's line); None: it held
    made_plain: list[PlainLayer] = field(default_factory=list)  # layers made plain first (`fold_into_weights`)


class Calibrations:
    """Calibrated FP8 modules of one reference model, one per (BatchNorm folding, weight scale granularity, base
    dtype, calibration images), each with FP8 quantizers on every convolution and linear that any recipe can select.

    Max calibration runs the model unquantized (ModelOpt's quantizers only collect the largest |x| while they
    calibrate), so a layer's scales do not depend on which other layers a recipe quantizes: every recipe of a study
    takes its quantizers from one calibration (as TensorRT's INT8 calibrators reuse one calibration cache).
    A backend keeps one for the life of its study; `calibrated` hands out modules the cache does not hold.
    """

    def __init__(self) -> None:
        self._modules: dict[tuple[object, ...], tuple[Calibrated, torch.device]] = {}

    def calibrated(self, key: tuple[object, ...], make: Callable[[], Calibrated]) -> Calibrated:
        """What `make` returns for `key` (made once), its module on the device `make` put it on: the first time the
        made module itself, later a copy of it. The module kept for later waits in host memory, its parameters and
        buffers there (a calibrated model's other tensors, its calibrators', are released: `release_calibrators`), so
        no variant's device memory holds it; each copy's tensors are copied once, straight to where they go
        (`module_copy`)."""
        if key not in self._modules:
            made = make()
            device = next(made.module.parameters()).device
            self._modules[key] = (dataclasses.replace(made, module=module_copy(made.module, torch.device("cpu"))),
                                  device)
            return made
        kept, device = self._modules[key]
        return dataclasses.replace(kept, module=module_copy(kept.module, device))


def module_copy(module: torch.nn.Module, device: torch.device) -> torch.nn.Module:
    """A deep copy of `module` with its parameters and buffers on `device`, where `copy.deepcopy` then `.to(device)`
    clones every tensor where it is, then moves the clone (for a model on the host, a second copy of its weights in
    host memory). Each parameter and buffer that `_copies_alone` is copied from its own storage to `device` once,
    as that pair would make it: parameters stay parameters (their `requires_grad` kept), a tensor that several
    modules share stays shared. Every other tensor (subclasses, sparse or non-dense ones, ones with a gradient or
    attributes of their own, ones whose storage another parameter or buffer shares, and tensors that are neither a
    parameter nor a buffer) is deep-copied where it is; then the copy is moved to `device` as `Module.to` moves a
    module. One thing differs from the pair: a tensor that is neither a parameter nor a buffer and views the storage
    of one copied alone views it no longer (a calibrated model holds none)."""
    tensors = [*module.parameters(), *module.buffers()]
    storages = Counter(_storage(tensor) for tensor in tensors if _readable(tensor))
    memo: dict[int, object] = {}
    for tensor in tensors:
        if _copies_alone(tensor) and storages[_storage(tensor)] == 1:
            moved = tensor.detach().to(device, copy=True).requires_grad_(tensor.requires_grad)
            memo[id(tensor)] = torch.nn.Parameter(moved, tensor.requires_grad) if _is_parameter(tensor) else moved
    return copy.deepcopy(module, memo).to(device)


CONTIGUOUS_FORMATS = (torch.contiguous_format, torch.channels_last, torch.channels_last_3d)


def _readable(tensor: torch.Tensor) -> bool:
    """A strided tensor of torch's own classes: one whose storage can be asked for."""
    return type(tensor) in (torch.Tensor, torch.nn.Parameter) and tensor.layout == torch.strided


def _storage(tensor: torch.Tensor) -> tuple[torch.device, int]:
    """Where `tensor`'s storage is (tensors without one of their own, on the meta device or empty, all share one)."""
    return tensor.device, tensor.untyped_storage().data_ptr()


def _copies_alone(tensor: torch.Tensor) -> bool:
    """Whether a copy of `tensor`'s values, strides and `requires_grad` is all `copy.deepcopy` would make of it: a
    parameter laid out in one of torch's contiguous formats (its own deepcopy drops any attributes), or such a leaf
    tensor of torch's own class without a gradient or attributes of its own (a tensor that views part of its
    storage, or repeats it, keeps that storage in a deep copy: `copy.deepcopy` copies it)."""
    if not _readable(tensor) or not any(tensor.is_contiguous(memory_format=layout) for layout in CONTIGUOUS_FORMATS):
        return False
    return _is_parameter(tensor) or (tensor.is_leaf and tensor.grad is None and not tensor.__dict__)


def _is_parameter(tensor: torch.Tensor) -> bool:
    return type(tensor) is torch.nn.Parameter


def _calibrated_module(reference: torch.nn.Module, conv_bn: list[tuple[str, str]], paths: list[str], weights: str,
                       calibration: torch.Tensor, dtype: torch.dtype) -> Calibrated:
    """A copy of `reference` with the `conv_bn` pairs folded and FP8 quantizers on the layers at `paths`,
    max-calibrated on `calibration` in `dtype`, or in fp32 where the calibration fails in a narrower `dtype`.

    ModelOpt's max calibrator asserts when a tensor it reads holds inf or NaN ("detected inf values in amax"): an
    fp16 model whose activations pass 65504 (large random weights, deep branchy networks). The same model and images
    in fp32 then calibrate, and the variant runs in fp32 (`Calibrated.overflow` says why); fp32 failing too raises
    one line.
    """
    try:
        return _calibrate(reference, conv_bn, paths, weights, calibration, dtype)
    except AssertionError as exc:  # ModelOpt's calibrators check their tensors with assertions
        reason = f"ModelOpt: {first_line(exc)}"
        if dtype == torch.float32:
            raise InspectError(f"max calibration failed in fp32 ({reason})") from None
    try:
        in_fp32 = _calibrate(reference, conv_bn, paths, weights, calibration, torch.float32)
    except AssertionError as exc:
        raise InspectError(f"max calibration failed in {precision_name(dtype)} ({reason}) and in fp32 "
                           f"(ModelOpt: {first_line(exc)})") from None
    return dataclasses.replace(in_fp32, overflow=reason)


def _calibrate(reference: torch.nn.Module, conv_bn: list[tuple[str, str]], paths: list[str], weights: str,
               calibration: torch.Tensor, dtype: torch.dtype) -> Calibrated:
    """`_calibrated_module` in `dtype` only."""
    mtq = _modelopt()
    module = copy.deepcopy(reference)
    made_plain, folded = fold_into_weights(module, conv_bn)  # ModelOpt quantizes the weights as TensorRT folds them
    module = module.to(dtype=dtype)
    calib = calibration.to(device=next(module.parameters()).device, dtype=dtype)

    def forward_loop(m: torch.nn.Module) -> None:
        with torch.no_grad():
            for chunk in calib.split(CALIBRATION_CHUNK):
                m(chunk)

    with contextlib.redirect_stdout(None):  # ModelOpt prints a summary line per call
        with _converting_only(module, paths):
            module = mtq.quantize(module, {"quant_cfg": [{"quantizer_name": "*", "enable": False}], "algorithm": None})
        enable_fp8_quantizers(module, paths, weights)
        mtq.calibrate(module, "max", forward_loop=forward_loop)
    release_calibrators(module)
    return Calibrated(module, folded, dtype, made_plain=made_plain)


def release_calibrators(module: torch.nn.Module) -> None:
    """Each quantizer's calibrator of `module` lets go of the largest |x| it collected (its `reset`, as ModelOpt's
    own `reset_amax` calls it); the amax calibration loaded into the quantizer stays, and it is all a quantizer reads
    from then on. Their tensors, on the calibration's device and neither parameters nor buffers, are otherwise copied
    one by one with every copy of the module (`Calibrations`: 0.45 s of each copy of a calibrated senet154 on an
    H100, benchmarks/results/h100/calibration-copies/coldsampled/)."""
    for sub in module.modules():
        calibrator = getattr(sub, "_calibrator", None)  # TensorQuantizer's; ModelOpt names no public accessor
        if calibrator is not None and callable(getattr(calibrator, "reset", None)):
            calibrator.reset()


@contextlib.contextmanager
def _converting_only(module: torch.nn.Module, paths: Sequence[str]) -> Iterator[None]:
    """While it lasts, every submodule of `module` neither at one of `paths` nor holding one is out of `module`,
    an `nn.Identity` in its place; on exit each is back at its path, whatever happened inside.

    ModelOpt's quantize converts every module of a type it registers (pooling, norms, recurrent layers), each one
    then running its forward through disabled quantizers; its recurrent layers swap torch's fused kernels for a
    Python loop and hold a reference to torch's `_VF` module, which cannot be deep-copied (`Calibrations` copies).
    Held out, only the layers at `paths` are converted, and every other layer runs as in the reference. Local to
    this module, unlike `mtq.unregister`, which changes ModelOpt's registry for the whole process.
    """
    held = _held_out(module, set(paths))
    for path, _ in held:
        module.set_submodule(path, torch.nn.Identity())
    try:
        yield
    finally:
        for path, sub in held:
            module.set_submodule(path, sub)


def _held_out(module: torch.nn.Module, paths: set[str]) -> list[tuple[str, torch.nn.Module]]:
    """The outermost submodules of `module` (path, module) that are neither at one of `paths` nor hold one."""
    holders = {path.rpartition(".")[0] for path in paths}
    holders |= {prefix for path in holders for prefix in _prefixes(path)}
    return [(path, sub) for path, sub in module.named_modules(remove_duplicate=False)
            if path and path not in paths and path not in holders and path.rpartition(".")[0] in holders]


def _prefixes(path: str) -> list[str]:
    """Every module path above `path` ("a.b.c": "", "a", "a.b")."""
    parts = path.split(".") if path else []
    return [".".join(parts[:n]) for n in range(len(parts))]


def _fp8_module(reference: torch.nn.Module, variant: VariantPlan, calibration: torch.Tensor,
                dtype: torch.dtype, calibrations: Calibrations | None) -> VariantModule:
    mtq = _modelopt()
    structure = model_structure(reference, calibration[:1].to(next(reference.parameters()).device))
    selection = variant_selection(structure, variant)
    check_exclusions("this model", structure, variant.exclude)
    check_selections("this model", structure, {variant.name: selection})
    recipe_def = selection.recipe
    candidates = [node.path for node in structure.layers if node.op in OPS]

    def calibrate() -> Calibrated:
        return _calibrated_module(reference, structure.conv_bn, candidates, recipe_def.weights, calibration, dtype)

    key = (recipe_def.weights, dtype, calibration.data_ptr(), tuple(calibration.shape))
    calibrated = calibrations.calibrated(key, calibrate) if calibrations is not None else calibrate()
    module, folded = calibrated.module, calibrated.folded
    modules = dict(module.named_modules())
    # a module type ModelOpt does not convert gets no quantizer: its layer runs in the base precision, not in FP8
    unquantized = [path for path in selection.quantized if getattr(modules[path], "weight_quantizer", None) is None]
    quantized = [path for path in selection.quantized if path not in unquantized]
    keep = set(quantized)
    disable_fp8_quantizers(module, set(candidates) - keep)
    shared = share_input_scales(module, structure.shared_inputs(keep)) if recipe_def.share_input_scale else 0
    zero_amax, small_amax = _floor_amax(module, keep)
    recipe = Recipe(
        method=f"ModelOpt {mtq.__name__}.quantize and calibrate, max calibration in "
               f"{precision_name(calibrated.dtype)}, quantizers on the recipe's layers only",
        number_format="fp8 e4m3 (simulated)",
        layout=recipe_def.name,
        exclude_patterns=list(variant.exclude),
        quantized=quantized,
        excluded=selection.excluded,
        scales=f"weights: {recipe_def.weights} amax / 448; activations: static per-tensor amax / 448, max calibration"
        + ("; layers reading one tensor share its input scale" if recipe_def.share_input_scale else ""),
        calibration_source="",  # filled in by the study, which owns the images
        calibration_count=int(calibration.shape[0]),
        weights=recipe_def.weights,
        batchnorm_folded=True,
        excluded_by_role={role: len(paths) for role, paths in selection.by_role.items()},
        weight_bytes_base=weight_bytes(module, set()),
        weight_bytes_fp8=weight_bytes(module, keep),
        calibration_precision=precision_name(calibrated.dtype),
        unquantized=unquantized,
    )
    notes = [SIMULATED_FP8, f"base precision {precision_name(calibrated.dtype)}"]
    if calibrated.overflow:
        notes.append(calibration_fallback_note(dtype, calibrated.overflow))
    if unquantized:
        notes.append(unquantized_note(unquantized, modules, calibrated.dtype))
    notes.extend(plain_layers_notes(calibrated.made_plain))
    if folded:
        notes.append(f"{folded} BatchNorm layers folded into their convolutions before quantization")
    if shared:
        notes.append(f"{shared} groups of layers reading one tensor share one input scale")
    if zero_amax or small_amax:
        notes.append(f"{zero_amax + small_amax} quantizers had an amax below 448 x 2^-14 = {MIN_AMAX:g} "
                     f"({zero_amax} saw "
                     "only zeros in calibration or hold all-zero weight channels): raised to it, so their scale is "
                     "2^-14, the smallest normal fp16 value, the ONNX graph's floor")
    return VariantModule(module, calibrated.dtype, keep, recipe, notes)


def unquantized_note(paths: list[str], modules: dict[str, torch.nn.Module], dtype: torch.dtype) -> str:
    """An FP8 variant's note on the layers at `paths` (of `modules`) its recipe selects that ModelOpt gave no
    quantizer (`Recipe.unquantized`), which run in `dtype`."""
    kinds = ", ".join(sorted({type(modules[path]).__name__ for path in paths}))
    return (f"{len(paths)} layers the recipe selects have no FP8 quantizer ({paths[0]} first): ModelOpt converts no "
            f"module of their type ({kinds}), so they run in {precision_name(dtype)}, counted apart, never as FP8")


def calibration_fallback_note(asked: torch.dtype, reason: str) -> str:
    """The variant's note where calibration in `asked` failed (`reason`, ModelOpt's line) and fp32 took over."""
    return (f"max calibration overflowed {precision_name(asked)} ({reason}): this variant calibrated and runs in "
            f"fp32 instead, so its time is not on the {precision_name(asked)} base of the others")


def prepare_fp8() -> None:
    """Import ModelOpt now (seconds; more on a loaded machine), so that the first FP8 build does not."""
    _modelopt()


# ModelOpt's plugins for these libraries wrap their own layer classes (attention, adapters, fused experts,
# graph layers), none of which a recipe here quantizes: recipes select plain convolutions and linears.
UNUSED_MODELOPT_PLUGINS = ("transformers", "peft", "diffusers", "torch_geometric")


def _modelopt():
    """ModelOpt's quantization, on its pure-PyTorch FP8 path: its CUDA extension takes a minute to compile."""
    try:
        with _absent(UNUSED_MODELOPT_PLUGINS):
            # max calibration imports ModelOpt's export package: imported here, with the plug-ins' libraries hidden
            # (its cost: docs/performance.md)
            import modelopt.torch.export.layer_utils  # noqa: F401
            import modelopt.torch.quantization as mtq
            from modelopt.torch.quantization import extensions
    except ImportError as exc:
        raise MissingEnvironment(f"FP8 variants need nvidia-modelopt: {exc}") from None
    # tensor_quant.scaled_e4m3_impl falls back to fp8_eager (torch.float8_e4m3fn casts) when the cached
    # extension is None; setting the cache first skips the build. Same numerics: amax / 448, clamp, round.
    if not hasattr(extensions.get_cuda_ext_fp8, "extension"):
        extensions.get_cuda_ext_fp8.extension = None
    return mtq


@contextlib.contextmanager
def _absent(libraries: tuple[str, ...]) -> Iterator[None]:
    """The libraries not imported yet look absent while ModelOpt imports, so it skips their plugins.

    ModelOpt imports every plugin whose library is installed, and a library's import can take seconds
    (docs/performance.md); a library's plugin is skipped on ModuleNotFoundError, which a None entry in sys.modules
    raises. A library already imported (a Hugging Face model) keeps its plugin. Process-wide while it lasts: another
    thread importing one of them then fails. ModelOpt imports once per process, so a Hugging Face model studied later
    in the same process (the TUI) runs without the plugin, which changes nothing a recipe here quantizes.
    """
    hidden = [name for name in libraries if name not in sys.modules]
    try:
        for name in hidden:
            sys.modules[name] = None  # type: ignore[assignment]
        yield
    finally:
        for name in hidden:
            if sys.modules.get(name, 0) is None:
                del sys.modules[name]


class Source(NamedTuple):
    """What every variant of a study is made from (`folded_reference`)."""

    module: torch.nn.Module
    batchnorm_folded: int  # BatchNorm layers folded into the convolutions they read
    made_plain: list[PlainLayer]  # layers of derived classes made instances of their base class (`plain_layers`)


def folded_reference(reference: torch.nn.Module, sample: torch.Tensor) -> Source:
    """A copy of `reference` with its layers of derived classes that compute their base class's operation made
    instances of the base class (`plain_layers`: a weight computed at every call as TensorRT's constant folding builds
    it), then every BatchNorm that reads a convolution's output folded into it; which layers, and how many folded.

    `sample` (one input batch) runs the model once to find the pairs. The copy computes what `reference`
    computes, up to rounding; an FP8 variant made from it finds nothing left to fold or make plain.
    """
    structure = model_structure(reference, sample.to(next(reference.parameters()).device))
    module = copy.deepcopy(reference)
    made_plain, folded = fold_into_weights(module, structure.conv_bn)
    return Source(module, folded, made_plain)


def bake_fp8_weights(built: VariantModule) -> int:
    """Each quantized layer's weight replaced by its fake-quantized value, its weight quantizer then switched off.

    The stored weight is what the weight quantizer returned (ModelOpt's fold_weight, amax kept for the
    records), so the forward computes the same numbers without quantizing the weights on every call.
    Only for running the module: the ONNX export reads the weight quantizers. Returns the weights baked.
    """
    if built.recipe is None:
        return 0
    _modelopt()
    modules = dict(built.module.named_modules())
    for path in sorted(built.quantized):
        modules[path].fold_weight(keep_attrs=True)
    return len(built.quantized)


def enable_fp8_quantizers(module: torch.nn.Module, paths: Sequence[str], weights: str) -> None:
    """FP8 weight and input quantizers on the layers at `paths` (weights per channel or per tensor), the others
    left off.

    One filter function per kind rather than a wildcard entry per layer: ModelOpt walks every module
    for every entry of a quant_cfg (what that cost a large model: docs/performance.md).
    """
    mtq = _modelopt()
    weight_axis = 0 if weights == "per-channel" else None
    for kind, axis in (("weight_quantizer", weight_axis), ("input_quantizer", None)):
        names = {f"{path}.{kind}" for path in paths}
        fp8 = mtq.QuantizerAttributeConfig(num_bits=(4, 3), axis=axis)
        mtq.set_quantizer_attributes_full(module, names.__contains__, fp8)


def disable_fp8_quantizers(module: torch.nn.Module, paths: set[str]) -> None:
    """The weight and input quantizers of the layers at `paths` switched off (their calibrated amax kept)."""
    for path, sub in module.named_modules():
        if path in paths:
            for kind in ("weight_quantizer", "input_quantizer"):
                quantizer = getattr(sub, kind, None)
                if quantizer is not None:
                    quantizer.disable()


def fold_into_weights(module: torch.nn.Module, conv_bn: list[tuple[str, str]]) -> tuple[list[PlainLayer], int]:
    """In place, what every graph the tool builds from a model folds into its weights, in this order: the layers
    of derived classes that compute their base class's operation made instances of it (`plain_layers`: convolutions
    of the weight they compute at every call, among them), then each BatchNorm of the `conv_bn` pairs folded into the
    convolution it reads (`fold_batchnorm`; folded into a weight that is then standardized, its scale would be
    normalized away). The layers made plain, and how many BatchNorm layers were folded."""
    made_plain = plain_layers(module)
    return made_plain, fold_batchnorm(module, conv_bn)


def fold_batchnorm(module: torch.nn.Module, pairs: list[tuple[str, str]]) -> int:
    """Each BatchNorm that reads a convolution's output folded into it (torch's fuse_conv_bn_eval)."""
    from torch.nn.utils.fusion import fuse_conv_bn_eval

    modules = dict(module.named_modules())
    folded = 0
    for conv_path, bn_path in pairs:
        bn = modules[bn_path]
        rest = _after_normalization(bn)
        if rest is None:
            continue
        module.set_submodule(conv_path, fuse_conv_bn_eval(modules[conv_path], bn))  # type: ignore[arg-type]
        module.set_submodule(bn_path, rest)
        folded += 1
    return folded


def folds(bn: torch.nn.Module) -> bool:
    """Whether `fold_batchnorm` folds the BatchNorm module `bn` into the convolution it reads."""
    return _after_normalization(bn) is not None


def _after_normalization(bn: torch.nn.Module) -> torch.nn.Module | None:
    """What remains of a BatchNorm module once its affine transform moves into the convolution.

    A plain BatchNorm leaves nothing; timm's BatchNormAct2d leaves its dropout and activation;
    an unknown subclass is not folded (None).
    """
    if type(bn) in (torch.nn.BatchNorm1d, torch.nn.BatchNorm2d, torch.nn.BatchNorm3d):
        return torch.nn.Identity()
    parts = [getattr(bn, name) for name in ("drop", "act") if isinstance(getattr(bn, name, None), torch.nn.Module)]
    if set(vars(bn)["_modules"]) - {"drop", "act"}:
        return None
    return torch.nn.Sequential(*parts) if parts else torch.nn.Identity()


def share_input_scales(module: torch.nn.Module, groups: list[list[str]]) -> int:
    """Layers that read one tensor get one input amax, their largest (the SegFormer study's key/value)."""
    modules = dict(module.named_modules())
    for group in groups:
        quantizers = [modules[path].input_quantizer for path in group]
        amax = torch.stack([q.amax.detach().float().reshape(()) for q in quantizers]).max()
        for quantizer in quantizers:
            quantizer.amax = amax.to(quantizer.amax.dtype)
    return len(groups)


def weight_bytes(module: torch.nn.Module, fp8_layers: set[str]) -> int:
    """Bytes of the parameters, counting the weights of `fp8_layers` at one byte per element."""
    total = 0
    for path, sub in module.named_modules():
        for name, param in sub.named_parameters(recurse=False):
            size = 1 if path in fp8_layers and name == "weight" else param.element_size()
            total += param.numel() * size
    return total


def _floor_amax(module: torch.nn.Module, keep: set[str]) -> tuple[int, int]:
    """Every amax below MIN_AMAX (zero, NaN, or tiny; channel by channel for per-channel weights) raised to it.

    A zero scale breaks ONNX export and TensorRT, and the graph floors every scale at 2^-14: the module
    simulates that floor. Returns how many quantizers saw only zeros (in some channel) and how many had
    a smaller positive amax.
    """
    zero = small = 0
    for path, sub in module.named_modules():
        if path not in keep:
            continue
        for attr in ("input_quantizer", "weight_quantizer"):
            amax = getattr(getattr(sub, attr, None), "amax", None)
            if not torch.is_tensor(amax):
                continue
            valid = torch.isfinite(amax) & (amax > 0)
            if not bool(valid.all()):
                zero += 1
            elif bool((amax < MIN_AMAX).any()):
                small += 1
            amax.data = torch.where(valid & (amax >= MIN_AMAX), amax, torch.full_like(amax, MIN_AMAX))
    return zero, small


def state_bytes(module: torch.nn.Module) -> int:
    return sum(t.numel() * t.element_size() for t in module.state_dict().values() if torch.is_tensor(t))
