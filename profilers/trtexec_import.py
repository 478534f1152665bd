"""A session from files that TensorRT tools wrote: layer information, profile and times.

Imported variants carry what the files hold and nothing more: layers, tactics, formats, per-layer
times, latency. The files hold no kernel launches, so imported variants have no kernel table.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import orjson

from profilers import environment
from profilers.stats import latency_stats
from profilers.trt_files import pair_profile, parse_layer_info, parse_profile, parse_times
from sessions.errors import InputError
from sessions.model import Environment, Session, Study, TimingMethod, Variant

PRECISION_ORDER = ("fp8", "int8", "bf16", "fp16", "fp32")


def read_json(path: Path, what: str):
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise InputError(f"no such {what} file: {path}") from None
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise InputError(f"{path} is not valid JSON ({what}): {exc}") from None


def dominant_precision(variant_layers) -> str:
    seen = {layer.precision for layer in variant_layers}
    return next((p for p in PRECISION_ORDER if p in seen), "unknown")


def import_variant(layers_path: Path, profile_path: Path | None, times_path: Path | None, name: str | None) -> tuple[Variant, list[int]]:
    """The variant, and the input dimensions of its first layer (batch first) where known."""
    info = parse_layer_info(read_json(layers_path, "layer information"), str(layers_path))
    variant = Variant(
        name=name or Path(layers_path).name.split(".")[0],
        backend="trtexec",
        precision=dominant_precision(info.layers),
        device="cuda",
        layers=info.layers,
        notes=list(info.notes),
    )
    if profile_path is not None:
        profile = parse_profile(read_json(profile_path, "profile"), str(profile_path))
        pairing = pair_profile(info.layers, profile, str(profile_path))
        how = "by position" if pairing.by_position else "by name"
        variant.notes.append(f"profile paired {how}: {pairing.matched} of {len(info.layers)} layers")
        if pairing.unmatched_layers or pairing.unmatched_records:
            variant.notes.append(
                f"partial pairing: {len(pairing.unmatched_layers)} layers without a record, "
                f"{len(pairing.unmatched_records)} records without a layer"
            )
        if profile.count is not None:
            variant.notes.append(f"profile over {profile.count} inferences")
    if times_path is not None:
        compute, _latency = parse_times(read_json(times_path, "times"), str(times_path))
        variant.latency = latency_stats(compute)
    first = info.layers[0].inputs
    dims = list(first[0].shape or []) if first else []
    return variant, dims


def new_session(name: str, dims: list[int], command: list[str], timed: bool) -> Session:
    batch = dims[0] if dims and dims[0] > 0 else 1
    return Session(
        study=Study(
            model=name,
            source="trtexec",
            input_shape=dims[1:],
            batch=batch,
            command=command,
            created=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            backend="trtexec",
            device="cuda",
            tool_version=environment.tool_version(),
            weights="from the engine",
        ),
        environment=Environment(
            host="unknown (imported files)", os="", cpu="", cpu_count=0, python="", versions={}, gpu=None
        ),
        method=TimingMethod(
            timer="trtexec",
            timed_region=(
                "trtexec GPU compute time per inference (CUDA events around enqueueV3 or the CUDA-graph launch), "
                "from --exportTimes, warm-up already discarded by trtexec"
                if timed
                else "no timing imported"
            ),
            cuda_graph=False,
            warmup_s=0.0,
            rounds=1,
            iters=0,
            interleaved=False,
            transfers_included=False,
            static_inputs=True,
            per_layer="IProfiler layer times from trtexec --exportProfile (averageMs per inference; includes "
            "profiling overhead and does not add up to the latency)",
            kernels="not in TensorRT's files: layer information names one tactic per layer, not the kernels launched",
        ),
    )

