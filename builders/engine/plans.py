"""Tactic selection for the cuDNN engine, as TensorRT's builder does it: every execution plan cuDNN offers for
a layer's graph (heuristic modes A, B and the fallback list, up to the opt level's count) is built and
timed in place, the fastest kept; the choices persist in a JSON timing cache keyed like TensorRT's
(GPU and compute capability, cuDNN and frontend versions, the layer's signature), each with the winner
serialized beside it (cuDNN's own execution-plan format, compiled kernels included), so a later run loads
the plan instead of compiling it, as a TensorRT engine file holds its tactics.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from builders.cache_files import (
    MAX_PLAN_BYTES,
    PLAN_NAME,
    cache_folder,
    document_digest,
    is_number,
    read_cache_bytes,
    read_cache_json,
    timing_entry,
)
from builders.engine.tactics import CUDNN, GRAPH_LIBRARIES, LIBRARIES
from sessions.documents.errors import InspectError
from sessions.documents.paths import cache_dir
from sessions.documents.storage import file_lock, lock_path_of, write_atomically

PLANS_PER_OPT_LEVEL = {0: 1, 1: 2, 2: 3, 3: 4, 4: 8, 5: 1000}  # --opt-level -> plans built and timed per graph


def tactics_timed(plan_limit: int) -> bool:
    """Whether tactics beside a graph's first plan are timed at all: not where one plan per graph is tried
    (`--opt-level` 0), which times none of another library, graph or fused region either."""
    return plan_limit > 1


CACHE_VERSION = 3  # 2: each choice names its serialized plan; 3: each entry carries its digest (and, optional in 3,
# the times of other libraries' tactics and the winning library: `libraries_read`)
FUSED_PREFIX = "fused "  # the signature of a fused tactic's entry (builders.engine.fused_tactics): times, no plan
QUANTIZE_PREFIX = "quantize "  # the signature of a quantize layer's time (its shape and implementation), no plan
COMPILED_PREFIX = "compiled "  # before a fused tactic's signature: the entry naming its compiled region's file
UNFORESEEN_PREFIX = "unforeseen "  # before a graph's signature: the entry saying foresight does not send it, and why
REFUSED, UNASKED = "refused", "unasked"  # why a graph is unforeseen: cuDNN made no plan; sent ahead, never asked
UNFORESEEN_REASONS = (REFUSED, UNASKED)
PLAN_SUFFIX, REGION_SUFFIX = ".plan", ".inductor"  # the files beside the cache: cuDNN plans, compiled regions
SAVE_LOCK_WAIT_S = 30.0  # a save waits this long for another study's save of the same cache, then is left for later
PRUNE_AFTER_S = 24 * 3600.0  # a plan file no entry names is removed once older than this: a study writes its plans
# as it chooses them and names them at its next save (minutes later), so a younger one may be another study's


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
    """Chosen plans by layer signature, one JSON file per GPU and library versions, each winner's serialized plan
    in a folder beside it (`<cache stem>.plans/<sha256 of the plan>.plan`, cuDNN's bytes as cuDNN wrote them), and
    fused regions' compiled code there too (`<sha256>.inductor`, Inductor's standalone artifacts:
    `builders.engine.region_artifacts`); never a pickle. A file whose bytes no longer hash to its name is not
    loaded. Loading a plan or a region loads the native code compiled into it: the cache is the user's own folder, as
    a TensorRT timing cache or engine is.

    Read through `builders.cache_files`: an entry that does not read (`timing_entry`, `libraries_read`) is a miss,
    built again and replaced at the next save. Studies sharing the cache merge on save, under its lock (`save`).
    """

    def __init__(self, path: Path, header: dict[str, str]) -> None:
        self.path, self.header = path, header
        self.entries: dict[str, dict[str, Any]] = self._stored()
        self.changed: set[str] = set()  # signatures this process recorded since its last save
        self.dirty = False

    def _stored(self) -> dict[str, dict[str, Any]]:
        """The entries of the file at `path` that read (`timing_entry`), for this header; {} for any other file."""
        data = read_cache_json(self.path, "timing cache")
        if not (isinstance(data, dict) and data.get("version") == CACHE_VERSION and data.get("key") == self.header
                and isinstance(data.get("plans"), dict)):
            return {}
        entries = {signature: _checked(signature, raw) for signature, raw in data["plans"].items()}
        return {signature: entry for signature, entry in entries.items() if entry is not None}

    @property
    def plans_dir(self) -> Path:
        return self.path.with_suffix(".plans")

    def get(self, signature: str) -> tuple[int, str] | None:
        """The cached (plan index, plan name) for `signature`, from an entry that read (`timing_entry`), or None."""
        entry = self.entries.get(signature)
        return (entry["index"], entry["name"]) if entry else None

    def holds_plan(self, signature: str) -> bool:
        """Whether an intact serialized plan is held for `signature`."""
        return self.plan(signature) is not None

    def plan(self, signature: str) -> tuple[bytes, dict[str, Any]] | None:
        """The serialized winner for `signature` and its entry, where the cache holds one whose bytes are intact."""
        entry = self.entries.get(signature)
        blob = self._file(entry.get("plan") if entry is not None else None, PLAN_SUFFIX, "serialized plan")
        return (blob, entry) if blob is not None and entry is not None else None

    def compiled_region(self, signature: str) -> bytes | None:
        """The compiled code of the fused region of `signature` (a FUSED_PREFIX key: `put_compiled_region`), where
        the cache holds it intact."""
        entry = self.entries.get(COMPILED_PREFIX + signature)
        return self._file(entry.get("artifact") if entry is not None else None, REGION_SUFFIX, "compiled region")

    def holds_compiled_region(self, signature: str) -> bool:
        """Whether the cache names a file of compiled code for the fused region of `signature`, without reading it
        (`compiled_region` reads and checks it where it is used)."""
        entry = self.entries.get(COMPILED_PREFIX + signature)
        name = entry.get("artifact") if entry is not None else None
        return isinstance(name, str) and PLAN_NAME.fullmatch(name) is not None and (
            self.plans_dir / f"{name}{REGION_SUFFIX}").is_file()

    def _file(self, name: Any, suffix: str, what: str) -> bytes | None:
        """The bytes of the file `name` + `suffix` in `plans_dir`, where `name` is a digest (never a path) and the
        bytes still hash to it."""
        if not (isinstance(name, str) and PLAN_NAME.fullmatch(name)):
            return None
        blob = read_cache_bytes(self.plans_dir / f"{name}{suffix}", what, MAX_PLAN_BYTES)
        return blob if blob is not None and hashlib.sha256(blob).hexdigest() == name else None

    def put_compiled_region(self, signature: str, blob: bytes) -> None:
        """Keeps the compiled code of the fused region of `signature` (a FUSED_PREFIX key) in a file named by its
        digest, and an entry naming it; nothing where the folder cannot be written (the next build compiles
        again)."""
        name = self._write(blob, REGION_SUFFIX, "compiled region")
        if name is None:
            return
        self.entries[COMPILED_PREFIX + signature] = {"artifact": name}
        self.changed.add(COMPILED_PREFIX + signature)
        self.dirty = True

    def _write(self, blob: bytes, suffix: str, what: str) -> str | None:
        """`blob` written into `plans_dir` under its digest; the digest, or None where it could not be written."""
        digest = hashlib.sha256(blob).hexdigest()
        try:
            if not cache_folder(self.plans_dir):  # a link: never written through
                raise InspectError(f"{self.plans_dir} is not a folder of its own")
            write_atomically(self.plans_dir / f"{digest}{suffix}", blob, what)
        except (OSError, InspectError):  # a cache that cannot be written costs the next run's time, not this build
            return None
        return digest

    def library_times(self, signature: str, timing: str) -> dict[str, float]:
        """The microseconds of other libraries' tactics held for `signature` (`put_libraries`), by library, where
        they were timed as `timing` says; {} where none are held so (an entry written before the engine timed other
        libraries, or timed them another way: they are timed again)."""
        entry = self.entries.get(signature)
        if entry is None or entry.get("tactics_timing") != timing:
            return {}
        return dict(entry.get("tactics", {}))

    def put_libraries(self, signature: str, times: dict[str, float], library: str, timing: str) -> None:
        """Adds to `signature`'s entry the times of other libraries' tactics, how they were timed (`timing`) and the
        library that won; nothing where the entry is missing (no cuDNN choice recorded) or already holds them."""
        entry = self.entries.get(signature)
        if entry is None or (entry.get("tactics") == times and entry.get("library", CUDNN) == library
                             and entry.get("tactics_timing") == timing):
            return
        self.entries[signature] = {**entry, "tactics": dict(times), "library": library, "tactics_timing": timing}
        self.changed.add(signature)
        self.dirty = True

    def fused_times(self, signature: str) -> tuple[float, float] | None:
        """The microseconds of a fused tactic and of the engine's own steps for the same region (`put_fused`), where
        the cache holds an entry for `signature` (a FUSED_PREFIX key; read only where it reads: `fused_entry_reads`)."""
        entry = self.entries.get(signature)
        return (entry["fused_us"], entry["unfused_us"]) if entry is not None else None

    def put_fused(self, signature: str, fused_us: float, unfused_us: float) -> None:
        """Records the two times of a fused tactic's choice under `signature` (a FUSED_PREFIX key)."""
        self.entries[signature] = {"fused_us": fused_us, "unfused_us": unfused_us}
        self.changed.add(signature)
        self.dirty = True

    def quantize_time(self, signature: str, timing: str) -> float | None:
        """The microseconds of a quantize layer kept under `signature` (a QUANTIZE_PREFIX key: `put_quantize`), where
        the cache holds an entry that reads (`quantize_entry_reads`) timed as `timing` says (an entry timed another
        way, or written before entries said how, is a miss: timed again)."""
        entry = self.entries.get(signature)
        return entry["time_us"] if entry is not None and entry.get("timing") == timing else None

    def put_quantize(self, signature: str, time_us: float, timing: str) -> None:
        """Records a quantize layer's time under `signature` and how it was timed (`timing`), so that a later build
        weighs it as this one did; a time that would not read back (`quantize_entry_reads`: not finite, or not above
        0) is not recorded."""
        entry = {"time_us": time_us, "timing": timing}
        if not quantize_entry_reads(entry):
            return
        self.entries[signature] = entry
        self.changed.add(signature)
        self.dirty = True

    def unforeseen(self, signature: str) -> bool:
        """Whether the cache says the graph of `signature` is not to be foreseen (`put_unforeseen`)."""
        return UNFORESEEN_PREFIX + signature in self.entries

    def put_unforeseen(self, signature: str, why: str) -> None:
        """Records that the graph of `signature` is not to be foreseen, and why (one of UNFORESEEN_REASONS): cuDNN
        built no plan for it, or it was sent ahead and no build asked for it. Neither kind ever holds a plan, so
        without the entry every run, however warm, would send it to the workers again (starting a pool for it). A
        build that asks for such a graph still makes it (the entry says nothing of the graph itself)."""
        key = UNFORESEEN_PREFIX + signature
        if self.entries.get(key) == {"why": why}:
            return
        self.entries[key] = {"why": why}
        self.changed.add(key)
        self.dirty = True

    def put(self, signature: str, choice: Choice, plan: bytes | None) -> None:
        """Records `choice` for `signature`, with its serialized plan where cuDNN serialized it; a choice the cache
        made (`choice.cached`) keeps the cache's record and only adds the plan it lacked."""
        entry = self.entries.get(signature)
        if choice.cached and entry is not None:
            if plan is None or self.plan(signature) is not None:
                return
            entry = dict(entry)  # its plan file is missing or altered: replaced
        else:
            entry = {"index": choice.index, "name": choice.name, "tried": choice.tried, "offered": choice.offered,
                     "time_us": choice.time_us}
        if plan is not None:
            digest = self._write(plan, PLAN_SUFFIX, "serialized plan")
            if digest is None:
                entry.pop("plan", None)
            else:
                entry["plan"] = digest
        self.entries[signature] = entry
        self.changed.add(signature)
        self.dirty = True

    def save(self) -> None:
        """Writes the cache where it changed, merged under its lock with what other studies saved meanwhile: their
        entries are kept, this process's recorded ones win for their signatures; then plan files that no entry
        names and older than PRUNE_AFTER_S are removed. A cache that cannot be written or locked now stays dirty
        for a later save; nothing is raised."""
        if not self.dirty:
            return
        try:
            if not cache_folder(self.path.parent):
                return
            with file_lock(lock_path_of(self.path), f"{self.path} is being saved", SAVE_LOCK_WAIT_S):
                merged = {**self.entries, **self._stored(), **{s: self.entries[s] for s in self.changed}}
                body = {"version": CACHE_VERSION, "key": self.header,
                        "plans": {s: {**e, "digest": document_digest([s, e])} for s, e in merged.items()}}
                write_atomically(self.path, json.dumps(body, indent=1, sort_keys=True).encode(), "timing cache")
                self._prune({entry[k] for entry in merged.values() for k in ("plan", "artifact") if k in entry})
        except (OSError, InspectError):  # a cache that cannot be written costs the next run's time, not this build
            return
        self.entries, self.changed, self.dirty = merged, set(), False

    def _prune(self, named: set[str]) -> None:
        """Removes the plan and region files of `plans_dir` that no entry names, once older than PRUNE_AFTER_S (a
        younger one may be a file another study wrote and has not saved yet); a folder that is a link is left
        alone."""
        if not self.plans_dir.is_dir() or self.plans_dir.is_symlink():
            return
        cutoff = time.time() - PRUNE_AFTER_S
        for file in [*self.plans_dir.glob(f"*{PLAN_SUFFIX}"), *self.plans_dir.glob(f"*{REGION_SUFFIX}")]:
            with contextlib.suppress(OSError):  # removed meanwhile by another study's save
                if file.stem not in named and file.lstat().st_mtime < cutoff:
                    file.unlink()


