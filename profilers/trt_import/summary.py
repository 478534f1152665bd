"""trtexec's performance summary: the latency of an imported engine where no per-inference times were exported.

A log prints it under `=== Performance summary ===` (8.x-10.x): `Throughput: N qps`, then one line a measure,
`GPU Compute Time: min = a ms, max = b ms, mean = c ms, median = d ms, percentile(99%) = e ms` (8.0-8.4 print one
percentile, 8.5+ three); `Timing trace has N queries over ...` says how many inferences it summarises. 7.x prints
each measure as a heading (`Host Latency`, `GPU Compute`) with `min: a ms` ... `percentile: e ms at 99%` lines under
it. trtexec's `*.profile.metadata.json` holds the same figures as lists: min, max, mean, median, then the
percentiles (90, 95, 99 in 8.5+; the one `--percentile` asked for, 99 by default, before).

Every figure passes `documents.time_ms`; a measure line missing one of min, max, mean or median, or holding a cell
that is not a number, is refused with one line.
"""

from __future__ import annotations

import re
from typing import Any

from profilers.trt_import import documents
from profilers.trt_import.text_layers import LOG_PREFIX, log_line
from sessions.documents.consistency import check_latency
from sessions.documents.errors import InputError
from sessions.documents.model import LatencyStats, PerformanceSummary, StatedTime

NUMBER = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?"
HEADING = "=== Performance summary ==="
# trtexec's words for each measure, 7.x to 10.x -> the PerformanceSummary field
MEASURES = {"GPU Compute Time": "gpu_compute", "GPU Compute": "gpu_compute", "Latency": "host_latency",
            "Host Latency": "host_latency", "H2D Latency": "h2d", "D2H Latency": "d2h",
            "End-to-End Host Latency": "end_to_end", "Enqueue Time": "enqueue"}
STAT = re.compile(rf"(min|max|mean|median|percentile\(({NUMBER})%\))\s*=\s*(\S+?)\s*ms")  # 8.x-10.x, any cell
STAT_7X = re.compile(rf"^(min|max|mean|median|percentile):\s*(\S+)\s*ms(?:\s+at\s+({NUMBER})%)?")
THROUGHPUT = re.compile(r"^Throughput:\s*(\S+)\s*qps", re.IGNORECASE)
QUERIES = re.compile(r"Timing trace has (\d+) queries")
JSON_PERCENTILES = {3: ("90", "95", "99"), 1: ("99",)}  # list entries after the median -> their percentiles
SUMMARY_SPAN = 60  # lines a summary takes at most
# where a summary starts, as a log line (8.x-10.x's heading, 7.x's first measure), found without splitting the log
START = re.compile(r"\[I\] (?:=== Performance summary ===|Host Latency|GPU Compute)[ \t\r]*$", re.MULTILINE)


def _ms(cell: str, where: str) -> float:
    try:
        value = float(cell)
    except ValueError:
        raise InputError(f"{where} is {cell!r}, not a number") from None
    return documents.time_ms(value, where)


def _stated(stats: dict[str, float], percentiles: dict[str, float], where: str) -> StatedTime:
    missing = [key for key in ("min", "max", "mean", "median") if key not in stats]
    if missing:
        raise InputError(f"{where} states no {', '.join(missing)}: not a line trtexec writes whole")
    return StatedTime(stats["min"], stats["max"], stats["mean"], stats["median"], percentiles)


def _level(text: str) -> str:
    return f"{float(text):g}"


