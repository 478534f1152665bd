"""The session document: what a study measured, written by every source, read by every view.

A session is plain data (JSON through orjson, never pickles). `SCHEMA_VERSION` rises whenever a
field changes meaning; loaders refuse newer versions rather than guess.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sessions.documents.errors import InputError
from sessions.documents.plan import StudyPlan
from sessions.documents.vocab import Device, DType, Op, Precision, Source, Status, Timer, TraceUnit

SCHEMA_VERSION = 3  # 2: typed layers, the study plan; 3: no batch sentinel; sessions.documents.migrations reads 1 and 2
TOOL = "trt-inspect"


@dataclass
class Study:
    """What was asked for: the model, its input, and the command that reruns it."""

    model: str
    source: Source
    input_shape: list[int]  # one sample, without the batch dimension
    batch: int | None  # None: a merged session whose jobs differ in batch (each job's own in merge.jobs)
    command: list[str]
    created: str  # ISO 8601, UTC
    backend: str  # a registered backend, or trtexec for imported files
    device: Device
    tool_version: str
    weights: str = "unknown"  # "random (pretrained=False, seed N)" or the checkpoint path
    plan: StudyPlan | None = None  # what `rerun` replays; None for imported files
    tool_commit: str | None = None  # git commit of the checkout the tool ran from ("-dirty": local changes)
    # the engine and its version as its backend names it ("TensorRT 10.3.0"); see sessions.documents.engines
    engine: str | None = None
    engine_options: dict[str, str] = field(default_factory=dict)  # plan options only this engine reads (opt_level)


@dataclass
class GpuInfo:
    name: str
    uuid: str | None = None
    driver: str | None = None
    cuda_driver: str | None = None
    compute_capability: str | None = None
    multiprocessors: int | None = None
    memory_mib: int | None = None
    sm_clock_mhz: int | None = None
    mem_clock_mhz: int | None = None
    max_sm_clock_mhz: int | None = None
    clock_event_reasons: list[str] = field(default_factory=list)
    temperature_c: int | None = None
    power_w: float | None = None
    pstate: str | None = None


@dataclass
class TorchSettings:
    """PyTorch switches that choose kernels, and so change both the times and the numbers."""

    cudnn_enabled: bool | None = None
    cudnn_version: int | None = None  # torch.backends.cudnn.version(), e.g. 92400; None without cuDNN
    cudnn_benchmark: bool | None = None  # autotuned convolution algorithms
    cudnn_deterministic: bool | None = None
    tf32_matmul: bool | None = None  # torch.backends.cuda.matmul.allow_tf32
    tf32_cudnn: bool | None = None  # torch.backends.cudnn.allow_tf32
    float32_matmul_precision: str | None = None  # torch.get_float32_matmul_precision(): highest | high | medium


@dataclass
class GpuSample:
    t_s: float  # seconds since timing started
    sm_clock_mhz: int | None = None
    mem_clock_mhz: int | None = None
    temperature_c: int | None = None
    power_w: float | None = None
    clock_event_reasons: list[str] = field(default_factory=list)


@dataclass
class TimingConditions:
    """The GPU's clocks, temperature and power, sampled while the timing rounds ran (not one snapshot)."""

    source: str  # how they were sampled, or why not ("not sampled: ...")
    samples: list[GpuSample] = field(default_factory=list)


@dataclass
class Environment:
    host: str
    os: str
    cpu: str
    cpu_count: int
    python: str
    versions: dict[str, str | None]  # package -> version, None where not installed
    gpu: GpuInfo | None = None  # as found when the study started
    torch: TorchSettings | None = None  # None where PyTorch was not loaded
    during_timing: TimingConditions | None = None
    torch_threads: int | None = None  # torch.get_num_threads() during the study
    load_average: list[float] | None = None  # os.getloadavg() when the study started (1, 5, 15 min)
    gpu_state: str | None = None  # the GPU state the rows were timed in (profilers.gpu_contexts); None: not recorded