def _checked(signature: str, raw: Any) -> dict[str, Any] | None:
    """The stored entry `raw` of `signature` without its digest, where the digest is that of the signature and the
    rest of the entry (`document_digest`: a flipped bit is a miss) and the entry reads (`timing_entry`); else None."""
    if not isinstance(raw, dict):
        return None
    entry = {k: v for k, v in raw.items() if k != "digest"}
    if raw.get("digest") != document_digest([signature, entry]):
        return None
    if signature.startswith(FUSED_PREFIX):
        return entry if fused_entry_reads(entry) else None
    if signature.startswith(QUANTIZE_PREFIX):
        return entry if quantize_entry_reads(entry) else None
    if signature.startswith(UNFORESEEN_PREFIX):
        return entry if set(entry) == {"why"} and entry["why"] in UNFORESEEN_REASONS else None
    if signature.startswith(COMPILED_PREFIX):
        return entry if set(entry) == {"artifact"} and isinstance(entry["artifact"], str) \
            and PLAN_NAME.fullmatch(entry["artifact"]) else None
    read = timing_entry(entry)
    return read if read is not None and libraries_read(read) else None


def libraries_read(entry: dict[str, Any]) -> bool:
    """Whether an entry's library fields mean what they should (both optional: an entry written before the engine
    timed other libraries has neither): `tactics` a mapping of the libraries that run no cuDNN graph of the engine's
    (cuBLASLt, PyTorch) to finite times >= 0; `library`, the winner, one of cuDNN's (GRAPH_LIBRARIES: its graph's
    plan, or a companion graph's (scaled, matmul), whose times are those graphs' own entries) or one of them;
    `tactics_timing`, how they were timed, a string (optional: entries before it say nothing)."""
    if not isinstance(entry.get("tactics_timing", ""), str):
        return False
    times = entry.get("tactics", {})
    if not (isinstance(times, dict) and all(name in LIBRARIES and name not in GRAPH_LIBRARIES and is_number(time_us)
                                            and time_us >= 0 for name, time_us in times.items())):
        return False
    return entry.get("library", CUDNN) in (*GRAPH_LIBRARIES, *times)


