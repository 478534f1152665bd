"""Every caveat and explanatory line the views print, each written once.

CLI text, Markdown export, JSON and the TUI take these words from here; `session_caveats` decides
which apply to a session.
"""

from __future__ import annotations

from sessions.analyses.comparison import comparisons
from sessions.documents.model import LatencyStats, Layer, Session
from sessions.documents.state import unfinished_step

SIMULATED_FP8 = (
    "simulated FP8 (ModelOpt fake quantization): quality reflects the FP8 recipe, time is not FP8 kernel speed"
)
SIMULATED_TAG = "simulated"
SIMULATES = "simulates"  # Layer.attrs key: the number format a layer simulates while its kernels run its precision
EQUAL_GRAPHS = "{count} BatchNorm layers folded into their convolutions in every variant: one graph for all"
UNEQUAL_GRAPHS = (
    "BatchNorm folded into the convolutions differently across variants ({counts}): "
    "their time differences include the folding"
)
SPEEDUP = "speed-up = baseline median / variant median: above 1 is faster, below 1 slower"
UNSTABLE = (
    "CoV of round medians (one round: of samples) above 2.5 % for {names}: "
    "lock clocks or time longer before trusting small differences"
)
UNSTABLE_CPU = (
    "CoV of round medians (one round: of samples) above 2.5 % for {names}, on the CPU with {threads} and load average "
    "{load} at the start: other work on these cores moves the times; run on an idle machine or time longer before "
    "trusting small differences"
)
NO_KERNEL_TABLE = "no kernel table: these files hold layers and times, not kernel launches"
STAND_IN = (
    "made by the TensorRT stand-in for tests (tests/fake_tensorrt: onnxruntime on the CPU), not by TensorRT: "
    "its layers, tactics, kernels and per-layer times are synthetic"
)
STAND_IN_LAYER_TIMES = "synthetic per-layer times reported by the TensorRT stand-in for tests, not TensorRT's IProfiler"
NO_REFERENCE = "quality not measured: an .onnx model has no fp32 PyTorch reference to compare with"
GROUP_SPEEDUP = "speed-up = baseline ms / variant ms of the group's kernels per call: above 1 is faster"
INTERRUPTED = "interrupted; finished variants are saved in {path}"
CANCELLED = "study cancelled; finished variants are saved in {path}"
INCOMPLETE = "incomplete session: the study stopped, or is still running, at {step}; the figures cover what finished"
FLAG_NEW = "new in {variant}"
FLAG_IN_BASELINE = "also in {baseline}"
COV_WARN = 0.025  # trtexec warns above 2.5 %: clocks or other load make the figures unstable


def unstable_variants(session: Session) -> list[str]:
    noisy = []
    for variant in session.variants:
        cov = latency_cov(variant.latency)
        if cov is not None and cov > COV_WARN:
            noisy.append(variant.name)
    return noisy


def latency_cov(stats: LatencyStats | None) -> float | None:
    """The CoV of the round medians, else of every sample; None where no latency or no sample is stored (a latency
    stated by trtexec's performance summary)."""
    if stats is None:
        return None
    return stats.round_cov if stats.round_cov is not None else stats.cov


def session_caveats(session: Session) -> list[str]:
    """The caveats that apply to `session`, in the order views print them."""
    lines = []
    step = unfinished_step(session)
    if step is not None:
        lines.append(INCOMPLETE.format(step=step))
    names = {c.baseline.name for c in comparisons(session) if c.baseline is not None}
    if names:
        lines.append(SPEEDUP.replace("baseline", names.pop() if len(names) == 1 else "its own baseline (vs)"))
    if any(STAND_IN in v.notes for v in session.variants):
        lines.append(STAND_IN)
    if any(v.simulated for v in session.variants):
        lines.append(SIMULATED_FP8)
    unstable = unstable_variants(session)
    if unstable:
        lines.append(unstable_line(session, unstable))
    if session.variants and all(v.kernels is None for v in session.variants):
        lines.append(NO_KERNEL_TABLE)
    folded = {v.name: v.batchnorm_folded for v in session.variants if v.status == "ok" and v.batchnorm_folded is not None}
    if len(set(folded.values())) > 1:
        lines.append(UNEQUAL_GRAPHS.format(counts=", ".join(f"{name} {count}" for name, count in folded.items())))
    elif len(folded) > 1 and next(iter(folded.values())):
        lines.append(EQUAL_GRAPHS.format(count=next(iter(folded.values()))))
    return lines


def unstable_line(session: Session, names: list[str]) -> str:
    """The noise advice: on a GPU, clocks; on the CPU, the threads and the load beside it (no clocks to lock)."""
    if session.study.device != "cpu":
        return UNSTABLE.format(names=", ".join(names))
    env = session.environment
    threads = f"{env.torch_threads} PyTorch thread{'s' if env.torch_threads != 1 else ''}" if env.torch_threads else "unknown threads"
    load = " / ".join(f"{x:.1f}" for x in env.load_average) if env.load_average else "unknown"
    return UNSTABLE_CPU.format(names=", ".join(names), threads=threads, load=load)


def layer_precision(layer: Layer) -> str | None:
    """A layer's precision as views print it: what its kernels compute in, and the format it simulates, if any."""
    simulated = layer.attrs.get(SIMULATES)
    if simulated and layer.precision:
        return f"{layer.precision}, {SIMULATED_TAG} {simulated}"
    return layer.precision


def speedup_label(baseline: str | None) -> str:
    """The header of every speed-up column: what it divides, and which way is faster."""
    return f"speed-up vs {baseline} (>1 faster)" if baseline else "speed-up (>1 faster)"


def variant_label(name: str, simulated: bool) -> str:
    return f"{name} ({SIMULATED_TAG})" if simulated else name
