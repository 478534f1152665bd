"""The why in numbers: each layer's and group's achieved TFLOP/s and GB/s against the GPU's peaks, and what bounds it.

The model is Nsight Compute's roofline: a kernel's attainable rate is min(peak FLOP/s, arithmetic intensity x
memory bandwidth), so the work of a layer takes at least max(FLOPs / peak, bytes / bandwidth). Here, per layer:

- **Work** (`work_of`): FLOPs and bytes from the shapes the session records, nothing else. A convolution:
  2 x N x K x Ho x Wo x (C / groups) x R x S FLOPs; a matrix product: 2 x (output elements) x (inner dimension).
  Bytes: the compulsory traffic, each input, weight and output element moved once at its stored width (fp8 1,
  fp16 / bf16 2, fp32 4 bytes): a lower bound of the real traffic, so GB/s achieved is one too. Shapes come from
  the layer's recorded tensors (TensorRT's files), else its cuDNN graph signature (`in=NxCxHxW k= r= s= p= d= g=
  out=`), else those of the layer of the same name in another variant of the same job (the same model and input,
  so the same shapes; the operand widths are this layer's own precision). A layer with none has no work: its
  figures stay empty. The PyTorch and cuDNN backends record no token count for linear layers.
- **Peaks** (`peaks_of`): dense tensor-core FLOP/s for fp16, FP8 and TF32 (and fp32 without tensor cores) are the
  session's SM count x its recorded maximum SM clock x FLOP per SM per clock from `PER_SM_CLOCK`, a table keyed by
  compute capability (and SM count where parts of one capability differ), from NVIDIA's architecture documents.
  Memory bandwidth is NVIDIA's datasheet figure from `BANDWIDTH`, matched by compute capability, SM count and
  memory size (the session records no bus width). What is not in the tables stays unknown, and says so.
- **Bound** (`bound_of`): three floors under the layer's time: compute (FLOPs / peak), memory (bytes /
  bandwidth) and launch (its kernels per call x the shortest kernel of the variant's trace: what a kernel that does
  almost nothing costs on this GPU, which no precision shortens). The highest floor is the roof the layer meets
  first, and names its bound: "compute", "memory" or "launch". A layer whose measured time is over `LATENCY_FACTOR`
  times that roof is "latency" bound instead: far below every roof, its kernels (stalls, a poor algorithm, a
  fallback) limit it, not the GPU's peaks (Nsight Compute's "latency issues" when no throughput nears its peak).
  The peak is that of the precision the layer computes in; an FP8 layer whose kernels all name an architecture
  without FP8 tensor cores (`sessions.analyses.lowering.kernel_arch`) is held to the fp16 peak; an fp32 product
  to the TF32 peak where the session's PyTorch settings let it run on TF32 tensor cores (`tf32_cudnn` for
  convolutions, `tf32_matmul` for matrix products).
- **What FP8 cannot speed up** (`fp8_floor`): FP8 shortens a layer through FP8 tensor-core math or FP8 operands
  in memory, and only where the layer computes a convolution or a matrix product (`TENSOR_OPS`); a launch-bound
  layer's time is its kernels' fixed cost. So the time of launch-bound products and of layers that compute no
  product (pooling, elementwise, normalization, quantize, copies) is time FP8 cannot take away. Latency-bound
  products are counted apart: a better kernel could shorten them, in any precision.

Times are the layers' per-call kernel times (`Layer.time_ms`: the mean over the traced calls).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from math import prod

from sessions.analyses.groups import Rules, kernels_per_layer, role_of
from sessions.analyses.lowering import FP8_TENSOR_CORES, kernel_arch
from sessions.documents.model import Layer, Session, Variant

LATENCY_FACTOR = 10.0  # measured time over this many times the layer's highest floor: latency bound
TENSOR_OPS = ("conv", "linear", "matmul")  # layers FP8 can speed up: a product on tensor cores
BYTES = {"fp8": 1, "int8": 1, "fp16": 2, "bf16": 2, "fp32": 4}  # stored width of an element
PEAK_OF = {"fp8": "fp8", "int8": "fp8", "fp16": "fp16", "bf16": "fp16", "fp32": "fp32"}  # precision -> peak used
# Dense FLOP per SM per clock (fp16, fp8 and tf32: tensor cores, fp32 accumulate; fp32: the FMA units), by compute
# capability and, where parts of one capability differ, SM count. From NVIDIA's architecture whitepapers: A100
# (GA100), Ada (AD102 / AD104: the professional parts' fp32-accumulate rate; GeForce's is half), Hopper (GH100).
PER_SM_CLOCK: dict[tuple[str, int | None], dict[str, int]] = {
    ("8.0", None): {"fp16": 2048, "tf32": 1024, "fp32": 128},
    ("8.9", 142): {"fp16": 1024, "fp8": 2048, "tf32": 512, "fp32": 256},  # L40S, RTX 6000 Ada
    ("8.9", 58): {"fp16": 1024, "fp8": 2048, "tf32": 512, "fp32": 256},  # L4
    ("8.9", 128): {"fp16": 512, "fp8": 1024, "tf32": 256, "fp32": 256},  # GeForce RTX 4090
    ("9.0", None): {"fp16": 4096, "fp8": 8192, "tf32": 2048, "fp32": 256},  # H100, H200
}
# NVIDIA datasheet memory bandwidth (GB/s) by compute capability, SM count and memory (MiB as the driver reports it;
# a recorded size within MEMORY_MATCH of it matches: drivers report a few percent less than the part carries)
MEMORY_MATCH = 0.05
BANDWIDTH: list[tuple[str, int, int, float, str]] = [
    ("8.0", 108, 40_960, 1555.0, "A100 40GB SXM"),
    ("8.0", 108, 81_920, 2039.0, "A100 80GB SXM"),
    ("8.9", 142, 46_068, 864.0, "L40S"),
    ("8.9", 58, 23_034, 300.0, "L4"),
    ("8.9", 128, 24_564, 1008.0, "GeForce RTX 4090"),
    ("9.0", 114, 81_559, 2000.0, "H100 PCIe"),
    ("9.0", 132, 81_559, 3350.0, "H100 SXM"),
    ("9.0", 132, 143_771, 4800.0, "H200 SXM"),
]
# a cuDNN graph's signature (the engine's `ConvSignature.key`): the convolution, then words after `out=` that say how
# the same convolution is defined (` scale=1`, ` matmul`) or timed (` cold-w`) and change none of its work
_SIGNATURE = re.compile(r"^conv (\w+) in=(\d+)x(\d+)x(\d+)x(\d+) k=(\d+) r=\((\d+), (\d+)\) s=\((\d+), (\d+)\) "
                        r"p=\((\d+), (\d+)\) d=\((\d+), (\d+)\) g=(\d+) .*out=(\w+)"
                        r"(?: scale=1)?(?: matmul)?(?: cold-w)?$")


@dataclass(frozen=True)
class Peaks:
    flops: dict[str, float]  # "fp16" / "fp8" / "fp32" -> FLOP/s; a precision the GPU lacks is absent
    bandwidth: float | None  # bytes/s; None: not in BANDWIDTH
    source: str  # where each figure comes from, in words


@dataclass(frozen=True)
class Work:
    flops: float
    bytes: float
    precision: str  # the precision whose peak the product is held to (PEAK_OF's key)
    how: str  # which shapes it stands on: "tensors", "signature", or "signature of <variant>"


@dataclass(frozen=True)
class LayerRoof:
    layer: str
    op: str | None
    time_ms: float | None
    kernels: float | None  # per call
    work: Work | None
    tflops: float | None  # achieved
    gbps: float | None
    compute_share: float | None  # of the peak of the layer's precision
    memory_share: float | None  # of the bandwidth
    bound: str | None  # compute | memory | launch | latency; None: no work, no time or no peaks
    fp8_can_speed: bool | None  # False: launch bound or no product; None: a product without shapes (unknown)


def peaks_of(session: Session) -> Peaks | None:
    """The GPU's peaks from its recorded properties and the tables above; None on a CPU or without the properties."""
    gpu = session.environment.gpu
    if gpu is None or gpu.compute_capability is None or not gpu.multiprocessors:
        return None
    clock = gpu.max_sm_clock_mhz or gpu.sm_clock_mhz
    rates = PER_SM_CLOCK.get((gpu.compute_capability, gpu.multiprocessors)) or PER_SM_CLOCK.get(
        (gpu.compute_capability, None))
    flops = {p: gpu.multiprocessors * clock * 1e6 * r for p, r in rates.items()} if rates and clock else {}
    rate_words = (f"FLOP/s = {gpu.multiprocessors} SMs x {clock} MHz (maximum SM clock recorded) x dense FLOP per SM "
                  f"per clock for compute capability {gpu.compute_capability} "
                  f"({', '.join(f'{p} {r}' for p, r in rates.items())})") if flops and rates else (
        f"no FLOP rate known for compute capability {gpu.compute_capability} with {gpu.multiprocessors} SMs")
    match = next((row for row in BANDWIDTH if row[0] == gpu.compute_capability and row[1] == gpu.multiprocessors
                  and gpu.memory_mib and abs(gpu.memory_mib - row[2]) <= MEMORY_MATCH * row[2]), None)
    bandwidth = match[3] * 1e9 if match else None
    bw_words = (f"bandwidth {match[3]:g} GB/s: NVIDIA's datasheet for the {match[4]} (compute capability {match[0]}, "
                f"{match[1]} SMs, {match[2]} MiB)") if match else "no memory bandwidth known for this GPU"
    return Peaks(flops, bandwidth, f"{rate_words}; {bw_words}")


