"""Element-level fuzzing of the three caches trt-inspect reads back: the cuDNN engine's timing cache with
its plan files, the FP8 calibration cache, the seeded weights. Each mutant (one element of the kept file replaced
by a value of another type, an edge number, NaN or Infinity, or removed; a byte flipped; the file cut) must be a
miss or a load whose every value means what it should, checked here by code of its own; never a wrong value used.

Element mutants are written as found, or sealed again with a digest that matches (as a consistent poisoner would
write them), so that the checks of meaning are met and not only the digests. A seeded generator, so every CI run
draws the same MUTANTS of each; `TRT_INSPECT_CACHE_MUTANTS=20000 python -m pytest tests/test_fuzz_caches.py` is the
long run. The counts are printed (`-s`).
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
import math
import os
import random
import shutil
import tempfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from builders.engine.plans import TimingCache, choose_plan
from builders.engine.twin import TwinCache
from builders.models import seeded_weights
from builders.models.catalog import LoadedModel
from builders.models.seeded_weights import GENERATOR_STATE, SeededWeights
from tests.builders.test_cache_files import FIT, HEADER, IMAGES, KEY, BoundsCheckedGraph, Simulated, kept_twin, sealed
from tests.test_fuzz import EDGE_NUMBERS, WRONG, element_paths


@pytest.fixture
def folder(tmp_path: Path) -> Iterator[Path]:
    """A folder in memory where the machine has one (/dev/shm: the fsync of each cache write costs nothing), else
    the test's own; removed afterwards."""
    shm = Path("/dev/shm")
    if not (shm.is_dir() and os.access(shm, os.W_OK)):
        yield tmp_path
        return
    made = Path(tempfile.mkdtemp(prefix="trt-inspect-fuzz-", dir=shm))
    try:
        yield made
    finally:
        shutil.rmtree(made, ignore_errors=True)


MUTANTS = int(os.environ.get("TRT_INSPECT_CACHE_MUTANTS", "2000"))
VALUES = [*WRONG, *EDGE_NUMBERS, math.nan, math.inf, -math.inf, 1e-300, 2.0**-15, 2.0**-14, "0" * 64, "../x"]
REMOVED = object()  # the element is taken out of its object or list


def mutate_document(doc: Any, rng: random.Random) -> tuple[Any, str]:
    """A deep copy of `doc` with one element replaced by a drawn value or removed; and what was done."""
    doc = copy.deepcopy(doc)
    path = rng.choice(list(element_paths(doc)))
    target = doc
    for key in path[:-1]:
        target = target[key]
    value = REMOVED if rng.random() < 0.1 else rng.choice(VALUES)
    if value is REMOVED:
        del target[path[-1]]
    else:
        target[path[-1]] = copy.deepcopy(value)
    return doc, f"{'/'.join(map(str, path))} := {'removed' if value is REMOVED else repr(value)}"


