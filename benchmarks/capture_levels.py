"""Is a CUDA graph's speed drawn once per process, or per capture? One model's forward (BatchNorm folded, as the
study's PyTorch variants run it) captured several times in one process, each capture after a different amount of GPU
memory was taken (so its activations, and with --copies its weights too, sit elsewhere); then, once another
process's CUDA context has settled the GPU's state as a study does (`profilers.gpu_contexts`), all the captures
timed by the study's own timer (`profilers.timing.measure`: warm-up, rounds in alternating order, the discard at
each switch) as if they were variants. Prints each capture's median and round-median range, and how far apart the
captures' medians are; --runs N does that in N fresh processes, so the spread between captures in one process can
be set beside the spread between processes (`benchmarks/placement_shift.py` measured the latter: 0.30-0.44 % for
PyTorch fp32 on an H100, each process's band 0.03-0.19 % wide).

    python benchmarks/capture_levels.py [--model senet154] [--dtype fp32] [--captures 6] [--copies] [--traced]
                                        [--attached] [--runs 3]

With --traced, the study's CUPTI tracer (`profilers.kernel_trace.trace`) records 7 eager calls, twice, as a study
traces one variant after another (the calls' own ranges only: no layer ranges), after the captures and before the
timing; the tracer detaches CUPTI once a trace's records are read, and --attached switches that off
(`kernel_trace.DETACH_AFTER_TRACE`), to time what a process left with CUPTI attached runs at.

Where the captures of one process differ as processes do, a study that captured each variant's graph anew between
rounds would see the spread in its own round medians, and its bands would hold it. Needs a GPU.
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PAD_STEP_MIB = 7  # capture k is made after k * this many MiB more were taken (an odd size: not a block multiple)


def child(args: argparse.Namespace) -> dict:
    """One process's captures timed; their medians and round medians (ms), as a JSON-ready dict."""
    from profilers.kernel_trace import prepare_nvtx_injection

    if args.traced:
        prepare_nvtx_injection()  # before the first NVTX call of the process, as the study's CLI does
    import timm
    import torch

    from builders.pytorch.graph_capture import capture_graph
    from builders.pytorch.variant_modules import folded_reference
    from profilers.device import study_device
    from profilers.timing import clock_for, measure
    from sessions.documents.plan import TimingPlan

    torch.manual_seed(0)
    dtype = {"fp32": torch.float32, "fp16": torch.float16}[args.dtype]
    model = timm.create_model(args.model, pretrained=False).cuda().eval()
    sample = torch.randn(1, 3, 224, 224, device="cuda")
    folded = folded_reference(model, sample).module.to(dtype).eval()
    del model
    steps, kept = {}, []
    with torch.no_grad():
        for k in range(args.captures):
            pad = torch.empty((PAD_STEP_MIB * k) << 20, dtype=torch.uint8, device="cuda")
            module = copy.deepcopy(folded) if args.copies else folded
            x = sample.to(dtype).clone()
            captured = capture_graph(lambda m=module, x=x: m(x), lambda: None)
            if captured.graph is None:
                raise SystemExit(f"capture {k} failed: {captured.step.note}")
            steps[f"capture-{k}"] = captured.step.run
            kept.append((pad, module, x, captured))
    traced: list[int] = []  # the kernels each trace recorded
    stayed: list[str] = []  # the traces' notes that CUPTI stayed attached
    if args.traced:  # as a study traces each variant after its graph is made: 7 eager calls under CUPTI
        from profilers import kernel_trace

        kernel_trace.DETACH_AFTER_TRACE = not args.attached  # off: CUPTI stays attached after each trace
        with torch.no_grad():
            for _ in range(2):  # twice, as a study traces one variant after another
                records = kernel_trace.trace(lambda: folded(sample.to(dtype)), 7, torch.cuda.synchronize)
                traced.append(len(records.kernels))
                stayed.extend(note for note in records.note.split("; ") if "stayed attached" in note)
    state = study_device("cuda").settle()  # every graph made: the GPU state the study times its rows in
    plan = TimingPlan(warmup_s=0.2, rounds=args.rounds, iters=args.iters, switch_warmup=5)
    rounds: list[dict[str, float]] = []

    def on_round(index: int, samples: dict[str, list[float]]) -> None:
        rounds.append({name: statistics.median(s[-args.iters:]) for name, s in samples.items()})

    samples = measure(steps, plan, clock_for("cuda"), on_round)
    return {
        "gpu": torch.cuda.get_device_name(), "state": state, "model": args.model, "dtype": args.dtype,
        "copies": args.copies, "traced": args.traced, "detach": not args.attached,
        "traced_kernels": traced, "stayed": stayed,
        "captures": {name: {"median_ms": statistics.median(s),
                            "round_medians_ms": [r[name] for r in rounds]} for name, s in samples.items()},
    }


