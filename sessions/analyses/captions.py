"""Every caveat and explanatory line the views print, each written once.

CLI text, Markdown export, JSON and the TUI take these words from here; `session_caveats` decides
which apply to a session.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from sessions.analyses.comparison import comparisons
from sessions.analyses.subnormals import subnormal_lines
from sessions.documents.covers import covered_layers
from sessions.documents.model import LatencyStats, Layer, Quality, Recipe, Session, Variant
from sessions.documents.plan import BASE_PRECISIONS
from sessions.documents.state import unfinished_step
from sessions.documents.vocab import CHOSEN_FP16, chose_fp16, gpu_state_kind, precision_as_run

SIMULATED_FP8 = (
    "simulated FP8 (ModelOpt fake quantization): quality reflects the FP8 recipe, time is not FP8 kernel speed"
)
SIMULATED_TAG = "simulated"
SIMULATES = "simulates"  # Layer.attrs key: the number format a layer simulates while its kernels run its precision
UNSETTLED_GPU = ("CUDA-graph state {state}: the rows may run about 10 % slower than a study whose state was settled "
                 "(docs/method.md, Latency)")
EQUAL_GRAPHS = "{count} BatchNorm layers folded into their convolutions in every variant: one graph for all"
UNEQUAL_GRAPHS = (
    "BatchNorm folded into the convolutions differently across variants ({counts}): "
    "their time differences include the folding"
)
SPEEDUP = "speed-up = baseline median / variant median: above 1 is faster, below 1 slower"
SAMPLE_COV = "sample CoV %"  # the variant table's column: std / mean over every timed sample
ROUND_COV = "CoV of round medians"  # what the noise rule judges: run-to-run spread, round against round
UNSTABLE = (
    ROUND_COV + " (one round: of samples) above 2.5 % for {names}: "
    "lock clocks or time longer before trusting small differences"
)
UNSTABLE_CPU = (
    ROUND_COV + " (one round: of samples) above 2.5 % for {names}, on the CPU with {threads} and load average "
    "{load} at the start: other work on these cores moves the times; run on an idle machine or time longer before "
    "trusting small differences"
)
NO_KERNEL_TABLE = "no kernel table: these files hold layers and times, not kernel launches"
NOT_TRACED = "no kernel table: {how}"  # the study's method words (`TimingMethod.kernels`), or the variant's
IMPORTED = "trtexec"  # the source (Study.source) of what `import` makes of TensorRT's files


def no_kernel_table(session: Session) -> str | None:
    """Why the session's variants hold no kernel table: TensorRT's files hold none (imported), or the study traced
    no kernels (the method says how, where the session holds one yet); None where it has no variant, or one holds a
    table."""
    if not session.variants or any(v.kernels is not None for v in session.variants):
        return None
    if session.study.source == IMPORTED:
        return NO_KERNEL_TABLE
    return NOT_TRACED.format(how=session.method.kernels if session.method is not None
                             else "no tracer recorded kernel launches")


def no_variant_kernel_table(session: Session, variant: Variant) -> str:
    """Why `variant` of `session` holds no kernel table: `no_kernel_table`'s words where no variant of the session
    holds one; else its own trace is missing."""
    return no_kernel_table(session) or NOT_TRACED.format(how=f"no trace was recorded for {variant.name}")
RANDOM_WEIGHTS = (
    "random weights {how}: quality compares each variant's numerics with fp32, not accuracy; "
    "--checkpoint FILE (.safetensors or a torch file) gives figures of trained weights"
)
CONSTANT_LAYERS = (
    "{count} of the {total} layers its recipe quantizes have all-zero weights (as their forward computes them) once "
    "BatchNorm is folded{why}: their outputs are the same in any precision, so the quality figures say nothing of "
    "their FP8 error, nor of the error of layers whose only input or only reader they are"
)
CONSTANT_FP8_LAYERS = (
    "every one of the {count} layers that run in FP8 (of the {total} its recipe quantizes; {rest}) has all-zero "
    "weights (as its forward computes them) once BatchNorm is folded{why}: their outputs are the same in any "
    "precision, so the quality figures hold no FP8 error at all"
)
CONSTANT_WHY_RANDOM = (" (random initialisation may zero the last BatchNorm, or gain, of a residual branch, as timm's "
                       "models do)")
DEGENERATE_REFERENCE = "quality figures say little: {warning}"  # a Quality.reference_warnings line
RELATIVE_ERROR = "max rel err"  # the variant table's column: max abs err over the reference's largest |logit|
STAND_IN = (
    "made by the TensorRT stand-in for tests (tests/fake_tensorrt: onnxruntime on the CPU), not by TensorRT: "
    "its layers, tactics, kernels and per-layer times are synthetic"
)
STAND_IN_LAYER_TIMES = "synthetic per-layer times reported by the TensorRT stand-in for tests, not TensorRT's IProfiler"
NO_REFERENCE = "quality not measured: an .onnx model has no fp32 PyTorch reference to compare with"
PRECISION_BY_ROLE = "layers asked for in FP8, by role: what each ran, and whose tactic"
GROUP_SPEEDUP = "speed-up = baseline ms / variant ms of the group's kernels per call: above 1 is faster"
OVERLAPPING_GROUPS = ("{variant}: within noise, whatever the ratio (the group's per-call bands overlap its "
                       "baseline's): {groups}")
TRACES_APART = ("{variant}: no group speed-up over {baseline} judged, whatever the ratio: their traces ran at "
                "different paces ({variant}'s layers' summed times per call {pace_b:.2f}x its timed median, "
                "{baseline}'s {pace_a:.2f}x), so their group times differ by what the load did between the traces; "
                "their latencies, timed in interleaved rounds, are judged")
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
    untraced = no_kernel_table(session)
    if untraced:
        lines.append(untraced)
    state = session.environment.gpu_state if session.environment is not None else None
    if gpu_state_kind(state) == "not settled":
        lines.append(UNSETTLED_GPU.format(state=state))
    lines += subnormal_lines(session)
    lines += quality_caveats(session)
    folded = {v.name: v.batchnorm_folded for v in session.variants
              if v.status == "ok" and v.batchnorm_folded is not None}
    if len(set(folded.values())) > 1:
        lines.append(UNEQUAL_GRAPHS.format(counts=", ".join(f"{name} {count}" for name, count in folded.items())))
    elif len(folded) > 1 and next(iter(folded.values())):
        lines.append(EQUAL_GRAPHS.format(count=next(iter(folded.values()))))
    return lines


def weights_caveat(weights: str) -> str | None:
    """The line every view of quality figures shows for a study's `weights` (Study.weights: "random (pretrained=False,
    seed N)", a checkpoint's path, ...) where they are random, naming --checkpoint; None for other weights."""
    if not weights.startswith("random"):
        return None
    return RANDOM_WEIGHTS.format(how=weights.removeprefix("random").strip()).replace("weights :", "weights:")


