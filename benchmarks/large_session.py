"""The TUI on a session of 50,000 layers: time to open it, to open the groups, to drill into a group and to list
every kernel. `python benchmarks/large_session.py [LAYERS]` prints one line per figure, wall and CPU seconds (targets:
open under 2 s, drill under 0.2 s); figures in `benchmarks/large_session.txt`. CPU seconds are the process's (the
verdict's worker thread included) until the wait for the paint ends: on a shared machine, the figure load cannot
inflate.

The session is the H200 SENet-154 one with every variant's layers (and their kernels) repeated until each variant
has LAYERS layers, renamed `<name>#<copy>`: real names, kinds and kernel mixes at a size of a large import.
"""

from __future__ import annotations

import asyncio
import dataclasses
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import paint_clock  # this script's folder is first on sys.path

from sessions.documents import storage
from sessions.documents.model import KernelTable, Session

REAL = ROOT / "tests" / "data" / "h200" / "senet154-h200.json"
TARGETS = {"open_s": 2.0, "drill_s": 0.2}


def large_session(layers: int) -> Session:
    session = storage.load(REAL)
    for variant in session.variants:
        base_layers, base = variant.layers, variant.kernels
        copies = -(-layers // len(base_layers))
        variant.layers = [dataclasses.replace(layer, name=f"{layer.name}#{c}") if c else layer
                          for c in range(copies) for layer in base_layers][:layers]
        if base is None:
            continue
        table = KernelTable(names=list(base.names))
        for c in range(copies):
            offset = c * len(base_layers)
            keep = [i for i, layer in enumerate(base.layer) if layer < 0 or layer + offset < layers]
            table.name += [base.name[i] for i in keep]
            table.layer += [base.layer[i] + offset if base.layer[i] >= 0 else -1 for i in keep]
            for column in ("call", "start_ns", "duration_ns", "stream", "grid", "block"):
                getattr(table, column).extend(getattr(base, column)[i] for i in keep)
        variant.kernels = table
        variant.trace.records = len(table)
    return session


async def tui_times(path: Path) -> dict[str, tuple[float, float]]:
    """Wall and CPU seconds until the new screen's table has drawn its first row: open (load and overview), groups,
    drill (Enter on the first group), all kernels."""
    from inspector.tui.app import InspectorApp
    from inspector.tui.screens.overview import OverviewScreen
    from inspector.tui.screens.tables import AllKernelsScreen, GroupsScreen, LayersScreen

    figures: dict[str, tuple[float, float]] = {}
    with paint_clock() as drawn:
        started, started_cpu = time.perf_counter(), time.process_time()
        app = InspectorApp(session=storage.load(path), path=path)
        async with app.run_test(size=(160, 50)) as pilot:

            async def until(screen: type, keys: tuple[str, ...], name: str) -> None:
                drawn.clear()
                began, began_cpu = time.perf_counter(), time.process_time()
                await pilot.press(*keys)
                while not isinstance(app.screen, screen) or not drawn:
                    await pilot.pause()
                figures[name] = drawn[0] - began, time.process_time() - began_cpu

            while not isinstance(app.screen, OverviewScreen) or not drawn:
                await pilot.pause()
            figures["open_s"] = drawn[0] - started, time.process_time() - started_cpu
            await until(GroupsScreen, ("g",), "groups_s")
            await until(LayersScreen, ("enter",), "drill_s")
            await until(AllKernelsScreen, ("escape", "escape", "k"), "all_kernels_s")
    return figures


def main() -> None:
    layers = int(sys.argv[1]) if len(sys.argv) > 1 else 50_000
    session = large_session(layers)
    kernels = sum(len(v.kernels) for v in session.variants if v.kernels is not None)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "large.json"
        storage.save(session, path)
        print(f"# {layers} layers in each of {len(session.variants)} variants, {kernels} kernel records")
        print("# figure        wall s   CPU s")
        for name, (value, cpu) in asyncio.run(tui_times(path)).items():
            target = TARGETS.get(name)
            verdict = "" if target is None else f"  <= {target:g}  {'ok' if value <= target else 'MISSED'}"
            print(f"{name:<15}{value:8.3f}{cpu:8.3f}{verdict}")


if __name__ == "__main__":
    main()
