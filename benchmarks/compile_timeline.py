"""When a first run's compile workers work and when they idle: the trt-inspect command runs in this process with the
plan compiler's pool (`builders.engine.compiler`) wrapped, so that every job (one cuDNN graph's plans, or one fused
region) records when it was sent, when a worker started and ended it and which worker it was; and the engine's
process records its variant builds and each wait for a worker's answer. Writes the events (JSON lines) and prints a
report: each build's span, its jobs and the workers' busy seconds in it, the idle worker-seconds while a build waited,
the jobs' queue waits, and the workers busy in each second.

    python benchmarks/compile_timeline.py REPORT.txt senet154 --out s.json    (the arguments of trt-inspect)

The events go beside the report (REPORT.events.jsonl). COMPILE_TIMELINE_WORKERS=N sets the plan compiler's most
workers (`compiler.MAX_WORKERS`) for the run, to weigh another count against it.

Times are CLOCK_MONOTONIC (`time.monotonic`, one clock for every process of the machine), in seconds from the
command's start. The wrapping adds one small file append a job.
"""

from __future__ import annotations

import collections
import concurrent.futures
import json
import multiprocessing
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

WORKERS_ENV = "COMPILE_TIMELINE_WORKERS"
EVENTS_ENV = "COMPILE_TIMELINE_EVENTS"  # the events file, for the workers (spawned: they inherit the environment)
_LOCK = threading.Lock()


def _append(event: dict[str, Any]) -> None:
    """One event appended to the events file (one write of one line: appends of a few hundred bytes do not mix)."""
    line = json.dumps(event) + "\n"
    with _LOCK, open(os.environ[EVENTS_ENV], "a", encoding="utf-8") as file:
        file.write(line)


def _timed(fn: Any, job: int, *args: Any) -> Any:
    """In a worker: `fn(*args)`, its start and end recorded as job `job`'s."""
    started = time.monotonic()
    try:
        return fn(*args)
    finally:
        _append({"event": "ran", "job": job, "pid": os.getpid(), "started": started, "ended": time.monotonic()})


def _what(fn: Any, args: tuple[Any, ...]) -> str:
    """A job in words: a graph job's signature key, else the job's function name (`_compile_region` for a fused
    region)."""
    if fn.__name__ == "_compile" and len(args) > 1 and hasattr(args[1], "key"):
        return str(args[1].key())
    return str(fn.__name__)


def _plans(result: Any) -> int | None:
    """The plans a graph job's answer holds (`WorkerAnswer`), or None for any other answer."""
    answer = getattr(result, "answer", None)
    if isinstance(answer, tuple) and len(answer) > 1 and isinstance(answer[1], dict):
        return sum(isinstance(plan, bytes) for plan in answer[1].values())
    return None


def _install() -> None:
    """The plan compiler's pools made timed, and the engine's process's waits and builds recorded."""
    from builders.engine import compiler
    from builders.engine import cudnn_backend as backend
    from builders.engine import fused_tactics as fused

    counter = iter(range(1, 1 << 30))

    class TimedPool(concurrent.futures.ProcessPoolExecutor):
        def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> concurrent.futures.Future[Any]:
            job = next(counter)
            _append({"event": "sent", "job": job, "what": _what(fn, args), "at": time.monotonic()})
            future = super().submit(_timed, fn, job, *args, **kwargs)

            def done(f: concurrent.futures.Future[Any]) -> None:
                plans = None if f.cancelled() or f.exception() is not None else _plans(f.result())
                _append({"event": "done", "job": job, "at": time.monotonic(), "cancelled": f.cancelled(),
                         "plans": plans})

            future.add_done_callback(done)
            return future

    def new_pool(workers: int) -> concurrent.futures.ProcessPoolExecutor:
        _append({"event": "pool", "workers": workers, "at": time.monotonic()})
        return TimedPool(workers, mp_context=multiprocessing.get_context("spawn"),
                         initializer=compiler._worker_init)

    compiler._new_pool = new_pool
    if os.environ.get(WORKERS_ENV):
        compiler.MAX_WORKERS = int(os.environ[WORKERS_ENV])

    def spanned(owner: Any, name: str, label: Any) -> None:
        original = getattr(owner, name)

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            started = time.monotonic()
            try:
                return original(*args, **kwargs)
            finally:
                _append({"event": "span", "what": label(args), "started": started, "ended": time.monotonic()})

        setattr(owner, name, wrapper)

    spanned(backend.CudnnBackend, "_build", lambda args: f"build {args[1].name}")
    spanned(compiler.CompileJobs, "take", lambda args: f"wait graph {args[1].key()}")
    spanned(fused, "_bytes_of", lambda args: "wait region")
    spanned(compiler.PlanCompiler, "hold_foreseen", lambda args: "hold foreseen")
    spanned(fused, "compile_needed", lambda args: "regions compiled")