def quality_caveats(session: Session) -> list[str]:
    """Where `session` holds quality figures: the random-weights line (any of its jobs' weights random), then each
    degenerate-reference warning once."""
    measured = [q for v in session.variants for q in (v.quality, v.simulation) if q is not None]
    if not measured:
        return []
    studies = [session.study, *(job.study for job in session.merge.jobs)] if session.merge else [session.study]
    random = [line for line in dict.fromkeys(weights_caveat(study.weights) for study in studies) if line]
    return [*random[:1], *reference_caveats(measured)]


def reference_caveats(qualities: Iterable[Quality | None]) -> list[str]:
    """Each degenerate-reference warning of `qualities` (`Quality.reference_warnings`, made by
    `profilers.quality.degenerate_reference`) once, as every view prints it: `quality figures say little: ...`."""
    warnings = dict.fromkeys(w for quality in qualities if quality is not None for w in quality.reference_warnings)
    return [DEGENERATE_REFERENCE.format(warning=warning) for warning in warnings]


def unstable_line(session: Session, names: list[str]) -> str:
    """The noise advice: on a GPU, clocks; on the CPU, the threads and the load beside it (no clocks to lock)."""
    if session.study.device != "cpu":
        return UNSTABLE.format(names=", ".join(names))
    env = session.environment
    threads = (f"{env.torch_threads} PyTorch thread{'s' if env.torch_threads != 1 else ''}" if env.torch_threads
               else "unknown threads")
    load = " / ".join(f"{x:.1f}" for x in env.load_average) if env.load_average else "unknown"
    return UNSTABLE_CPU.format(names=", ".join(names), threads=threads, load=load)


