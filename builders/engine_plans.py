"""Tactic selection for the cuDNN engine, as TensorRT's builder does it: every execution plan cuDNN offers for
a layer's graph (heuristic modes A, B and the fallback list, up to the opt level's count) is built and
timed in place, the fastest kept; the choices persist in a JSON timing cache keyed like TensorRT's
(GPU and compute capability, cuDNN and frontend versions, the layer's signature), so a later run builds
only the winner.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from sessions.paths import cache_dir
from sessions.storage import write_atomically

PLANS_PER_OPT_LEVEL = {0: 1, 1: 2, 2: 3, 3: 4, 4: 8, 5: 1000}  # --opt-level -> plans built and timed per graph
CACHE_VERSION = 1


class PlanGraph(Protocol):
    """The part of a cuDNN frontend graph (after create_execution_plans) that tactic selection uses."""

    def get_execution_plan_count(self) -> int: ...

    def get_plan_name_at_index(self, index: int) -> str: ...

    def build_plan_at_index(self, index: int) -> Any: ...


@dataclass
class Choice:
    index: int
    name: str
    tried: int  # plans built and timed (1 where the cache answered)
    offered: int  # plans cuDNN offered
    time_us: float | None  # the winner's time where it was timed here
    cached: bool
    failures: list[str]  # plans that did not build or run, with the reason


def timing_cache_path(gpu: str, capability: str, versions: str) -> Path:
    slug = "".join(c if c.isalnum() else "_" for c in f"{gpu}-sm{capability}-{versions}")
    return cache_dir() / f"cudnn-timing-{slug}.json"


class TimingCache:
    """Chosen plans by layer signature, one JSON file per GPU and library versions; never a pickle."""

    def __init__(self, path: Path, header: dict[str, str]) -> None:
        self.path, self.header = path, header
        self.entries: dict[str, dict[str, Any]] = {}
        self.dirty = False
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            return
        if isinstance(data, dict) and data.get("version") == CACHE_VERSION and data.get("key") == header:
            entries = data.get("plans")
            if isinstance(entries, dict):
                self.entries = {k: v for k, v in entries.items()
                                if isinstance(v, dict) and isinstance(v.get("index"), int) and isinstance(v.get("name"), str)}

    def get(self, signature: str) -> tuple[int, str] | None:
        entry = self.entries.get(signature)
        return (entry["index"], entry["name"]) if entry else None

    def put(self, signature: str, choice: Choice) -> None:
        self.entries[signature] = {"index": choice.index, "name": choice.name, "tried": choice.tried,
                                   "time_us": choice.time_us}
        self.dirty = True

    def save(self) -> None:
        if not self.dirty:
            return
        body = {"version": CACHE_VERSION, "key": self.header, "plans": self.entries}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(self.path, json.dumps(body, indent=1, sort_keys=True).encode(), "timing cache")
        self.dirty = False


def _builds(graph: PlanGraph, index: int) -> bool:
    """Whether plan `index` builds (and is then selected); a cached plan that no longer builds is timed again."""
    try:
        graph.build_plan_at_index(index)
    except Exception:  # noqa: BLE001
        return False
    return True


def choose_plan(graph: PlanGraph, signature: str, limit: int, time_plan: Callable[[int], float],
                cache: TimingCache | None) -> Choice:
    """The fastest of the first `limit` plans (built and timed by `time_plan(index)`, microseconds), or the
    cached choice where the cache holds one whose plan still has that name at that index.

    Raises RuntimeError with every plan's reason where none builds and runs.
    """
    offered = graph.get_execution_plan_count()
    cached = cache.get(signature) if cache else None
    if cached is not None and cached[0] < offered and graph.get_plan_name_at_index(cached[0]) == cached[1] \
            and _builds(graph, cached[0]):
        return Choice(cached[0], cached[1], 1, offered, None, True, [])
    best: tuple[float, int] | None = None
    failures: list[str] = []
    tried = 0
    for index in range(min(offered, max(1, limit))):
        tried += 1
        try:
            elapsed = time_plan(index)
        except Exception as exc:  # noqa: BLE001  (a plan that does not build or run is a refusal of that plan)
            failures.append(f"[{index}] {' '.join(str(exc).split())[:200] or type(exc).__name__}")
            continue
        if math.isfinite(elapsed) and (best is None or elapsed < best[0]):
            best = (elapsed, index)
    if best is None:
        raise RuntimeError(f"none of {tried} of {offered} plans built and ran: " + "; ".join(failures))
    graph.build_plan_at_index(best[1])  # selects it for execute()
    choice = Choice(best[1], graph.get_plan_name_at_index(best[1]), tried, offered, best[0], False, failures)
    if cache is not None:
        cache.put(signature, choice)
    return choice