def report(events: list[dict[str, Any]], start: float) -> str:
    """The report of `events` (see the module's docstring), times from `start`."""
    jobs: dict[int, dict[str, Any]] = collections.defaultdict(dict)
    spans, pools = [], []
    for event in events:
        kind = event["event"]
        if kind == "span":
            spans.append(event)
        elif kind == "pool":
            pools.append(event)
        else:
            jobs[event["job"]].update({f"{kind}_{k}" if k in ("at",) else k: v for k, v in event.items()
                                       if k not in ("event", "job")})
    ran = [j for j in jobs.values() if "started" in j]
    started_pools = ", ".join(f"{pool['workers']} workers at {pool['at'] - start:.1f} s" for pool in pools)
    cancelled = sum(bool(j.get("cancelled")) for j in jobs.values())
    graph_s = sum(j["ended"] - j["started"] for j in ran if j.get("what", "").startswith("conv"))
    lines = [f"pools started: {started_pools}", f"jobs sent {len(jobs)}, ran {len(ran)}, cancelled {cancelled}",
             f"worker seconds: {sum(j['ended'] - j['started'] for j in ran):.1f} (graphs {graph_s:.1f})"]
    builds = sorted((s for s in spans if s["what"].startswith("build ")), key=lambda s: s["started"])
    for build in builds:
        inside = [s for s in spans if build["started"] <= s["started"] <= build["ended"] and s is not build]
        waited: collections.Counter[str] = collections.Counter()
        for span in inside:
            waited[span["what"].split(" ")[0] + " " + span["what"].split(" ")[1]] += span["ended"] - span["started"]
        busy = sum(max(0.0, min(j["ended"], build["ended"]) - max(j["started"], build["started"])) for j in ran)
        lines.append(f"{build['what']}: {build['started'] - start:.1f}-{build['ended'] - start:.1f} s; workers busy "
                     f"{busy:.1f} s in it; " + ", ".join(f"{what} {seconds:.1f} s" for what, seconds in
                                                           sorted(waited.items())))
    queued = sorted(j["started"] - j["sent_at"] for j in ran if "sent_at" in j)
    if queued:
        lines.append(f"queue waits (sent to started): median {queued[len(queued) // 2]:.2f} s, max {queued[-1]:.2f} s")
    firsts = collections.defaultdict(list)
    for job in ran:
        firsts[job["pid"]].append(job["started"])
    lines.append("workers' first job at: " + ", ".join(f"{min(t) - start:.1f}" for t in
                                                       sorted(firsts.values(), key=min)) + " s")
    if ran:
        end = max(j["ended"] for j in ran)
        lines.append("workers busy each second (from the first pool's start):")
        origin = pools[0]["at"] if pools else start
        row = []
        for second in range(int(end - origin) + 1):
            lo, hi = origin + second, origin + second + 1
            row.append(sum(max(0.0, min(j["ended"], hi) - max(j["started"], lo)) for j in ran))
        lines.append(" ".join(f"{busy:.0f}" for busy in row) + f"  (second 0 = {origin - start:.1f} s)")
    slow = sorted(ran, key=lambda j: j["started"] - j["ended"])[:8]
    lines.append("longest jobs: " + "; ".join(f"{j['ended'] - j['started']:.1f} s {j.get('what', '?')[:60]} "
                                              f"({j.get('plans')} plans)" for j in slow))
    return "\n".join(lines)


def main() -> int:
    report_path = Path(sys.argv[1]).resolve()
    events_path = report_path.with_suffix(".events.jsonl")
    events_path.write_text("", encoding="utf-8")
    os.environ[EVENTS_ENV] = str(events_path)
    start = time.monotonic()
    _install()
    from inspector.cli import main as trt_inspect

    code = trt_inspect(sys.argv[2:])
    events = [json.loads(line) for line in events_path.read_text(encoding="utf-8").splitlines() if line.strip()]
    workers = os.environ.get(WORKERS_ENV) or "default"
    report_path.write_text(f"trt-inspect {' '.join(sys.argv[2:])}: exit {code}, {time.monotonic() - start:.1f} s "
                           f"wall; most workers: {workers}\n{report(events, start)}\n", encoding="utf-8")
    return code or 0


if __name__ == "__main__":
    sys.exit(main())