QUANTIZER_OPS = ("quantize", "dequantize")
QUANTIZER_KIND = "TensorQuantizer"  # ModelOpt's quantizer module, a layer of its own in simulated variants
NONFINITE_VALUES = "NaN/Inf values"  # the variant table's column: non-finite logits on the quality images (values,
# not images; stress inputs are counted apart, as inputs whose output held any)


def layer_precision(layer: Layer, variant: Variant | None = None) -> str | None:
    """What a layer ran in, as views print it: its kernels' precision, the format it simulates, if any, and the
    math its kernels do where it is not the precision's own (`attrs["math"]`: an fp32 layer on TF32 kernels).

    With its `variant`, a quantized layer of a simulated variant is said to be simulated even where an older session
    recorded the simulated format as the layer's precision (no such kernel ran).
    """
    simulated = layer.attrs.get(SIMULATES)
    if simulated and layer.precision:
        return f"{layer.precision}, {SIMULATED_TAG} {simulated}"
    fmt = quantized_format(variant) if variant is not None else None
    if variant is not None and variant.simulated and layer.quantized and fmt is not None:
        if layer.precision in (None, fmt):
            return f"{fmt} {SIMULATED_TAG}"
        return f"{layer.precision}, {SIMULATED_TAG} {fmt}"
    math = layer.attrs.get("math")
    return f"{layer.precision} ({math} math)" if math and layer.precision else layer.precision


def quantized_format(variant: Variant) -> str | None:
    """The number format a quantized variant asks for (fp8, int8); None for a float variant."""
    return None if variant.precision in BASE_PRECISIONS else variant.precision


@dataclass(frozen=True)
class LayerPrecision:
    """A layer's precision as it ran, what its variant asked of it, and whether the two agree."""

    ran: str  # "fp8", "fp32, simulated fp8", "fp16"
    asked: str  # "fp8 (recipe)", "kept out (recipe)", "not quantized (recipe)", "fp16"
    honoured: bool  # False: asked for a format it did not run in (an engine's fallback)
    why: str  # one clause: quantized by the recipe or not, simulated or real

    @property
    def words(self) -> str:
        """`ran (why)`: the detail pane's and the layer page's line."""
        return f"{self.ran} ({self.why})"


