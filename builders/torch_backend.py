"""The PyTorch backend: fp32 / fp16 / bf16 copies of the model, and FP8 through NVIDIA ModelOpt.

FP8 here is ModelOpt's simulated quantization (fake quant: quantize, then dequantize, then run the
convolution in the base precision). Its numerics are the FP8 recipe's; its speed is not FP8 kernel
speed, and every session says so.
"""

from __future__ import annotations

import contextlib
import copy
import time

import torch

from builders.backend import BuildResult, VariantSpec
from builders.fp8_layouts import select_convolutions
from builders.models import LoadedModel
from profilers.module_ranges import module_name, module_ranges
from sessions.errors import InputError, MissingEnvironment
from sessions.model import Layer, Recipe, Variant

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
FP8_NOTE = (
    "simulated FP8 (ModelOpt fake quantization): quality reflects the FP8 recipe, time is not FP8 kernel speed"
)


def _conv_layer(path: str, module: torch.nn.Module) -> Layer:
    layer = Layer(name=module_name(path), kind=type(module).__name__)
    if isinstance(module, torch.nn.modules.conv._ConvNd):
        layer.groups = module.groups
        layer.kernel_shape = list(module.kernel_size)
        layer.attrs.update(
            in_channels=module.in_channels,
            out_channels=module.out_channels,
            stride=list(module.stride),
            op="conv",
        )
    elif isinstance(module, torch.nn.Linear):
        layer.attrs.update(in_features=module.in_features, out_features=module.out_features, op="linear")
    return layer


class TorchEngine:
    def __init__(self, module: torch.nn.Module, device: str, dtype: torch.dtype, static_input: torch.Tensor):
        self.module = module
        self.device = device
        self.dtype = dtype
        self.static_input = static_input.to(device=device, dtype=dtype)
        self._graph: torch.cuda.CUDAGraph | None = None
        self.quantized: set[str] = set()
        self.graph_error: str | None = None

    @torch.no_grad()
    def infer(self, batch: torch.Tensor) -> torch.Tensor:
        return self.module(batch.to(device=self.device, dtype=self.dtype)).float().cpu()

    @torch.no_grad()
    def run_once(self) -> None:
        self.module(self.static_input)

    def timing_step(self):
        if self.device != "cuda":
            return self.run_once, False
        if self._graph is None and self.graph_error is None:
            self._capture()
        if self._graph is not None:
            return self._graph.replay, True
        return self.run_once, False

    @torch.no_grad()
    def _capture(self) -> None:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        try:
            with torch.cuda.stream(side):
                for _ in range(3):
                    self.module(self.static_input)
            torch.cuda.current_stream().wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                self._graph_output = self.module(self.static_input)  # kept: the graph writes into it
            self._graph = graph
        except RuntimeError as exc:
            self.graph_error = f"CUDA graph capture failed, timed eagerly: {str(exc).splitlines()[0]}"
            torch.cuda.synchronize()

    def layer_ranges(self, kind: str):
        return module_ranges(self.module, kind)

    def layers(self) -> list[Layer]:
        layers = []
        for path, module in self.module.named_modules():
            layer = _conv_layer(path, module)
            layer.precision = _precision_name(self.dtype)
            if path in self.quantized:
                layer.precision = "fp8"
                layer.attrs["quantized"] = True
            layers.append(layer)
        return layers

    def release(self) -> None:
        self._graph = None
        self.module = None
        if self.device == "cuda":
            torch.cuda.empty_cache()


MIN_AMAX = 1e-6


def _clamp_zero_amax(module: torch.nn.Module, keep: set[str]) -> int:
    """Quantizers that saw only zeros get a tiny amax: a zero scale breaks ONNX export and TensorRT."""
    clamped = 0
    for path, sub in module.named_modules():
        if path not in keep:
            continue
        for attr in ("input_quantizer", "weight_quantizer"):
            amax = getattr(getattr(sub, attr, None), "amax", None)
            if torch.is_tensor(amax) and not bool(torch.all(torch.isfinite(amax) & (amax > 0))):
                amax.data = torch.where(torch.isfinite(amax) & (amax > 0), amax, torch.full_like(amax, MIN_AMAX))
                clamped += 1
    return clamped


def _precision_name(dtype: torch.dtype) -> str:
    return {v: k for k, v in DTYPES.items()}[dtype]


def _state_bytes(module: torch.nn.Module) -> int:
    return sum(t.numel() * t.element_size() for t in module.state_dict().values() if torch.is_tensor(t))


