"""Whether cuDNN's matmul graph of a 1x1 convolution, (N*H*W, Cin) @ (Cin, Cout) with the engine's fused epilogue
(per-channel descale, bias, ReLU, the output quantize where asked), beats the engine's other tactics for senet154's
1x1 shapes: the convolution graph's best plan, the cuBLASLt GEMM (epilogue as PyTorch ops after it), in fp16 and
FP8. Every tactic is built and timed by the engine's own code (`builders.engine.kernels.select_in_process`,
`conv_tactics.time_library`), plans up to the default `--opt-level`'s count, nothing cached; the cuBLASLt GEMM also
timed eagerly (its calls enqueued back to back from Python, as the engine timed library tactics before it timed them
as captured graphs' replays). `--check` instead runs
each shape's conv and matmul graphs as the engine binds a layer (`ConvLayer`, random weights, FP8 with per-channel
weight scales) on one input and prints how far apart their outputs are, and how far the fp16 ones are from
`F.conv2d` in fp32, relative to the reference's largest magnitude.

    python benchmarks/cudnn_matmul_tactic.py [--batch 32] [--batch 1] [--plans N] [--check]
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from unittest import mock

import torch
import torch.nn.functional as F
from fp8_gemm_scales import SHAPES

from builders.engine import conv_tactics
from builders.engine.conv_tactics import time_library
from builders.engine.cudnn_library import import_cudnn
from builders.engine.kernels import ConvLayer, ConvSignature, select_in_process, time_execution
from builders.engine.plans import PLANS_PER_OPT_LEVEL
from builders.engine.tactics import CUBLASLT
from builders.fp8.format import FP8
from builders.fp8.quantizer import Quantizer, make_quantizer
from sessions.documents.options import default

FORMS = (("fp16", False), ("fp8", False), ("fp8", True))  # input precision, output FP8


def signature(batch: int, side: int, cin: int, cout: int, precision: str, output_fp8: bool) -> ConvSignature:
    return ConvSignature(precision, (batch, cin, side, side), cout, (1, 1), (1, 1), (0, 0), (1, 1), 1, ("relu",),
                         output_fp8)


def graph_us(sig: ConvSignature, cudnn, handle, plans: int) -> str:
    """The best plan's microseconds and name, or cuDNN's refusal in short."""
    try:
        graph = select_in_process(sig, cudnn, handle, plans, None)
    except Exception as exc:  # noqa: BLE001  (a graph cuDNN refuses is reported, the others go on)
        return f"refused ({str(exc).splitlines()[0][:60]})"
    return f"{graph.time_us():7.1f} {graph.choice.name}"


def check(batch: int, cudnn, handle, plans: int) -> None:
    """Each shape's conv and matmul graphs bound as layers, run on one input: the outputs' largest difference, and
    (fp16) each one's from F.conv2d in fp32, over the reference's largest magnitude."""
    print(f"\ncheck, batch {batch}: max |matmul - conv| / max |reference|; fp16 also each against F.conv2d (fp32)")
    for side, cin, cout in SHAPES:
        x = torch.randn(batch, cin, side, side, device="cuda")
        weight = torch.randn(cout, cin, 1, 1, device="cuda") / cin**0.5
        bias = torch.randn(cout, device="cuda") * 0.1
        reference = torch.relu(F.conv2d(x, weight, bias))
        scale = reference.abs().max()
        for precision in ("fp16", "fp8"):
            sig = signature(batch, side, cin, cout, precision, False)
            graphs = [select_in_process(form, cudnn, handle, plans, None)
                      for form in (sig, dataclasses.replace(sig, as_matmul=True))]
            if precision == "fp8":
                x_scale = float(x.abs().max()) / 448
                w_scale = weight.abs().amax(dim=(1, 2, 3)) / 448
                inputs = (x / x_scale).to(FP8)
            else:
                x_scale, w_scale, inputs = None, None, x.half()
            workspace = [torch.empty(max(g.workspace_bytes for g in graphs), dtype=torch.uint8, device="cuda")]
            conv, matmul = (ConvLayer(g, weight, bias, x_scale, w_scale, None, workspace)(inputs).float()
                            for g in graphs)
            apart = float((matmul - conv).abs().max() / scale)
            words = f"{batch * side * side:>6} x {cin:>4} -> {cout:>4} {precision}: apart {apart:.2e}"
            if precision == "fp16":
                words += (f", conv {float((conv - reference).abs().max() / scale):.2e}, "
                          f"matmul {float((matmul - reference).abs().max() / scale):.2e}")
            print(words, flush=True)


def library_us(sig: ConvSignature, quantizer: Quantizer) -> str:
    """The cuBLASLt tactic's microseconds per call (`time_library`), or why it failed."""
    try:
        return f"{time_library(CUBLASLT, sig, lambda: quantizer):7.1f}"
    except Exception as exc:  # noqa: BLE001  (reported, the others go on)
        return f"failed ({type(exc).__name__})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, action="append")
    parser.add_argument("--plans", type=int, default=PLANS_PER_OPT_LEVEL[default("opt_level")])
    parser.add_argument("--check", action="store_true", help="compare the two graphs' outputs instead of timing")
    args = parser.parse_args()
    cudnn = import_cudnn()
    handle = cudnn.create_handle()
    quantizer = make_quantizer()
    print(f"torch {torch.__version__}, cuDNN {cudnn.backend_version()}, frontend {cudnn.__version__}, "
          f"{torch.cuda.get_device_name()}; plans per graph {args.plans}; epilogue: descale, bias, ReLU")
    started = time.perf_counter()
    if args.check:
        for batch in args.batch or [1]:
            check(batch, cudnn, handle, args.plans)
        return
    for batch in args.batch or [32]:
        print(f"\nbatch {batch}: us per call (best plan's name) | conv graph | matmul graph | cuBLASLt | "
              "cuBLASLt eager")
        for side, cin, cout in SHAPES:
            for precision, output_fp8 in FORMS:
                sig = signature(batch, side, cin, cout, precision, output_fp8)
                conv = graph_us(sig, cudnn, handle, args.plans)
                matmul = graph_us(dataclasses.replace(sig, as_matmul=True), cudnn, handle, args.plans)
                library = library_us(sig, quantizer)
                with mock.patch.object(conv_tactics, "time_captured", time_execution):
                    eager = library_us(sig, quantizer)
                out = "fp8" if output_fp8 else "fp16"
                label = f"{batch * side * side:>6} x {cin:>4} -> {cout:>4} {precision}->{out}"
                print(f"{label:<34} | {conv:<40} | {matmul:<40} | {library} | {eager}", flush=True)
    print(f"\n{time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()
