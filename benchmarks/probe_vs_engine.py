"""The FP8 probe against the cuDNN / cuBLASLt engine, layer by layer: on an FP8 GPU, `trt-inspect probe MODEL` and an
engine study of the same model, batch and images (`--variants cudnn-fp16,cudnn-fp8-all`), then per convolution and
linear the probe's time of the layer alone against the engine's time of that layer in the model, and the ratio.

    python benchmarks/probe_vs_engine.py MODEL [--batch N] [--fp8-layers kept|timed] [--out DIR]
    python benchmarks/probe_vs_engine.py --sessions ENGINE.json PROBE.json   # compare sessions already made

Pairs: each conv and linear layer of the engine's fp16 variant with the probe's fp16 layer of the same name; each
FP8 layer of the engine's FP8 variant with the probe's FP8 layer; each quantize layer the engine runs with the
probe's quantize layer of the same name. The engine's time is its layer's kernel time per traced call (the study's
per-layer time); the probe's the time its session gives the layer (its kernel time per traced call, every layer in
model order, or, in a session of a probe that timed layers in isolation, the isolated time: CUDA-graph replays of
the layer alone, L2-warm) and, beside it, its kernel time per traced call either way. The probe times each
convolution's graph with the epilogue the engine fuses (probes older than that: without it), always with an fp16
output where the engine's may write FP8: the rows name the engine's epilogue, and the summary gives the layers whose
engine graph has none apart. `--fp8-layers kept` (the
default here) has the engine run every layer of the recipe in FP8 where it has a kernel, as the probe does.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from inspector.probe.probe_session import ISOLATED
from sessions.documents.model import Layer, Session, Variant
from sessions.documents.storage import load
from sessions.reports.probe_summary import FP8_VARIANT, FP16_VARIANT

WITHIN = 0.15  # the must-show: the probe's figure within 15 % of the engine's
ENGINE_BACKEND = "cudnn"
QUANTIZE = "quantize"
OLD_TRACED = "traced_kernel_ms"  # what a probe whose layer times were isolated kept of each layer's trace


@dataclass(frozen=True)
class Row:
    """One layer the engine and the probe both time: times in ms per call; `plain`: the engine's graph of it has no
    epilogue and writes fp16 (so the probe's graph of it is the engine's, in any probe)."""

    layer: str
    precision: str  # fp16 | fp8 | quantize
    engine_ms: float
    probe_ms: float
    probe_traced_ms: float | None
    plain: bool
    epilogue: str
    engine_kernel: str
    probe_kernel: str

    @property
    def ratio(self) -> float:
        return self.probe_ms / self.engine_ms

    @property
    def within(self) -> bool:
        return abs(self.ratio - 1) <= WITHIN

    @property
    def traced_within(self) -> bool | None:
        """Whether the probe's kernel time in its traced eager call (a layer timed as the engine's layers are: its
        kernels' own time, in model order) lies within 15 % of the engine's; None where the probe traced none."""
        if self.probe_traced_ms is None:
            return None
        return abs(self.probe_traced_ms / self.engine_ms - 1) <= WITHIN


def engine_variant(session: Session, precision: str) -> Variant | None:
    """The engine's variant of `precision` in a study session (the first, where it has several)."""
    return next((v for v in session.variants if v.backend == ENGINE_BACKEND and v.precision == precision), None)


def _epilogue(layer: Layer) -> str:
    words = [*layer.attrs.get("epilogue", [])] + (["fp8 out"] if "output" in layer.attrs else [])
    return "+".join(words) or "-"


def traced_ms(probe: Layer, traced: bool) -> float | None:
    """The probe layer's kernel time per traced call: its time where its variant was traced and the probe times
    layers by their traced kernels (it keeps the isolated figure under `ISOLATED`), else the `traced_kernel_ms` a
    probe of isolated figures kept; None where neither."""
    if ISOLATED in probe.attrs:
        return probe.time_ms if traced else None
    return probe.attrs.get(OLD_TRACED)


def _row(engine: Layer, probe: Layer, precision: str, traced: bool) -> Row | None:
    if engine.time_ms is None or probe.time_ms is None or engine.time_ms <= 0:
        return None
    epilogue = "-" if precision == QUANTIZE else _epilogue(engine)
    return Row(engine.name, precision, engine.time_ms, probe.time_ms, traced_ms(probe, traced),
               epilogue == "-", epilogue, engine.tactic or engine.kind, probe.tactic or probe.kind)


def pair(engine: Session, probe: Session) -> list[Row]:
    """The layers both time, in the engine's order: fp16 convolutions and linears, FP8 ones, quantize layers."""
    rows: list[Row] = []
    variant16, variant8 = probe.variant(FP16_VARIANT), probe.variant(FP8_VARIANT)
    probe16 = {layer.name: layer for layer in variant16.layers}
    probe8 = {layer.name: layer for layer in variant8.layers}
    fp16, fp8 = engine_variant(engine, "fp16"), engine_variant(engine, "fp8")
    for layer in fp16.layers if fp16 is not None else []:
        seen = probe16.get(layer.name)
        if layer.op in ("conv", "linear") and seen is not None:
            rows.append(_row(layer, seen, "fp16", variant16.trace is not None))
    for layer in fp8.layers if fp8 is not None else []:
        seen = probe8.get(layer.name)
        if seen is None or seen.precision != "fp8":
            continue
        if layer.op == QUANTIZE:
            rows.append(_row(layer, seen, QUANTIZE, variant8.trace is not None))
        elif layer.op in ("conv", "linear") and layer.precision == "fp8":
            rows.append(_row(layer, seen, "fp8", variant8.trace is not None))
    return [row for row in rows if row is not None]