def precision_of(variant: Variant, layer: Layer) -> LayerPrecision:
    """What `layer` ran in and whether `variant` asked for it: the TUI's detail pane and `show --layers` say this. A
    layer the recipe quantizes that runs fp16 says whether the engine chose fp16 by timing (`chose_fp16`, with the
    times) or fell back to it, with the reason it recorded."""
    ran = layer_precision(layer, variant) or "unknown"
    fmt = quantized_format(variant)
    if fmt is None:
        asked = variant.precision
        if layer.precision in (None, asked):
            return LayerPrecision(ran, asked, True, f"as asked: {asked}")
        return LayerPrecision(ran, asked, True, f"{asked} asked; this layer kept {layer.precision}")
    simulated = variant.simulated or SIMULATES in layer.attrs
    compute = layer.precision if layer.precision not in (None, fmt) else "float"  # older sessions: fmt, never run
    kind = f"simulated: {compute} kernels round to {fmt}, no {fmt} kernel ran" if simulated else f"real {fmt} kernels"
    recipe = variant.recipe
    if layer.op in QUANTIZER_OPS or layer.kind == QUANTIZER_KIND:
        writes = kind if simulated else f"real {fmt} output" if layer.precision == fmt else f"ran in {ran}"
        return LayerPrecision(ran, "added (recipe)", True, f"a quantizer the recipe added; {writes}")
    if layer.origin or layer.op == "reformat":
        return LayerPrecision(ran, "-", True, f"a {layer.origin or 'reformat'} layer converts between formats")
    if layer.quantized or layer.attrs.get("asked") == fmt or (recipe is not None and layer.name in recipe.quantized):
        if simulated or layer.precision == fmt:
            return LayerPrecision(ran, f"{fmt} (recipe)", True, f"quantized by the recipe; {kind}")
        fallback = layer.attrs.get("fallback")
        if chose_fp16(fallback):  # the build's choice, its times after CHOSEN_FP16: no fallback
            return LayerPrecision(ran, f"{fmt} (recipe)", False, f"quantized by the recipe; the engine chose {ran} "
                                  f"by timing{str(fallback)[len(CHOSEN_FP16):]}")
        reason = f": {str(fallback)[:120]}" if fallback else ""
        return LayerPrecision(ran, f"{fmt} (recipe)", False,
                              f"quantized by the recipe, not run in {fmt}: the engine fell back to {ran}{reason}")
    covered = covered_layers(layer)
    if covered:  # a region fused across layers that runs layers the recipe quantizes, each fp16 (regions take no FP8)
        outcomes = Counter(precision_as_run(inner.attrs.get("asked"), inner.precision or "",
                                            inner.attrs.get("fallback")) for inner in covered)
        said = ", ".join(f"{count} {outcome}" for outcome, count in outcomes.items())
        return LayerPrecision(ran, f"{fmt} (recipe)", False, f"a region fused across layers; it runs {len(covered)} "
                              f"layer(s) the recipe quantizes, in {ran}: {said}")
    if recipe is not None and layer.name in recipe.unquantized:
        return LayerPrecision(ran, f"{fmt} (recipe)", False,
                              f"selected by the recipe, not run in {fmt}: no {fmt} quantizer (the quantizing library "
                              f"converts no layer of its type), so it ran in {ran}")
    if recipe is not None and layer.name in recipe.excluded:
        return LayerPrecision(ran, "kept out (recipe)", True, f"kept out of {fmt} by the recipe")
    if recipe is not None:
        return LayerPrecision(ran, "not quantized (recipe)", True,
                              f"not quantized: the recipe leaves this layer out of {fmt}")
    if layer.precision == fmt:  # no recipe (engines from files): the engine chose, the build allowed
        return LayerPrecision(ran, f"{fmt} allowed", True,
                              f"the engine chose {fmt}, which the build allowed; real kernels")
    return LayerPrecision(ran, f"{fmt} allowed", True, f"the engine chose {ran}; the build allowed {fmt}")


def speedup_label(baseline: str | None) -> str:
    """The header of every speed-up column: what it divides, and which way is faster."""
    return f"speed-up vs {baseline} (>1 faster)" if baseline else "speed-up (>1 faster)"


def unquantized_words(recipe: Recipe) -> str:
    """`; N selected without a quantizer` where `recipe` selected layers that got none (`Recipe.unquantized`), else
    nothing: the clause every recipe summary adds after its layer count."""
    return f"; {len(recipe.unquantized)} selected without a quantizer" if recipe.unquantized else ""


def variant_label(name: str, simulated: bool) -> str:
    """A variant's name as every view and report labels it: `fp8-all (simulated)` for a simulated variant, the name
    alone otherwise; the one place the tag is added."""
    return f"{name} ({SIMULATED_TAG})" if simulated else name