def spread_pct(values: list[float]) -> float:
    """How far the largest of `values` lies above the smallest, in per cent of the smallest."""
    return (max(values) / min(values) - 1) * 100


def _traced_words(run: dict) -> str:
    if not run["traced"]:
        return ""
    if run["stayed"]:
        after = f", {run['stayed'][0]}"
    else:
        after = ", CUPTI detached (cuptiFinalize) after each" if run["detach"] else ""
    kernels = " and ".join(map(str, run["traced_kernels"]))
    return f"CUPTI traced 7 eager calls twice first ({kernels} kernels){after}; "


def report(run: dict, index: int) -> list[float]:
    """One process's table; its captures' medians."""
    medians = []
    print(f"## process {index}: {run['gpu']}, {run['model']} {run['dtype']}, weights "
          f"{'copied per capture' if run['copies'] else 'shared'}; "
          f"{_traced_words(run)}{run['state']}")
    print("capture     median ms  round medians' range ms  range %")
    for name, c in run["captures"].items():
        low, high = min(c["round_medians_ms"]), max(c["round_medians_ms"])
        medians.append(c["median_ms"])
        print(f"{name:<10}  {c['median_ms']:9.4f}  {low:.4f}-{high:.4f}           {(high / low - 1) * 100:5.2f}")
    print(f"captures' medians apart: {spread_pct(medians):.2f} %")
    return medians


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="senet154")
    parser.add_argument("--dtype", choices=("fp32", "fp16"), default="fp32")
    parser.add_argument("--captures", type=int, default=6)
    parser.add_argument("--copies", action="store_true", help="each capture runs its own copy of the weights")
    parser.add_argument("--traced", action="store_true",
                        help="7 eager calls traced with CUPTI, twice, before the timing")
    parser.add_argument("--attached", action="store_true",
                        help="with --traced: CUPTI kept attached after each trace (the tracer's detach off)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--runs", type=int, default=1, help="fresh processes, each timing its own captures")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.attached and not args.traced:
        parser.error("--attached needs --traced")
    if args.child:
        print(json.dumps(child(args)))
        return
    forwarded = ["--model", args.model, "--dtype", args.dtype, "--captures", str(args.captures), "--rounds",
                 str(args.rounds), "--iters", str(args.iters), *(["--copies"] if args.copies else []),
                 *(["--traced"] if args.traced else []), *(["--attached"] if args.attached else [])]
    firsts, within = [], []
    for index in range(1, args.runs + 1):
        done = subprocess.run([sys.executable, __file__, *forwarded, "--child"], check=False, capture_output=True,
                              text=True, cwd=ROOT)
        if done.returncode:
            sys.exit(f"process {index} failed (exit {done.returncode}):\n{done.stderr[-4000:]}")
        medians = report(json.loads(done.stdout.strip().splitlines()[-1]), index)
        firsts.append(medians[0])
        within.append(spread_pct(medians))
    if args.runs > 1:
        print(f"\nwithin a process, captures apart: {min(within):.2f}-{max(within):.2f} %; between processes, "
              f"each one's first capture apart: {spread_pct(firsts):.2f} %")


if __name__ == "__main__":
    main()