def mutate_bytes(data: bytes, rng: random.Random) -> bytes:
    """`data` with one bit flipped, or cut short."""
    if rng.random() < 0.2:
        return data[:rng.randrange(len(data))]
    flipped = bytearray(data)
    flipped[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
    return bytes(flipped)


def report(name: str, counts: Counter[str]) -> None:
    print(f"\n{name}: {sum(counts.values())} mutants: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    assert sum(counts.values()) >= MUTANTS


# --- timing cache ---

PLANS = {signature: f"serialized plan of {signature}".encode() for signature in ("conv a", "conv b", "conv c")}
TIMING_SEED = {"version": 3, "key": HEADER, "plans": {
    "conv a": {"index": 2, "name": "eng4_k24=36", "tried": 3, "offered": 4, "time_us": 12.5,
               "plan": hashlib.sha256(PLANS["conv a"]).hexdigest()},
    "conv b": {"index": 0, "name": "eng0", "tried": 1, "offered": 1, "time_us": None,
               "plan": hashlib.sha256(PLANS["conv b"]).hexdigest()},
    "conv c": {"index": 1, "name": "eng7", "tried": 2, "offered": 2, "time_us": 0.75},
}}
NAMES = {"conv a": ["eng1", "eng2", "eng4_k24=36", "eng9"], "conv b": ["eng0"], "conv c": ["eng3", "eng7"]}


def sealed_timing(doc: Any) -> str:
    """`doc` as text, each entry of its plans (where they are an object) sealed with its digest."""
    if isinstance(doc, dict) and isinstance(doc.get("plans"), dict):
        doc = {**doc, "plans": {signature: sealed(signature, entry) for signature, entry in doc["plans"].items()}}
    return json.dumps(doc)


def sealed_twin(doc: Any) -> str:
    """`doc` as text, sealed with the digest of its other fields where it is an object."""
    if isinstance(doc, dict):
        rest = {k: v for k, v in doc.items() if k != "digest"}
        doc = {**rest, "digest": hashlib.sha256(json.dumps(rest, sort_keys=True, separators=(",", ":")).encode())
               .hexdigest()}
    return json.dumps(doc)


def meaningful_entry(entry: dict[str, Any]) -> bool:
    """What an entry the engine uses must be, written out here: integers (never bools) with 0 <= index < offered
    and 1 <= tried <= offered, a printable plan name, a finite non-negative time or none, a 64-hex plan file."""
    ints = [entry.get(k) for k in ("index", "tried", "offered")]
    if any(type(v) is not int for v in ints):
        return False
    index, tried, offered = ints
    name, time_us, plan = entry.get("name"), entry.get("time_us"), entry.get("plan", "0" * 64)
    return (0 <= index < offered and 1 <= tried <= offered and type(name) is str and name != "" and name.isprintable()
            and (time_us is None or (type(time_us) in (int, float) and math.isfinite(time_us) and time_us >= 0))
            and type(plan) is str and len(plan) == 64 and all(c in "0123456789abcdef" for c in plan))


def check_timing_cache(cache: TimingCache) -> str:
    """Fails where the cache answers a value that does not mean what it should; the mutant's outcome."""
    outcome = "miss"
    for signature, original in TIMING_SEED["plans"].items():
        entry = cache.entries.get(signature)
        if entry is None:
            continue
        assert meaningful_entry(entry), entry
        outcome = "load" if outcome != "changed" and entry == original else "changed"
        graph = BoundsCheckedGraph(NAMES[signature])  # fails on any plan it does not offer
        choice = choose_plan(graph, signature, 2, lambda i, g=graph: g.build_plan_at_index(i) or 1.0 + i, cache)
        assert choice.index < len(NAMES[signature]) and choice.name == NAMES[signature][choice.index]
        found = cache.plan(signature)
        if found is not None:
            assert found[0] in PLANS.values() and hashlib.sha256(found[0]).hexdigest() == entry["plan"]
    return outcome


def test_timing_cache_mutants_are_misses_or_meaningful_loads(folder):
    rng = random.Random(41)
    path = folder / "cache.json"
    plans = path.with_suffix(".plans")
    plans.mkdir()
    counts: Counter[str] = Counter()
    for blob in PLANS.values():
        (plans / f"{hashlib.sha256(blob).hexdigest()}.plan").write_bytes(blob)
    for n in range(MUTANTS):
        if n % 5 == 0:  # the plan file the last mutant altered, whole again
            for blob in PLANS.values():
                (plans / f"{hashlib.sha256(blob).hexdigest()}.plan").write_bytes(blob)
        if n % 5 == 4:  # a plan file's bytes
            victim = plans / f"{hashlib.sha256(PLANS[rng.choice(['conv a', 'conv b'])]).hexdigest()}.plan"
            victim.write_bytes(mutate_bytes(victim.read_bytes(), rng))
            path.write_text(sealed_timing(TIMING_SEED))
            kind = "plan file "
        elif n % 5 == 3:
            path.write_text(mutate_bytes(sealed_timing(TIMING_SEED).encode(), rng).decode(errors="replace"))
            kind = "bytes "
        else:
            doc, _ = mutate_document(TIMING_SEED if n % 5 else json.loads(sealed_timing(TIMING_SEED)), rng)
            path.write_text(sealed_timing(doc) if n % 5 else json.dumps(doc))
            kind = "element sealed " if n % 5 else "element "
        counts[kind + check_timing_cache(TimingCache(path, HEADER))] += 1
    report("timing cache", counts)


# --- FP8 calibration cache ---

KEPT_TWIN = kept_twin()  # made once: its outputs, computed again later, could take another summation order
TWIN_SEED = KEPT_TWIN.document()


def check_twin(folder: Path) -> str:
    """Fails where a loaded twin holds a value that does not mean what it should, or infers other outputs than
    the simulated module's; the mutant's outcome."""
    made: list[int] = []
    twin = TwinCache(folder).load(KEY, lambda: made.append(1) or Simulated(), FIT)  # type: ignore[func-returns-value]
    if twin is None:
        return "miss"
    assert twin.quantized and twin.quantized == set(twin.scales) and twin.quantized <= set(FIT.channels)
    for path, (x_scale, w_scale) in twin.scales.items():
        assert type(x_scale) is float and 2.0**-14 <= x_scale <= 2.0**60, (path, x_scale)
        assert w_scale.dtype == torch.float32 and w_scale.dim() == 1 and w_scale.numel() in (1, FIT.channels[path])
        assert bool(((w_scale >= 2.0**-14) & (w_scale <= 2.0**60)).all()), (path, w_scale)
    outputs = twin.infer([IMAGES], "cpu")
    stored = KEPT_TWIN.outputs[next(iter(TWIN_SEED["outputs"]))]
    with torch.no_grad():
        expected = torch.from_numpy(stored) if not made else Simulated.module(IMAGES.half()).float()
    assert torch.equal(outputs, expected)
    original = {p: (x, w.tolist()) for p, (x, w) in KEPT_TWIN.scales.items()}
    loaded = {p: (x, w.tolist()) for p, (x, w) in twin.scales.items()}
    return "load" if loaded == original and not made else "changed"


def test_calibration_cache_mutants_are_misses_or_meaningful_loads(folder):
    rng = random.Random(4141)
    path = folder / f"{KEY}.json"
    counts: Counter[str] = Counter()
    for n in range(MUTANTS):
        if n % 5 == 4:
            path.write_text(mutate_bytes(sealed_twin(TWIN_SEED).encode(), rng).decode(errors="replace"))
            kind = "bytes "
        else:
            doc, _ = mutate_document(TWIN_SEED if n % 5 else json.loads(sealed_twin(TWIN_SEED)), rng)
            path.write_text(sealed_twin(doc) if n % 5 else json.dumps(doc))
            kind = "element sealed " if n % 5 else "element "
        counts[kind + check_twin(folder)] += 1
    report("calibration cache", counts)


# --- seeded weights ---


class Small(torch.nn.Module):
    """A seeded model small enough to build thousands of times: parameters, a buffer, an int64 counter."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3)
        self.norm = torch.nn.BatchNorm2d(4)
        self.head = torch.nn.Linear(4, 3)


def build_small(name: str, construct: Any, checkpoint: Path | None) -> LoadedModel:
    with construct():
        module = Small()
    return LoadedModel(name=name, source="timm", module=module, input_size=(3, 8, 8))


def split_safetensors(data: bytes) -> tuple[dict[str, Any], bytes]:
    size = int.from_bytes(data[:8], "little")
    return json.loads(data[8:8 + size]), data[8 + size:]


def join_safetensors(header: dict[str, Any], body: bytes) -> bytes:
    text = json.dumps(header).encode()
    return len(text).to_bytes(8, "little") + text + body


def test_seeded_weights_mutants_are_misses_or_exact_loads(folder, monkeypatch):
    """Every mutant loads the model a fresh build gives, and torch's generator as it leaves it: kept or built."""
    monkeypatch.setattr(seeded_weights, "weights_key", functools.cache(seeded_weights.weights_key))  # not under test
    rng = random.Random(414141)
    torch.manual_seed(3)
    fresh = {k: v.clone() for k, v in Small().state_dict().items()}
    fresh_state = torch.get_rng_state()
    cache = SeededWeights(folder)
    cache.load("small", 3, build=build_small)
    cache.writer.join()  # type: ignore[union-attr]
    path = cache.path("small", 3)
    seed_bytes = path.read_bytes()
    header, body = split_safetensors(seed_bytes)
    counts: Counter[str] = Counter()
    for n in range(MUTANTS):
        if n % 3 == 0:
            path.write_bytes(mutate_bytes(seed_bytes, rng))
            kind = "bytes "
        else:
            mutated, _ = mutate_document(header, rng)
            metadata = mutated.get("__metadata__")  # safetensors holds strings there: a drawn value as its text
            if isinstance(metadata, dict):
                mutated["__metadata__"] = {str(k): v if isinstance(v, str) else json.dumps(v)
                                           for k, v in metadata.items()}
            path.write_bytes(join_safetensors(mutated, body))
            kind = "element "
        again = SeededWeights(folder)
        model = again.load("small", 3, build=build_small)
        assert torch.equal(torch.get_rng_state(), fresh_state)
        state = model.module.state_dict()
        assert state.keys() == fresh.keys() and all(torch.equal(state[k], fresh[k]) for k in fresh)
        if again.writer is not None:
            again.writer.join()
        counts[kind + ("miss" if again.writer is not None else "load")] += 1
    assert GENERATOR_STATE in split_safetensors(path.read_bytes())[0]
    report("seeded weights", counts)