def fused_entry_reads(entry: dict[str, Any]) -> bool:
    """Whether a fused tactic's entry means what it should: exactly `fused_us` and `unfused_us`, finite times >= 0."""
    return set(entry) == {"fused_us", "unfused_us"} and all(is_number(entry[k]) and entry[k] >= 0 for k in entry)


def quantize_entry_reads(entry: dict[str, Any]) -> bool:
    """Whether a quantize layer's entry means what it should: `time_us`, a finite time > 0, and `timing`, how it was
    timed, a string (optional: entries before it say nothing, and are timed again)."""
    return (set(entry) in ({"time_us"}, {"time_us", "timing"}) and is_number(entry["time_us"])
            and entry["time_us"] > 0 and isinstance(entry.get("timing", ""), str))


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
    cached choice where the cache holds one whose plan still has that name at that index; the winner is built
    last, so it is the graph's selected plan. The caller records the choice in the cache (with its serialized plan).

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
    return Choice(best[1], graph.get_plan_name_at_index(best[1]), tried, offered, best[0], False, failures)


@dataclass
class CompiledPlans:
    """A graph's first plans as a worker process compiled them: cuDNN's name and serialized bytes by index, or why
    a plan did not build. Stands for the graph in `choose_plan`: `build_plan_at_index` loads the plan (`load`)."""

    names: list[str]  # every plan cuDNN offered
    plans: dict[int, bytes]  # index -> serialized plan
    refusals: dict[int, str]  # index -> why the plan did not build or serialize
    load: Callable[[int, bytes], Any]

    def get_execution_plan_count(self) -> int:
        return len(self.names)

    def get_plan_name_at_index(self, index: int) -> str:
        return self.names[index]

    def build_plan_at_index(self, index: int) -> Any:
        if index not in self.plans:
            raise RuntimeError(self.refusals.get(index, f"plan {index} was not compiled"))
        return self.load(index, self.plans[index])