@dataclass
class TimingMethod:
    """What lies between the two clock reads, in numbers and in words."""

    timer: Timer
    timed_region: str
    cuda_graph: bool | None  # None where unknown (imported files without trtexec's options)
    warmup_s: float | None
    rounds: int | None
    iters: int | None  # per round; for trtexec, its minimum iteration count
    interleaved: bool
    transfers_included: bool
    static_inputs: bool
    per_layer: str  # what per-layer time means
    kernels: str  # how kernels were traced and attributed


@dataclass
class LatencyStats:
    samples_ms: list[float]
    min_ms: float
    median_ms: float
    mean_ms: float
    p90_ms: float | None  # None where no sample is stored and the source states none (trtexec's summary before 8.5)
    p99_ms: float | None
    max_ms: float
    std_ms: float | None  # None where no sample is stored (a latency from trtexec's performance summary)
    cov: float | None  # std / mean, over every sample; None as std_ms
    round_medians_ms: list[float] = field(default_factory=list)  # the median of each interleaved round
    round_cov: float | None = None  # CoV of the round medians (two rounds or more): run-to-run noise
    inferences_per_sample: int = 1  # back-to-back inferences one sample spans, its time their mean (the timing method)


@dataclass
class StatedTime:
    """One line of trtexec's performance summary, in ms, as trtexec printed it (no samples behind it are stored)."""

    min_ms: float
    max_ms: float
    mean_ms: float
    median_ms: float
    percentiles_ms: dict[str, float] = field(default_factory=dict)  # "99" -> ms: trtexec's percentile(99%)


@dataclass
class PerformanceSummary:
    """What trtexec's performance summary states about an imported engine's run (`import`): the source of the
    variant's latency (its GPU compute time) where no per-inference times were exported, and the figures around it."""

    source: str  # the file's name
    gpu_compute: StatedTime  # GPU Compute Time: the latency
    queries: int | None  # inferences timed ("Timing trace has N queries"); None where the file does not state it
    host_latency: StatedTime | None = None  # trtexec's "Latency": H2D + GPU compute + D2H of one query
    h2d: StatedTime | None = None
    d2h: StatedTime | None = None
    end_to_end: StatedTime | None = None  # "End-to-End Host Latency" (8.0-8.4), waiting for the previous query included
    enqueue: StatedTime | None = None
    throughput_qps: float | None = None
    # the imported per-layer times summed: measured under per-layer synchronisation (IProfiler), never the latency
    layer_sum_ms: float | None = None


@dataclass
class Recipe:
    """How a quantized variant was made: which layers, which scales, which calibration data."""

    method: str  # e.g. "modelopt mtq.quantize FP8_DEFAULT_CFG"
    number_format: str  # e.g. "fp8 e4m3"
    layout: str | None
    exclude_patterns: list[str]
    quantized: list[str]
    excluded: list[str]
    scales: str
    calibration_source: str
    calibration_count: int
    weights: str | None = None  # weight scales: per-channel (output channel) | per-tensor
    batchnorm_folded: bool = False  # BatchNorm folded into the convolutions before the weights were quantized
    excluded_by_role: dict[str, int] = field(default_factory=dict)  # structural role -> layers kept out
    weight_bytes_base: int | None = None  # parameters in the base precision
    weight_bytes_fp8: int | None = None  # the same, quantized weights at one byte per element
    # the precision max calibration ran in: the base's, or fp32 where the base overflowed (the variant's notes say
    # why, and it then runs in fp32); None: not recorded (older sessions, engines from files)
    calibration_precision: str | None = None
    # layers the recipe selects that got no quantizer (the quantizing library converts no module of their type):
    # they ran in the base precision; in neither `quantized` nor `excluded` (older sessions counted them excluded)
    unquantized: list[str] = field(default_factory=list)

    @property
    def layer_count(self) -> int:
        """Every layer of the recipe's op kinds: quantized, kept out, or selected without a quantizer."""
        return len(self.quantized) + len(self.excluded) + len(self.unquantized)