class TorchBackend:
    name = "torch"

    def __init__(self, model: LoadedModel, device: str, static_input: torch.Tensor, fp8_base: torch.dtype | None = None):
        if model.module is None:
            raise InputError(f"{model.name}: ONNX files run on the TensorRT backend only (--backend tensorrt)")
        if device == "cuda" and not torch.cuda.is_available():
            raise MissingEnvironment("--device cuda: PyTorch sees no CUDA GPU here")
        self.model = model
        self.device = device
        self.static_input = static_input
        self.fp8_base = fp8_base
        self._reference = model.module.to(device=device, dtype=torch.float32).eval()

    @torch.no_grad()
    def reference(self, batch: torch.Tensor) -> torch.Tensor:
        return self._reference(batch.to(self.device)).float().cpu()

    def build(self, spec: VariantSpec, calibration: torch.Tensor) -> BuildResult:
        start = time.perf_counter()
        if spec.precision == "fp32":
            module = self._reference
            dtype = torch.float32
        elif spec.precision in DTYPES:
            dtype = DTYPES[spec.precision]
            module = copy.deepcopy(self._reference).to(dtype=dtype)
        else:
            return self._build_fp8(spec, calibration, start)
        engine = TorchEngine(module, self.device, dtype, self.static_input)
        if self.device == "cuda":
            torch.cuda.synchronize()
        variant = Variant(
            name=spec.name,
            backend=self.name,
            precision=spec.precision,
            device=self.device,
            build_s=time.perf_counter() - start,
            artifact_bytes=_state_bytes(module),
        )
        return BuildResult(engine, variant)

    def _build_fp8(self, spec: VariantSpec, calibration: torch.Tensor, start: float) -> BuildResult:
        try:
            import modelopt.torch.quantization as mtq
        except ImportError as exc:
            raise MissingEnvironment(f"FP8 variants need nvidia-modelopt: {exc}") from None
        # FP8 runs on an fp16 model on the GPU (as a TensorRT FP8 engine keeps fp16 elsewhere),
        # on an fp32 model on the CPU, where fp16 convolutions are slow.
        dtype = self.fp8_base or (torch.float16 if self.device == "cuda" else torch.float32)
        module = copy.deepcopy(self._reference).to(dtype=dtype)
        selection = select_convolutions(module, spec.layout or "all", list(spec.exclude))
        if not selection.quantized:
            raise InputError(f"{spec.name}: the layout and exclusions leave no convolution to quantize")
        calib = calibration.to(device=self.device, dtype=dtype)

        def forward_loop(m: torch.nn.Module) -> None:
            with torch.no_grad():
                for i in range(0, calib.shape[0], self.static_input.shape[0]):
                    m(calib[i : i + self.static_input.shape[0]])

        config = copy.deepcopy(mtq.FP8_DEFAULT_CFG)
        with contextlib.redirect_stdout(None):  # ModelOpt prints a summary line per call
            module = mtq.quantize(module, config, forward_loop=forward_loop)
        keep = set(selection.quantized)
        for path, sub in module.named_modules():
            if path in keep:
                continue
            for attr in ("input_quantizer", "weight_quantizer", "output_quantizer"):
                quantizer = getattr(sub, attr, None)
                if quantizer is not None and hasattr(quantizer, "disable"):
                    quantizer.disable()
        zero_amax = _clamp_zero_amax(module, keep)
        engine = TorchEngine(module, self.device, dtype, self.static_input)
        engine.quantized = keep
        if self.device == "cuda":
            torch.cuda.synchronize()
        recipe = Recipe(
            method=f"ModelOpt {mtq.__name__} quantize(FP8_DEFAULT_CFG), then quantizers outside the layout disabled",
            number_format="fp8 e4m3 (simulated)",
            layout=spec.layout,
            exclude_patterns=list(spec.exclude),
            quantized=selection.quantized,
            excluded=selection.excluded,
            scales="activations: static per-tensor, max calibration; weights: per-tensor (FP8_DEFAULT_CFG)",
            calibration_source="",  # filled in by the study, which owns the images
            calibration_count=int(calib.shape[0]),
        )
        variant = Variant(
            name=spec.name,
            backend=self.name,
            precision="fp8",
            device=self.device,
            simulated=True,
            recipe=recipe,
            build_s=time.perf_counter() - start,
            artifact_bytes=_state_bytes(module),
            notes=[FP8_NOTE, f"base precision {_precision_name(dtype)}"]
            + ([f"{zero_amax} quantizers saw only zeros in calibration; their amax was raised to {MIN_AMAX:g}"] if zero_amax else []),
        )
        return BuildResult(engine, variant)