def summary(rows: list[Row], precision: str, plain_only: bool = False) -> str:
    """How many of one precision's rows lie within 15 %, their median ratio and their sums."""
    chosen = [row for row in rows if row.precision == precision and (row.plain or not plain_only)]
    if not chosen:
        return f"{precision}{' (no epilogue)' if plain_only else ''}: no layer"
    within = sum(row.within for row in chosen)
    engine, probe = sum(row.engine_ms for row in chosen), sum(row.probe_ms for row in chosen)
    return (f"{precision}{' (no epilogue)' if plain_only else ''}: {within} of {len(chosen)} layers within "
            f"{WITHIN:.0%}; median probe / engine {statistics.median(row.ratio for row in chosen):.2f}; sums "
            f"{probe:.3f} / {engine:.3f} ms = {probe / engine:.2f}")


def table(rows: list[Row]) -> list[str]:
    lines = [("| layer | precision | engine ms | probe ms | probe / engine | probe traced ms | engine epilogue | "
              "engine kernel | probe kernel |"), "|---|---|---:|---:|---:|---:|---|---|---|"]
    for row in rows:
        flag = "" if row.within else " (over 15 %)"
        traced = f"{row.probe_traced_ms:.4f}" if row.probe_traced_ms is not None else "-"
        lines.append(f"| {row.layer} | {row.precision} | {row.engine_ms:.4f} | {row.probe_ms:.4f} | "
                     f"{row.ratio:.2f}{flag} | {traced} | {row.epilogue} | {row.engine_kernel[:48]} | "
                     f"{row.probe_kernel[:48]} |")
    return lines


def report(engine_path: Path, probe_path: Path) -> int:
    """The table and the summary; 1 where a session is missing or no layer pairs."""
    missing = [str(path) for path in (engine_path, probe_path) if not path.is_file()]
    if missing:
        print(f"no session at {', '.join(missing)}")
        return 1
    engine, probe = load(engine_path), load(probe_path)
    rows = pair(engine, probe)
    print(f"{engine_path.name} (engine) against {probe_path.name} (probe): {engine.study.model}, batch "
          f"{engine.study.batch}")
    print("\n".join(table(rows)))
    print()
    for precision in ("fp16", "fp8", QUANTIZE):
        print(summary(rows, precision))
        if precision != QUANTIZE:
            print(summary(rows, precision, plain_only=True))
    within = sum(row.within for row in rows)
    print(f"must-show, every layer: {within} of {len(rows)} within {WITHIN:.0%}")
    print(traced_summary(rows))
    return 0 if rows else 1


def traced_summary(rows: list[Row]) -> str:
    """How many layers' kernel time per traced call in the probe lies within 15 % of the engine's, by precision."""
    traced = [row for row in rows if row.traced_within is not None]
    counts = ", ".join(f"{precision} {sum(bool(r.traced_within) for r in traced if r.precision == precision)} of "
                       f"{sum(r.precision == precision for r in traced)}" for precision in ("fp16", "fp8", QUANTIZE))
    return (f"the probe's kernel time per traced eager call (timed as the engine times a layer): "
            f"{sum(bool(r.traced_within) for r in traced)} of {len(traced)} within {WITHIN:.0%} ({counts})")


def measure(model: str, batch: int, fp8_layers: str, out: Path) -> tuple[Path, Path]:
    """The engine study and the probe of `model` at `batch` (same images and calibration: the defaults of both), in
    processes of their own; the sessions' paths."""
    out.mkdir(parents=True, exist_ok=True)
    stem = f"{model.replace('/', '_').replace(':', '_')}-b{batch}"
    engine, probe = out / f"{stem}-engine.json", out / f"{stem}-probe.json"
    cli = [sys.executable, "-c", "from inspector.cli import run; run()"]
    for command in ([*cli, "run", model, "--variants", "cudnn-fp16,cudnn-fp8-all", "--batch", str(batch),
                     "--fp8-layers", fp8_layers, "--out", str(engine), "--force"],
                    [*cli, "probe", model, "--batch", str(batch), "--out", str(probe), "--force"]):
        print("== trt-inspect", " ".join(command[3:]), flush=True)
        started = time.perf_counter()
        code = subprocess.run(command, check=False, stdin=subprocess.DEVNULL).returncode
        print(f"rc={code} wall={time.perf_counter() - started:.0f}s", flush=True)
    return engine, probe


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", nargs="?")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--fp8-layers", choices=("kept", "timed"), default="kept")
    parser.add_argument("--out", type=Path, default=Path("probe-vs-engine"))
    parser.add_argument("--sessions", nargs=2, type=Path, metavar=("ENGINE", "PROBE"))
    args = parser.parse_args(argv)
    if args.sessions:
        return report(*args.sessions)
    if not args.model:
        parser.error("a MODEL, or --sessions ENGINE.json PROBE.json")
    return report(*measure(args.model, args.batch, args.fp8_layers, args.out))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
