"""The FP8 probe's measurements as a normal session: one variant per precision, one layer per
convolution or linear (and one quantize layer in front of each FP8 layer), kernels and layer times from the trace.

Pure: builds from measured records, so it is tested without a GPU.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from builders.models.layer_spec import LayerSpec
from profilers.attribution import LayerIndex, TraceRecords, summarize
from profilers.stats import latency_stats
from sessions.documents.model import Layer, Tensor, Variant
from sessions.documents.vocab import DType, Precision

QUANTIZER_SUFFIX = ".input_quantizer"  # the groups' "quantize / dequantize" role matches `_quantizer$`
QUANTIZE_KIND = "Quantize"
STEPS = ("fp16", "fp8", "quantize", "amax")  # what is timed per unique shape
ISOLATED = "isolated"  # a layer's attribute: the isolated timing of its shape (`isolated_timing`)
UNTRACED_NOTE = "not traced: each layer's time is the isolated timing of its shape (CUDA-graph replays, L2-warm)"
UNATTRIBUTED_NOTE = ("{count} layers had no kernel attributed in the trace (records dropped, or a range not matched): "
                     "their times are the isolated timings of their shapes")


@dataclass
class ProbedLayer:
    """One convolution or linear as the probe saw it on the study images."""

    name: str
    kind: str  # the module class
    spec: LayerSpec
    fp8_path: str | None  # what ran in FP8; None where no FP8 kernel exists
    refusals: list[str] = field(default_factory=list)  # why the engine has no FP8 kernel for it
    rel_error: float | None = None  # |y_fp8 - y_fp16| / |y_fp16| on the real activation
    zero_input: bool = False  # the real activation was all zeros (random weights)
    fp16_path: str = ""  # what ran in fp16


@dataclass
class ShapeTimes:
    """Per-call samples (ms) of one unique spec, measured on the layer `measured_as`."""

    measured_as: str
    samples: dict[str, list[float]]  # step (STEPS) -> ms per call
    reps: dict[str, int]  # step -> calls per timed CUDA-graph replay
    graphed: bool  # every step ran as a CUDA-graph replay
    note: str = ""
    gpu_state: str | None = None  # the GPU state its graphs were timed in (StudyDevice.settle)


def quantizer_name(layer: str) -> str:
    return layer + QUANTIZER_SUFFIX


def _median(samples: list[float] | None) -> float | None:
    return latency_stats(samples).median_ms if samples else None


def _cov(samples: list[float] | None) -> float | None:
    return latency_stats(samples).cov if samples else None


def _shape_attrs(spec: LayerSpec, times: ShapeTimes, same_shape: int, step: str) -> dict:
    """What the layer is (its shape, padding and dilation) and, under `ISOLATED`, how its shape was timed alone."""
    attrs: dict = {"shape": spec.label(), ISOLATED: isolated_timing(times, same_shape, step)}
    if spec.op == "conv":
        attrs.update(padding=list(spec.padding), dilation=list(spec.dilation))
    return attrs


def isolated_timing(times: ShapeTimes, same_shape: int, step: str) -> dict:
    """The isolated timing of a layer's shape, one group of attributes: its median ms per call (`ms`), per-sample CoV,
    the calls of one timed replay, the layer it was measured on, how many layers share the shape, whether it ran as
    a CUDA-graph replay, and any note of the measurement."""
    timing: dict = {"ms": _median(times.samples.get(step)), "cov": _cov(times.samples.get(step)),
                    "calls_per_replay": times.reps.get(step), "measured_as": times.measured_as,
                    "same_shape_layers": same_shape, "cuda_graph": times.graphed}
    if times.note:
        timing["note"] = times.note
    return timing


def _fp8_format(spec: LayerSpec) -> str:
    return "NHWC" if spec.op == "conv" else "row-major"


def _layer(probed: ProbedLayer, times: ShapeTimes, same_shape: int, step: str, precision: DType) -> Layer:
    spec = probed.spec
    conv = spec.op == "conv"
    layer = Layer(
        name=probed.name,
        kind=probed.kind,
        op="conv" if conv else "linear",
        time_ms=_median(times.samples.get(step)),
        precision=precision,
        groups=spec.groups if conv else None,
        kernel_shape=list(spec.kernel) if conv else None,
        in_channels=spec.in_channels,
        out_channels=spec.out_channels,
        stride=list(spec.stride) if conv else None,
        inputs=[Tensor(dtype=precision, shape=list(spec.input_shape),
                       format=_fp8_format(spec) if precision == "fp8" else None)],
        outputs=[Tensor(dtype="fp16", shape=list(spec.output_shape()))],
        tactic=(probed.fp8_path if precision == "fp8" else probed.fp16_path) or None,
        quantized=precision == "fp8",
        attrs=_shape_attrs(spec, times, same_shape, step),
    )
    return layer


def fp16_layers(probed: list[ProbedLayer], times: dict[LayerSpec, ShapeTimes]) -> list[Layer]:
    counts = _counts(probed)
    return [_layer(p, times[p.spec], counts[p.spec], "fp16", "fp16") for p in probed]


def _quantize_layer(probed: ProbedLayer, times: ShapeTimes, same_shape: int) -> Layer:
    spec, samples = probed.spec, times.samples
    return Layer(
        name=quantizer_name(probed.name),
        kind=QUANTIZE_KIND,
        op="quantize",
        time_ms=_median(samples.get("quantize")),
        precision="fp8",
        inputs=[Tensor(dtype="fp16", shape=list(spec.input_shape))],
        outputs=[Tensor(dtype="fp8", shape=list(spec.input_shape), format=_fp8_format(spec))],
        quantized=True,
        attrs={"quantizes": probed.name,
               ISOLATED: {**isolated_timing(times, same_shape, "quantize"), "measured_as":
                          quantizer_name(times.measured_as), "dynamic_amax_ms": _median(samples.get("amax"))}},
    )


def fp8_layers(probed: list[ProbedLayer], times: dict[LayerSpec, ShapeTimes]) -> list[Layer]:
    """Each FP8 layer behind its own quantize layer; a layer without an FP8 kernel stays fp16, as an
    engine would keep it."""
    counts = _counts(probed)
    layers = []
    for p in probed:
        shape_times = times[p.spec]
        if p.fp8_path is None:
            layer = _layer(p, shape_times, counts[p.spec], "fp16", "fp16")
            layer.attrs["no_fp8_kernel"] = "; ".join(p.refusals) or "no FP8 path for this layer"
            layers.append(layer)
            continue
        layers.append(_quantize_layer(p, shape_times, counts[p.spec]))
        layer = _layer(p, shape_times, counts[p.spec], "fp8", "fp8")
        layer.attrs.update(fp8_path=p.fp8_path, rel_error=p.rel_error, zero_input=p.zero_input)
        layers.append(layer)
    return layers


def _counts(probed: list[ProbedLayer]) -> dict[LayerSpec, int]:
    counts: dict[LayerSpec, int] = {}
    for p in probed:
        counts[p.spec] = counts.get(p.spec, 0) + 1
    return counts


def probe_variant(name: str, precision: Precision, layers: list[Layer], records: TraceRecords | None,
                  notes: list[str]) -> Variant:
    """A variant whose layer times are their own kernels' GPU time per traced call (every layer run once per call,
    in model order, on its own input), as a study times an engine's layers, so the two compare layer by layer; each
    layer keeps the isolated timing of its shape under `attrs[ISOLATED]`. Without records (nothing traced), and for
    a layer the trace attributed no kernel to, the time is the isolated timing, and the variant's notes say so."""
    variant = Variant(name=name, backend="torch", precision=precision, device="cuda", layers=layers, notes=list(notes))
    if records is None:
        variant.notes.append(UNTRACED_NOTE)
        return variant
    index = LayerIndex(list(layers))
    table, summary = summarize(records, index)  # each layer's time: its kernels' per traced call
    owned = {owner for owner in table.layer if owner >= 0}
    unattributed = [layer for i, layer in enumerate(index.layers) if i not in owned and ISOLATED in layer.attrs]
    for layer in unattributed:
        layer.time_ms, layer.call_times_ms = layer.attrs[ISOLATED]["ms"], []
    if unattributed:
        variant.notes.append(UNATTRIBUTED_NOTE.format(count=len(unattributed)))
    variant.layers = index.layers  # names the trace saw outside the probe's layers are appended
    variant.kernels, variant.trace = table, summary
    return variant
