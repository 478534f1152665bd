"""Per-inference times (`trtexec --exportTimes`): the `times` role, the variant's latency.

Each record's `computeMs` is one inference's GPU compute time (its `latencyMs`, end to end, where given).
A times file of another engine is refused: by trtexec's file names, and against trtexec's own summary
of the run (its GPU compute median) where the metadata gives one.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from profilers.stats import latency_stats
from profilers.trt_import import documents
from profilers.trt_import.documents import read_json
from profilers.trt_import.importer import Reading
from profilers.trt_import.kinds import (
    FileKind,
    Role,
    first_record,
    kind_of,
    register_kind,
    register_role,
    wrong_kind,
)
from profilers.trt_import.metadata import engine_stem
from profilers.trt_import.profile import optional_field, required_field
from sessions.documents.errors import InputError

TIMES_AGREEMENT = 0.25  # --exportTimes median against trtexec's own summary of the same run
TRTEXEC_NAMES = re.compile(r"\.(graph|timing|times|profile)\.json$")

ROLE = "times"  # import --times
TIMES = register_kind(FileKind(
    "a trtexec --exportTimes file: pass it as --times", ROLE, rank=60, suffixes=(".timing.json", ".times.json"),
    head=r'^\s*\[\s*\{[\s\S]*?"(?:computeMs|startEnqMs)"\s*:',
    recognise=lambda doc: (first := first_record(doc)) is not None and ("computeMs" in first or "startEnqMs" in first)))


def _positive_time(value: Any, where: str) -> float:
    return documents.time_ms(value, where, positive=True)  # a statistic of inferences divides by it


def parse_times(doc: Any, origin: str) -> tuple[list[float], list[float]]:
    """(GPU compute ms, end-to-end latency ms) per inference from `--exportTimes`."""
    kind = kind_of(doc)
    if not isinstance(doc, list) or not doc or (kind is not None and kind is not TIMES):
        raise wrong_kind(doc, origin, "a trtexec --exportTimes file (a JSON list of per-inference records)")
    compute, latency = [], []
    for position, item in enumerate(doc):
        if not isinstance(item, dict):
            raise InputError(f"{origin}: record {position} is not an object")
        computed = required_field(item, "computeMs", origin, position, _positive_time)
        latency.append(optional_field(item, "latencyMs", origin, position, _positive_time) or computed)
        compute.append(computed)
    return compute, latency


def apply_times(paths: list[Path], reading: Reading) -> None:
    """The variant's latency from its times file, refused where the file is of another engine."""
    (path,) = paths
    compute, _latency = parse_times(read_json(path, "times file"), str(path))
    reading.variant.latency = latency_stats(compute)
    _check_times_engine(path, reading, reading.variant.latency.median_ms)


def _check_times_engine(path: Path, reading: Reading, median_ms: float) -> None:
    """Refuse a times file of another engine: by trtexec's file names, and against trtexec's own summary."""
    named = reading.named
    if (named is not None and TRTEXEC_NAMES.search(named.name) and TRTEXEC_NAMES.search(path.name)
            and engine_stem(named) != engine_stem(path)):
        raise InputError(f"{path} was written for engine {engine_stem(path)!r}, the layers for "
                         f"{engine_stem(named)!r}: pass the times of the same engine")
    expected = reading.facts.gpu_compute_median_ms
    if expected and abs(median_ms - expected) > TIMES_AGREEMENT * expected:
        raise InputError(f"{path}: median {median_ms:.4g} ms, but trtexec's summary of this engine's run says "
                         f"{expected:.4g} ms ({', '.join(reading.facts.sources)}); "
                         "were both written for the same engine?")


register_role(Role(ROLE, "per-inference times (--exportTimes)", order=3, by_trtexec=True, apply=apply_times))
