"""trt-inspect's own speed, measured (not asserted): start-up, session load / diff / save, TUI paint.

    python benchmarks/bench.py          # a table
    python benchmarks/bench.py --json   # one JSON object, seconds

Large sessions are the real H200 senet154 session with its fp8-all kernel table repeated over more
traced calls, so names, layers and sizes are those of a real trace.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import copy
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sessions.analyses.diff import diff_sessions
from sessions.analyses.groups import load_rules
from sessions.documents import storage
from sessions.documents.model import KernelTable

REAL = ROOT / "tests" / "data" / "h200" / "senet154-h200.json"
TARGETS = {"cli_import_s": 0.3, "load_150k_s": 0.3, "diff_150k_s": 0.5, "tui_first_paint_s": 1.0, "tui_drill_s": 0.1}


def best(fn, repeats: int = 5) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def scaled_session(records: int):
    """The real session; fp8-all's kernel table tiled over as many calls as `records` needs."""
    session = storage.load(REAL)
    variant = session.variant("fp8-all")
    base = variant.kernels
    n = len(base)
    table = KernelTable(names=list(base.names))
    calls = -(-records // n)
    for column in ("name", "layer", "start_ns", "duration_ns", "stream", "grid", "block"):
        values = getattr(base, column)
        setattr(table, column, (values * calls)[:records])
    table.call = [i // n for i in range(records)]
    variant.kernels = table
    variant.trace.calls = calls
    variant.trace.records = records
    return session


def cli_startup() -> float:
    """Wall time of `python -m inspector --help` in a fresh process, interpreter start included."""
    runs = []
    for _ in range(5):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "inspector", "--help"], capture_output=True, check=True, cwd=ROOT)
        runs.append(time.perf_counter() - t0)
    return statistics.median(runs)


def cli_import() -> float:
    code = "import time; t = time.perf_counter(); import inspector.cli; print(time.perf_counter() - t)"
    runs = [float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                                 cwd=ROOT).stdout)
            for _ in range(5)]
    return statistics.median(runs)


@contextlib.contextmanager
def paint_clock() -> Iterator[list[float]]:
    """While active, a list that gets the time each time a table draws its first row (`VirtualTable.render_line`
    patched, restored on exit)."""
    from inspector.tui.widgets.virtual_table import VirtualTable

    drawn: list[float] = []
    render_line = VirtualTable.render_line

    def timed_render_line(self, y):
        if y == 0 and self.row_count:
            drawn.append(time.perf_counter())
        return render_line(self, y)

    VirtualTable.render_line = timed_render_line  # type: ignore[method-assign]
    try:
        yield drawn
    finally:
        VirtualTable.render_line = render_line  # type: ignore[method-assign]


async def _tui_times(path: Path) -> tuple[float, float]:
    """(open: load + first paint, drill): each until the first row of the new table is drawn.

    Pilot's own settling after a key press (tens of milliseconds) is not counted: the clock stops
    at the table's first drawn row, which `render_line` reports.
    """
    from inspector.tui.app import InspectorApp
    from inspector.tui.screens.overview import OverviewScreen
    from inspector.tui.screens.tables import AllKernelsScreen

    with paint_clock() as drawn:
        t0 = time.perf_counter()
        app = InspectorApp(session=storage.load(path), path=path)
        async with app.run_test(size=(160, 50)) as pilot:
            while not isinstance(app.screen, OverviewScreen):
                await pilot.pause()
            await pilot.pause()
            first_paint = drawn[0] - t0
            t1 = time.perf_counter()
            drawn.clear()
            await pilot.press("k")
            while not isinstance(app.screen, AllKernelsScreen) or not drawn:
                await pilot.pause()
            drill = drawn[0] - t1
    return first_paint, drill


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    results: dict[str, float | int] = {"cli_import_s": cli_import(), "cli_startup_s": cli_startup()}
    rules = load_rules()
    with tempfile.TemporaryDirectory() as tmp:
        for records in (10_000, 50_000, 150_000):
            session = scaled_session(records)
            path = Path(tmp) / f"s{records}.json"
            results[f"save_{records // 1000}k_s"] = best(lambda s=session, p=path: storage.save(s, p), 3)
            results[f"file_{records // 1000}k_mib"] = round(path.stat().st_size / (1 << 20), 2)
            if records == 150_000:
                results["load_150k_s"] = best(lambda p=path: storage.load(p), 3)
                other = copy.deepcopy(session)
                results["diff_150k_s"] = best(lambda a=session, b=other: diff_sessions(a, b, rules), 3)
        tui = scaled_session(10_000)
        path = Path(tmp) / "tui.json"
        storage.save(tui, path)
        first, drill = asyncio.run(_tui_times(path))
        results["tui_first_paint_s"] = first
        results["tui_drill_s"] = drill
    if args.json:
        print(json.dumps(results))
        return
    width = max(map(len, results))
    print(f"{'figure'.ljust(width)}  {'value':>9}  target")
    for key, value in results.items():
        target = TARGETS.get(key)
        mark = "" if target is None else (f"<= {target}  {'ok' if value <= target else 'OVER'}")
        print(f"{key.ljust(width)}  {value:9.3f}  {mark}")


if __name__ == "__main__":
    main()