def _signature_work(signature: str, precision: str | None) -> Work | None:
    """A convolution's work from its cuDNN graph signature; operand widths from `precision` where given (a layer
    that borrows another variant's shapes), else from the signature's own types."""
    m = _SIGNATURE.match(signature)
    if m is None:
        return None
    typ, (n, c, h, w, k, r, s, sh, sw, ph, pw, dh, dw, g), out = m.group(1), map(int, m.groups()[1:15]), m.group(16)
    if min(n, c, h, w, k, r, s, sh, sw, dh, dw, g) <= 0 or c % g:  # not a convolution any library runs
        return None
    ho, wo = (h + 2 * ph - dh * (r - 1) - 1) // sh + 1, (w + 2 * pw - dw * (s - 1) - 1) // sw + 1
    flops = 2.0 * n * k * ho * wo * (c // g) * r * s
    operand = BYTES.get(precision or typ, 2)
    result = BYTES.get(precision or out, 2)
    moved = (n * c * h * w + k * (c // g) * r * s) * operand + n * k * ho * wo * result
    return Work(flops, float(moved), PEAK_OF.get(precision or typ, "fp16"), "signature")


def _tensor_work(layer: Layer) -> Work | None:
    """Work from the layer's recorded tensors (TensorRT's layer information): convolutions and matrix products."""
    ins = [(t.shape, t.dtype) for t in layer.inputs if t.shape and all(d > 0 for d in t.shape)]
    outs = [(t.shape, t.dtype) for t in layer.outputs if t.shape and all(d > 0 for d in t.shape)]
    if not ins or not outs or layer.op not in TENSOR_OPS:
        return None
    (x, x_type), (y, y_type) = ins[0], outs[0]
    assert x is not None and y is not None  # kept above: recorded, every dimension known
    precision = layer.precision or x_type or "fp16"
    width = BYTES.get(x_type or precision, 2)
    groups, kernel = layer.groups or 1, layer.kernel_shape or []
    if layer.op == "conv" and len(x) == 4 and len(y) == 4 and kernel and min(kernel) > 0 and groups > 0 \
            and x[1] % groups == 0:
        weights = y[1] * (x[1] // groups) * prod(kernel)
        flops = 2.0 * prod(y) * (x[1] // groups) * prod(kernel)
    elif layer.op in ("linear", "matmul"):
        weights = x[-1] * y[-1] if len(ins) == 1 else prod(ins[1][0] or [])
        flops = 2.0 * prod(y) * x[-1]
    else:
        return None
    moved = prod(x) * width + weights * width + prod(y) * BYTES.get(y_type or precision, 2)
    return Work(flops, float(moved), PEAK_OF.get(precision, "fp16"), "tensors")


def work_of(session: Session, variant: Variant, layer: Layer) -> Work | None:
    """The layer's FLOPs and bytes per call from recorded shapes (see the module's contract); None without them."""
    found = _tensor_work(layer)
    if found is None and layer.op == "conv" and isinstance(layer.attrs.get("signature"), str):
        found = _signature_work(layer.attrs["signature"], None)
    if found is not None or layer.op != "conv" or layer.precision not in BYTES:
        return found
    for other in session.variants:
        if other is variant or other.job != variant.job:
            continue
        twin = next((t for t in other.layers if t.name == layer.name and isinstance(t.attrs.get("signature"), str)),
                    None)
        if twin is not None and twin.groups == layer.groups and twin.out_channels == layer.out_channels:
            borrowed = _signature_work(twin.attrs["signature"], layer.precision)
            if borrowed is not None:
                return Work(borrowed.flops, borrowed.bytes, borrowed.precision, f"signature of {other.name}")
    return None


def _below_fp8(variant: Variant) -> set[int]:
    """Layers whose kernels all name an architecture without FP8 tensor cores."""
    table = variant.kernels
    if table is None:
        return set()
    archs: dict[int, list[tuple[int, int] | None]] = {}
    for owner, name_id in set(zip(table.layer, table.name, strict=False)):
        archs.setdefault(owner, []).append(kernel_arch(table.names[name_id]))
    return {i for i, found in archs.items() if None not in found and max(a for a in found if a) < FP8_TENSOR_CORES}


def _tf32(session: Session, layer: Layer) -> bool:
    """Whether the session's PyTorch settings let this fp32 product run on TF32 tensor cores."""
    torch = session.environment.torch
    if torch is None:
        return False
    return bool(torch.tf32_cudnn if layer.op == "conv" else torch.tf32_matmul)


def shortest_kernel_ms(variant: Variant) -> float | None:
    """The shortest kernel of the variant's traced calls: what a kernel that does almost nothing costs here."""
    table = variant.kernels
    return min(table.duration_ns) / 1e6 if table is not None and len(table) and variant.trace and \
        variant.trace.unit == "kernel" else None


def bound_of(work: Work, peaks: Peaks, kernels: float | None, floor_ms: float | None,
             time_ms: float | None) -> str | None:
    """compute / memory / launch / latency by the module's rule; None where the peak of the work's precision, the
    bandwidth or the measured time is unknown."""
    peak = peaks.flops.get(work.precision)
    if peak is None or peaks.bandwidth is None or not time_ms:
        return None
    floors = {"compute": work.flops / peak * 1e3, "memory": work.bytes / peaks.bandwidth * 1e3,
              "launch": (kernels or 0.0) * (floor_ms or 0.0)}
    bound = max(floors, key=lambda name: floors[name])
    return "latency" if time_ms > LATENCY_FACTOR * floors[bound] else bound


def layer_roofs(session: Session, variant: Variant) -> list[LayerRoof]:
    """Every layer of `variant` with its work, achieved rates, shares of the peaks and bound, in layer order."""
    peaks = peaks_of(session) if variant.device == "cuda" else None
    per_layer = kernels_per_layer(variant)
    floor = shortest_kernel_ms(variant)
    below = _below_fp8(variant)
    found = []
    for i, layer in enumerate(variant.layers):
        work = work_of(session, variant, layer)
        if work is not None and work.precision == "fp8" and i in below:
            work = Work(work.flops, work.bytes, "fp16", work.how + ", on kernels without FP8 tensor cores")
        elif work is not None and work.precision == "fp32" and _tf32(session, layer):
            work = Work(work.flops, work.bytes, "tf32", work.how + ", TF32 allowed")
        kernels = per_layer[i] if per_layer is not None else None
        seconds = layer.time_ms / 1e3 if layer.time_ms else None
        tflops = work.flops / seconds / 1e12 if work and seconds else None
        gbps = work.bytes / seconds / 1e9 if work and seconds else None
        peak = peaks.flops.get(work.precision) if peaks and work else None
        bound = bound_of(work, peaks, kernels, floor, layer.time_ms) if peaks and work else None
        can = (bound != "launch" if bound else None) if layer.op in TENSOR_OPS else False
        found.append(LayerRoof(layer.name, layer.op, layer.time_ms, kernels, work, tflops, gbps,
                               tflops * 1e12 / peak if tflops is not None and peak else None,
                               gbps * 1e9 / peaks.bandwidth if gbps is not None and peaks and peaks.bandwidth else None,
                               bound, can))
    return found


@dataclass(frozen=True)
class GroupRoof:
    group: str
    time_ms: float  # every layer's
    measured_ms: float  # of the layers with work: what the rates stand on
    tflops: float | None
    gbps: float | None
    bounds: dict[str, float]  # bound -> ms of the group's time
    precision: str | None  # the peak its layers with work are held to, where they share one
    compute_share: float | None  # of that peak
    memory_share: float | None  # of the bandwidth


def group_roofs(roofs: list[LayerRoof], layers: list[Layer], rules: Rules,
                peaks: Peaks | None = None) -> list[GroupRoof]:
    """Per role group (`sessions.analyses.groups.role_of`): summed FLOPs and bytes over the summed time of the layers
    with work, their shares of `peaks` (the compute share only where those layers share one precision), and the
    group's time by bound; most time first."""
    groups: dict[str, list[LayerRoof]] = {}
    for roof, layer in zip(roofs, layers, strict=False):
        groups.setdefault(role_of(layer, rules), []).append(roof)
    found = []
    for group, members in groups.items():
        with_work = [r for r in members if r.work is not None and r.time_ms]
        measured = sum(r.time_ms or 0.0 for r in with_work)
        bounds: dict[str, float] = {}
        for r in members:
            if r.bound and r.time_ms:
                bounds[r.bound] = bounds.get(r.bound, 0.0) + r.time_ms
        tflops = sum(r.work.flops for r in with_work if r.work) / measured / 1e9 if measured else None
        gbps = sum(r.work.bytes for r in with_work if r.work) / measured / 1e6 if measured else None
        precisions = {r.work.precision for r in with_work if r.work}
        precision = precisions.pop() if len(precisions) == 1 else None
        peak = peaks.flops.get(precision) if peaks and precision else None
        found.append(GroupRoof(group, sum(r.time_ms or 0.0 for r in members), measured, tflops, gbps, bounds, precision,
                               tflops * 1e12 / peak if tflops is not None and peak else None,
                               gbps * 1e9 / peaks.bandwidth
                               if gbps is not None and peaks and peaks.bandwidth else None))
    return sorted(found, key=lambda g: -g.time_ms)


@dataclass(frozen=True)
class Fp8Floor:
    """How much of an FP8 variant's layer time FP8 cannot take away (the module's rule), in ms per call."""

    total_ms: float
    launch_ms: float  # launch-bound products
    no_product_ms: float  # layers that compute no convolution or matrix product
    latency_ms: float  # latency-bound products: a better kernel could shorten them, FP8 or not
    unknown_ms: float  # products without recorded shapes: not counted either way

    @property
    def cannot_ms(self) -> float:
        return self.launch_ms + self.no_product_ms


def fp8_floor(session: Session, variant: Variant) -> Fp8Floor | None:
    """The split of `variant`'s layer time; None unless it is a real (not simulated) FP8 variant on a GPU whose
    peaks are known."""
    if variant.precision != "fp8" or variant.simulated or variant.device != "cuda" or peaks_of(session) is None:
        return None
    roofs = layer_roofs(session, variant)
    launch = sum(r.time_ms or 0.0 for r in roofs if r.bound == "launch" and r.op in TENSOR_OPS)
    no_product = sum(r.time_ms or 0.0 for r in roofs if r.op not in TENSOR_OPS)
    latency = sum(r.time_ms or 0.0 for r in roofs if r.bound == "latency" and r.op in TENSOR_OPS)
    unknown = sum(r.time_ms or 0.0 for r in roofs if r.fp8_can_speed is None)
    total = sum(r.time_ms or 0.0 for r in roofs)
    return Fp8Floor(total, launch, no_product, latency, unknown) if total > 0 else None