@dataclass
class Quality:
    reference: str
    image_source: str
    images: int
    top1_agreement: float
    mean_kl: float
    max_abs_logit_error: float
    nonfinite: int
    task: str = "classification"  # classification | segmentation (outputs of N x C x H x W: agreement per pixel)
    agreement_baseline: float | None = None  # fraction of images (pixels) whose argmax equals the baseline's
    baseline: str | None = None  # the variant `agreement_baseline` compares with (fp16)
    miou: float | None = None  # mean IoU against the label maps, where the images have them
    labelled_images: int = 0
    stress_inputs: int = 0  # built-in stress inputs run (profilers.images.stress_inputs)
    stress_nonfinite: int = 0  # of those, the ones whose output held NaN or Inf
    # the reference's scale: its largest finite |logit| over the images; None in older sessions
    reference_scale: float | None = None
    relative_error: float | None = None  # max_abs_logit_error / reference_scale; None where that scale is 0 or unknown
    # one line each where the reference's logits are degenerate (huge, constant over the classes, the same for every
    # image, not finite): then agreement, KL and errors say little (profilers.quality.degenerate_reference)
    reference_warnings: list[str] = field(default_factory=list)


@dataclass
class SubnormalValues:
    """What one forward on a quality image held, sampled by `profilers.subnormal`: nonzero finite values of the
    layers' outputs and the variant's output, and those below the smallest normal of their dtype
    (torch.finfo(dtype).tiny), which a CPU computes many times slower. `sessions.analyses.subnormals` judges it."""

    values: int  # nonzero finite values sampled
    subnormal: int  # of those, below their dtype's smallest normal
    tensors: int  # tensors sampled (layer outputs, the output)
    smallest_normal: float  # the smallest normal of the widest dtype sampled, as the line names it
    dtype: str  # that dtype (float32, ...)


@dataclass
class Tensor:
    name: str = ""
    dtype: DType | None = None
    shape: list[int] | None = None  # -1 where dynamic
    format: str | None = None  # the source's own words (TensorRT format string)


@dataclass
class Layer:
    """One layer: a TensorRT layer, or a PyTorch module that owns kernels or ops of its own.

    Every source fills the typed fields in one dialect; `kind` keeps the source's own type word.
    """

    name: str
    kind: str  # TensorRT LayerType or PyTorch module class
    op: Op | None = None  # what it computes, where the source says
    time_ms: float | None = None  # per call
    # the layer's time in each traced (or profiled) call, where two or more were: the spread `sessions.analyses.noise`
    # judges by; empty (older sessions, one call, imports): the layer is not judged
    call_times_ms: list[float] = field(default_factory=list)
    precision: DType | None = None  # compute precision: inputs and tactic first, output dtype last
    groups: int | None = None  # convolution groups
    kernel_shape: list[int] | None = None
    in_channels: int | None = None
    out_channels: int | None = None
    stride: list[int] | None = None
    inputs: list[Tensor] = field(default_factory=list)
    outputs: list[Tensor] = field(default_factory=list)
    tactic: str | None = None
    onnx_nodes: list[str] = field(default_factory=list)  # the ONNX nodes fused into this layer
    origin: str | None = None  # TensorRT Reformat origin: REFORMAT | QDQ
    quantized: bool = False
    attrs: dict[str, Any] = field(default_factory=dict)  # source-specific extras (stream, weights, ...)


