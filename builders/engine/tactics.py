"""Choices the engine makes by timing, as TensorRT's builder makes them: which library's tactic runs a convolution
(cuDNN's best plan of the convolution's graph, of the same graph scaled by ones or, for a 1x1 convolution, of its
graph as a matmul; a cuBLASLt GEMM; ATen's depthwise dispatch on either layout), whether a layer the recipe quantizes
runs in FP8 or fp16 (its best tactic of any library in each), and whether a convolution writes FP8 for its readers
(the quantize fused in its epilogue) or fp16 (a quantize layer before them).

Pure decisions over measured times (no torch, no cuDNN), so every rule is testable on the CPU; `builders.engine.build`
times the candidates and applies the answers by re-lowering.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from sessions.documents.vocab import CHOSEN_FP16

# the libraries whose tactics run a convolution; cuDNN's second: the plans of the fp16 graph with a scale of one
# (`ConvSignature.unit_scale`, its runtime-fusion engines); cuDNN's third: the plans of a 1x1 convolution's graph
# defined as a matmul of its rows by its weights (`ConvSignature.as_matmul`, its own plans); PyTorch's two: ATen's
# dispatch of the channels-last tensor (cuDNN's legacy depthwise path) and of an NCHW copy (ATen's own depthwise
# kernel, the copies there and back included)
CUDNN, CUDNN_SCALED, CUDNN_MATMUL = "cuDNN", "cuDNN scaled", "cuDNN matmul"
CUBLASLT, PYTORCH, PYTORCH_NCHW = "cuBLASLt", "PyTorch", "PyTorch NCHW"
LIBRARIES = (CUDNN, CUDNN_SCALED, CUDNN_MATMUL, CUBLASLT, PYTORCH, PYTORCH_NCHW)
GRAPH_LIBRARIES = (CUDNN, CUDNN_SCALED, CUDNN_MATMUL)  # the tactics that run a cuDNN graph of the engine's own
QUANTIZE_LAYER = "quantize layer"  # the library word of a quantize layer's time, recorded beside the tactics it weighs

CHOSEN_FP16_OUTPUT = "fp16 output chosen by timing"  # how a conv says it writes fp16 for FP8 readers by choice


@dataclass(frozen=True)
class Tactic:
    """One implementation of a layer that was timed: its library, the precision of its inputs and weights, the
    format it writes, its time in microseconds (on the GPU, back to back) and the plan's name where it has one."""

    library: str
    precision: str
    output: str
    time_us: float
    plan: str = ""

    def record(self) -> dict[str, Any]:
        """The tactic as a layer's `tactics` attribute stores it (JSON)."""
        return {key: value for key, value in asdict(self).items() if value != ""}


def fastest(tactics: Sequence[Tactic]) -> Tactic:
    """The tactic that runs: the fastest; of equal times the first (cuDNN's plan comes first, so a tie keeps it).
    ValueError where there is none."""
    if not tactics:
        raise ValueError("no tactic to choose from")
    return min(tactics, key=lambda tactic: tactic.time_us)


def precision_reason(fp8: Tactic, fp16: Tactic) -> str | None:
    """Why the layer runs fp16 although the recipe quantizes it (`fp16`, its best fp16 tactic of any library, is
    faster than `fp8`, its best FP8 one of any library), or None where FP8 is at least as fast and stays. Ties keep
    FP8, as asked."""
    if not fp16.time_us < fp8.time_us:
        return None
    return (f"{CHOSEN_FP16}: best FP8 tactic ({fp8.library}) {fp8.time_us / fp16.time_us:.1f}x slower "
            f"({fp8.time_us:.1f} us against {fp16.time_us:.1f} us, {fp16.library} fp16)")


def input_reason(saved_us: float, cost_us: float, readers: int, cost_words: str) -> str | None:
    """Why the FP8 layers reading one FP8 input run fp16: their best FP8 tactics together save `saved_us` against
    their best fp16 ones, less than making that input costs (`cost_us`: a quantize layer, or what writing FP8 adds to
    the convolution that writes it, `cost_words` saying which); None where they save at least that much. Ties keep
    FP8, as asked."""
    if not saved_us < cost_us:
        return None
    return (f"{CHOSEN_FP16}: the {readers} FP8 layer(s) reading its quantized input save {saved_us:.1f} us "
            f"together, less than {cost_words} {cost_us:.1f} us")


def output_reason(fused: Tactic, unfused: Tactic, quantize_us: float) -> str | None:
    """Why a conv writes fp16 and leaves the quantize to a layer of its own: its best tactic writing fp16
    (`unfused`) plus that quantize takes less time than its best tactic writing FP8 (`fused`); None where writing FP8
    is at least as fast."""
    apart = unfused.time_us + quantize_us
    if not apart < fused.time_us:
        return None
    return (f"{CHOSEN_FP16_OUTPUT}: the best tactic writing FP8 ({fused.library}) takes {fused.time_us:.1f} us, the "
            f"best writing fp16 ({unfused.library}) {unfused.time_us:.1f} us and the quantize {quantize_us:.1f} us")
