"""The session's vocabularies: every word a field may hold, in one place.

Sources (PyTorch, TensorRT, imported files) translate their own words into these; views read only
these. `codec` checks `Literal` fields on load, so a word outside the list is a load error.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal, get_args

from sessions.documents.trt_names import dtype_word

Device = Literal["cuda", "cpu"]
Source = Literal["timm", "hf", "onnx", "trtexec", "probe"]
Status = Literal["ok", "failed"]
# what a variant computes in: the number format of its quantized layers, else its base precision;
# unknown: names-only files
Precision = Literal["fp32", "fp16", "bf16", "fp8", "int8", "int4", "fp4", "mixed", "unknown"]
# tensor element types, as sessions spell them
DType = Literal["fp32", "fp16", "bf16", "fp8", "int8", "int4", "fp4", "int32", "int64", "uint8", "bool"]
# what a layer computes, in one dialect for every source
Op = Literal[
    "conv", "linear", "matmul", "pooling", "elementwise", "activation", "normalization", "softmax", "attention",
    "recurrent", "concat", "reformat", "shuffle", "quantize", "dequantize", "myelin", "noop", "dla", "other",
]
TraceUnit = Literal["kernel", "op"]
Timer = Literal["cuda-events", "perf_counter", "trtexec", "unknown"]

OPS: tuple[str, ...] = get_args(Op)
# a layer attribute: the role a model's structure gives the layer ("squeeze-excitation": a layer or module of a
# squeeze-excitation block, `builders.models.structure`), "" where the structure knows the layer and gives it none;
# absent where no structure was read (engines from files), where only names can tell
STRUCTURE_ROLE = "structure_role"
STRUCTURE_ROLES = ("squeeze-excitation",)  # the roles it can hold: where it is present, names never decide them
# a layer attribute: the layers of the model a region fused across layers runs as one (Inductor's fused regions in the
# engine: `builders.engine.fused_tactics`), each with its name, kind and tactic; absent on a layer that is one step
COVERS = "covers"

# `Environment.gpu_state` (profilers.gpu_contexts): the state a GPU study's CUDA graphs are timed in, or why not
GPU_STATE_SETTLED = ("another process made and ended a CUDA context on the GPU after every graph was made, before "
                     "the timing")
GPU_STATE_NOT_SETTLED = "not settled: "  # what starts the words where the helper failed (its reason follows)
GpuStateKind = Literal["settled", "not settled", "not recorded"]


# what became of a layer a recipe asked for in FP8 (an engine layer's `attrs["asked"]`): it ran FP8, ran fp16 because
# its fp16 tactic timed faster (its `attrs["fallback"]` starts with CHOSEN_FP16), or ran fp16 because FP8 was refused
CHOSEN_FP16 = "FP8 asked; fp16 chosen by timing"
PrecisionAsRun = Literal["fp8", "fp16 by timing", "fp16 refused"]
PRECISIONS_AS_RUN: tuple[PrecisionAsRun, ...] = get_args(PrecisionAsRun)
RAN_FP8, FP16_BY_TIMING, FP16_REFUSED = PRECISIONS_AS_RUN


def chose_fp16(fallback: object) -> bool:
    """Whether a layer's fallback reason says it runs fp16 by timing (not because FP8 was refused)."""
    return isinstance(fallback, str) and fallback.startswith(CHOSEN_FP16)


def precision_as_run(asked: object, precision: str, fallback: object) -> PrecisionAsRun | None:
    """What became of a layer asked for in FP8 (`asked`, the precision its recipe gave it), from the precision it ran
    in and its fallback reason; None where it was not asked for in FP8."""
    if asked != "fp8":
        return None
    if precision == "fp8":
        return RAN_FP8
    return FP16_BY_TIMING if chose_fp16(fallback) else FP16_REFUSED


def gpu_state_kind(words: str | None) -> GpuStateKind:
    """What a session's GPU-state words say, the one rule every reader applies: not recorded (None: a CPU study, or
    one made before the state was recorded), not settled (`GPU_STATE_NOT_SETTLED` and a reason), else settled."""
    if words is None:
        return "not recorded"
    return "not settled" if words.startswith(GPU_STATE_NOT_SETTLED) else "settled"


def shared_gpu_state(states: Iterable[str | None]) -> str | None:
    """The one state of several timings (a merge's jobs, the probe's shapes): the first not settled, where any is
    (its words say why); else None where any is not recorded; else the first's words."""
    found = list(states)
    unsettled = [state for state in found if gpu_state_kind(state) == "not settled"]
    if unsettled:
        return unsettled[0]
    return None if not found or any(state is None for state in found) else found[0]


def dtype_of(text: str | None) -> str | None:
    """The session's dtype word inside a TensorRT format string (`Row major linear FP16 format`):
    `sessions.documents.trt_names`."""
    return dtype_word(text)
