"""A benchmark script's result file beside an engine's files: its run configuration and per-run latencies in
seconds (`{"config": {...}, "latencies": [0.0012, ...]}`, written as a JSON document or double-encoded as one JSON
string holding it). The `benchmark` role: the variant's latency where neither `--exportTimes` nor trtexec's
performance summary gives one, in words that say the script's own timer measured it, end to end.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from profilers.stats import latency_stats
from profilers.trt_import import documents
from profilers.trt_import.importer import Reading
from profilers.trt_import.kinds import FileKind, Role, register_kind, register_role, wrong_kind
from sessions.documents.errors import InputError

ROLE = "benchmark"  # import --benchmark
MAX_RUNS = 10_000_000


def decoded(doc: Any, origin: str) -> Any:
    """The document a double-encoded file holds (a JSON string of JSON), else the document itself."""
    return documents.parse_json(doc, origin, "benchmark result") if isinstance(doc, str) else doc


def _is_result(doc: Any) -> bool:
    return isinstance(doc, dict) and isinstance(doc.get("config"), dict) and isinstance(doc.get("latencies"), list)


register_kind(FileKind(
    "a benchmark script's result (its config and per-run latencies in seconds): pass it as --benchmark", ROLE,
    rank=65, head=r'^\s*(?:\{[\s\S]*?"config"\s*:\s*\{|"\{[\s\S]*?\\"config\\"\s*:\s*\{)',
    recognise=lambda doc: _is_result(doc) or (isinstance(doc, str) and doc.lstrip().startswith("{")
                                              and '"latencies"' in doc and '"config"' in doc)))


def parse_result(doc: Any, origin: str) -> list[float]:
    """The per-run latencies in ms; InputError (one line) for a file of another kind or a latency that is no time."""
    doc = decoded(doc, origin)
    if not _is_result(doc):
        raise wrong_kind(doc, origin, "a benchmark result (config and latencies)")
    runs = doc["latencies"]
    if not runs or len(runs) > MAX_RUNS:
        raise InputError(f"{origin}: {len(runs)} latencies, not a benchmark's runs (1 to {MAX_RUNS:,})")
    return [documents.time_ms(documents.time_ms(value, f"{origin}: latency {i} (s)", positive=True) * 1e3,
                              f"{origin}: latency {i} (ms)", positive=True) for i, value in enumerate(runs)]


def apply_result(paths: list[Path], reading: Reading) -> None:
    """The variant's latency from the script's runs, where no per-inference times or performance summary give one."""
    (path,) = paths
    runs = parse_result(documents.read_json(path, "benchmark result"), str(path))
    if reading.variant.latency is not None or reading.facts.summary is not None:
        reading.notes.append(f"{path.name}: a benchmark script's {len(runs)} runs "
                             f"(median {sorted(runs)[len(runs) // 2]:.4g}"
                             " ms, its own timer, end to end) kept out of the latency: trtexec's figures give it")
        return
    reading.variant.latency = latency_stats(runs)
    reading.timed_by = (f"per-run latencies of the benchmark result {path.name}: the script's own clock around each "
                        "run, end to end (what it holds, transfers and synchronisation, is the script's)")
    reading.notes.append(f"latency: the {len(runs)} per-run latencies of the benchmark result {path.name}, timed by "
                         "the script's own clock end to end (seconds in the file, ms here)")


register_role(Role(ROLE, "a benchmark script's result JSON (config and per-run latencies in seconds)", order=5,
                   apply=apply_result))