@dataclass
class KernelTable:
    """Kernels (or CPU ops) of the traced calls, stored column by column.

    Columnar because a study holds up to hundreds of thousands of records: lists of ints load in
    a fraction of the time that one object per record takes.
    """

    names: list[str] = field(default_factory=list)  # distinct names; `name` indexes them
    name: list[int] = field(default_factory=list)
    layer: list[int] = field(default_factory=list)  # index into Variant.layers, -1 outside any layer
    call: list[int] = field(default_factory=list)  # which traced call, 0-based
    start_ns: list[int] = field(default_factory=list)  # from the first record of the trace
    duration_ns: list[int] = field(default_factory=list)
    stream: list[int] = field(default_factory=list)
    grid: list[list[int]] = field(default_factory=list)
    block: list[list[int]] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.name)

    def validate(self) -> None:
        n = len(self.name)
        for column in ("layer", "call", "start_ns", "duration_ns", "stream", "grid", "block"):
            if len(getattr(self, column)) != n:
                raise ValueError(f"kernels.{column} has {len(getattr(self, column))} rows, expected {n}")
        if n and (min(self.name) < 0 or max(self.name) >= len(self.names)):
            raise ValueError("kernels.name points outside kernels.names")


@dataclass
class TraceSummary:
    tracer: str  # cupti | torch-profiler | cpu-ops | none
    unit: TraceUnit
    calls: int  # inferences traced
    records: int
    unattributed: int  # records outside any layer
    dropped: int  # records the tracer reported lost
    note: str = ""
    untraced_call_ms: float | None = None  # host wall time of one eager call, tracer off
    traced_call_ms: float | None = None  # the same call with ranges on and the tracer recording

    @property
    def per_call(self) -> float:
        return self.records / self.calls if self.calls else 0.0

    @property
    def unattributed_per_call(self) -> float:
        """Records outside any layer in one traced call (`unattributed` holds them over every call)."""
        return self.unattributed / self.calls if self.calls else 0.0


@dataclass
class Variant:
    name: str  # fp32, fp16, fp8-no-se, ...
    backend: str
    precision: Precision
    device: Device
    status: Status = "ok"
    error: str | None = None
    simulated: bool = False  # True where the numerics are emulated (PyTorch FP8): time is not FP8 speed
    recipe: Recipe | None = None
    build_s: float | None = None
    artifact_bytes: int | None = None
    # peak device bytes of one inference, weights included, as profilers.memory states; None: not measured (CPU)
    peak_memory_bytes: int | None = None
    # BatchNorm layers folded into convolutions in this variant's graph; None: unknown
    batchnorm_folded: int | None = None
    latency: LatencyStats | None = None
    # imported variants: trtexec's performance summary, where a file has one
    performance: PerformanceSummary | None = None
    layers: list[Layer] = field(default_factory=list)
    kernels: KernelTable | None = None
    trace: TraceSummary | None = None
    quality: Quality | None = None
    simulation: Quality | None = None  # a real-FP8 engine against the simulated variant of its recipe (same images)
    subnormal_values: SubnormalValues | None = None  # None: not sampled (older sessions, no quality step)
    notes: list[str] = field(default_factory=list)
    command: list[str] = field(default_factory=list)  # what made this variant, where not the study's command (imports)
    # merged sessions only: the job the variant was measured in (index into Session.merge.jobs) and its
    # axes there ({"model": "senet154", "batch": "32", ..., "variant": "fp16"}; the name is "<axes>/<variant>")
    job: int | None = None
    axes: dict[str, str] = field(default_factory=dict)


@dataclass
class MergedJob:
    """One session a merged session was joined from: its study, environment and method, kept per row."""

    path: str
    label: str  # the axes' values, the prefix of its variants' names
    axes: dict[str, str]
    study: Study
    environment: Environment
    method: TimingMethod


@dataclass
class Merge:
    axes: list[str]  # what differs between the jobs, in the comparison's order; "variant" last
    jobs: list[MergedJob]


@dataclass
class Session:
    study: Study
    environment: Environment  # a merged session: what its jobs share (each job keeps its own)
    method: TimingMethod
    variants: list[Variant] = field(default_factory=list)
    schema_version: int = SCHEMA_VERSION
    tool: str = TOOL
    merge: Merge | None = None  # set where sessions were joined (`merge`, `sweep`)

    def variant(self, name: str) -> Variant:
        for variant in self.variants:
            if variant.name == name:
                return variant
        known = ", ".join(v.name for v in self.variants) or "none"
        raise InputError(f"no variant {name!r} in this session (variants: {known})")