def summary_of_log(text: str, source: str) -> PerformanceSummary | None:
    """The performance summary of a log's text; None where it has none; InputError (one line) for a bad figure."""
    found_start = log_line(text, START)
    if found_start is None:
        return None
    lines = [LOG_PREFIX.sub("", line).strip() for line in text[found_start.start():].split("\n", SUMMARY_SPAN)]
    found: dict[str, StatedTime] = {}
    throughput = None
    heading: str | None = lines[0] if lines[0] != HEADING else None  # 7.x opens with its first measure's heading
    stats: dict[str, float] = {}
    percentiles: dict[str, float] = {}

    def close() -> None:
        if heading in MEASURES and (stats or percentiles):
            found.setdefault(MEASURES[heading], _stated(stats, percentiles, f"{source}: the summary's {heading}"))

    for line in lines[1 if heading is None else 0:SUMMARY_SPAN]:
        if line.startswith(("=== ", "&&&&")):
            break
        name, _, rest = line.partition(":")
        if (match := THROUGHPUT.match(line)) is not None:
            throughput = _ms(match.group(1), f"{source}: the summary's throughput")
        elif name in MEASURES and "=" in rest:  # 8.x-10.x: one line a measure
            where = f"{source}: the summary's {name}"
            cells = STAT.findall(rest)
            line_stats = {key: _ms(value, f"{where} {key}") for key, _, value in cells if "(" not in key}
            line_percentiles = {_level(level): _ms(value, f"{where} percentile({level}%)")
                                for key, level, value in cells if "(" in key}
            found.setdefault(MEASURES[name], _stated(line_stats, line_percentiles, where))
        elif (match := STAT_7X.match(line)) is not None and heading is not None:  # 7.x: `min: 1.2 ms` under a heading
            key, value, level = match.groups()
            where = f"{source}: the summary's {heading} {key}"
            if key == "percentile":
                percentiles[_level(level or "99")] = _ms(value, where)
            else:
                stats[key] = _ms(value, where)
        elif line and ":" not in line:  # 7.x: the next measure's heading
            close()
            heading, stats, percentiles = line, {}, {}
    close()
    if "gpu_compute" not in found:
        return None
    queries = QUERIES.search(text)
    return PerformanceSummary(
        source=source, gpu_compute=found.pop("gpu_compute"),
        queries=documents.count(int(queries.group(1)), f"{source}: timed queries", positive=True) if queries else None,
        throughput_qps=throughput, **found)


def _json_stated(values: Any, where: str) -> StatedTime | None:
    if values is None:
        return None
    if not isinstance(values, list) or len(values) - 4 not in JSON_PERCENTILES:
        raise InputError(f"{where} is {str(values)[:60]!r}: not trtexec's min, max, mean, median and percentiles")
    numbers = [documents.time_ms(value, where) for value in values]
    return StatedTime(numbers[0], numbers[1], numbers[2], numbers[3],
                      dict(zip(JSON_PERCENTILES[len(values) - 4], numbers[4:], strict=False)))


def summary_of_json(doc: Any, source: str) -> PerformanceSummary | None:
    """The `performance_summary` of trtexec's profile metadata JSON; None where it has none."""
    summary = doc.get("performance_summary") if isinstance(doc, dict) else None
    if not isinstance(summary, dict) or summary.get("GPU Compute Time") is None:
        return None
    where = f"{source}: performance_summary"
    stated = {field: _json_stated(summary.get(name), f"{where} {name}") for name, field in MEASURES.items()
              if field != "gpu_compute" and name in summary}
    gpu = _json_stated(summary["GPU Compute Time"], f"{where} GPU Compute Time")
    assert gpu is not None
    qps = summary.get("Throughput")
    return PerformanceSummary(source=source, gpu_compute=gpu, queries=None,
                              throughput_qps=documents.time_ms(qps, f"{where} Throughput") if qps is not None else None,
                              **stated)


def latency_of(summary: PerformanceSummary) -> LatencyStats:
    """The variant's latency: the summary's GPU compute time, with no samples (no spread is stored behind it).
    InputError (one line naming the file) where its figures contradict each other (`check_latency`: a median or
    percentile outside min..max), as a session may not hold them."""
    gpu = summary.gpu_compute
    latency = LatencyStats(samples_ms=[], min_ms=gpu.min_ms, median_ms=gpu.median_ms, mean_ms=gpu.mean_ms,
                           p90_ms=gpu.percentiles_ms.get("90"), p99_ms=gpu.percentiles_ms.get("99"),
                           max_ms=gpu.max_ms, std_ms=None, cov=None)
    try:
        check_latency(latency, f"{summary.source}: GPU Compute Time")
    except ValueError as exc:
        raise InputError(str(exc)) from None
    return latency
