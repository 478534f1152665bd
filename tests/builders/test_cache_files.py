"""Issue 41's cache rows: the timing cache, its plan files and the FP8 calibration cache read back through one reader
(regular files, size-capped, one guard), every value checked for meaning; a damaged entry is a miss, rebuilt and
replaced. cuDNN is a stand-in (no GPU); the calibration cache is written by hand (no ModelOpt)."""

from __future__ import annotations

import base64
import copy
import hashlib
import json
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from builders.engine import kernels
from builders.engine.kernels import ConvGraph, build_graph
from builders.engine.plans import Choice, TimingCache, choose_plan
from builders.engine.twin import Twin, TwinCache, TwinFit, tensors_digest
from sessions.documents.model import Recipe

HEADER = {"gpu": "NVIDIA H200", "compute_capability": "90", "versions": "cudnn91900-fe1.32.0"}


def finishes(call: Callable[[], Any], unblock: Path | None = None, within_s: float = 10.0) -> Any:
    """`call()`'s result, failing the test where it does not return within `within_s` (a read blocked on a FIFO:
    `unblock`, the FIFO, is then opened for writing and closed, so the blocked reader sees its end)."""
    done: list[Any] = []
    worker = threading.Thread(target=lambda: done.append(call()), daemon=True)
    worker.start()
    worker.join(within_s)
    if worker.is_alive():
        if unblock is not None:
            os.close(os.open(unblock, os.O_WRONLY | os.O_NONBLOCK))
        pytest.fail(f"still reading after {within_s} s")
    assert done, "the call raised"
    return done[0]


def sealed(signature: str, entry: Any) -> Any:
    """`entry` with the digest a saved entry carries: SHA-256 of `[signature, entry]` as canonical JSON."""
    if not isinstance(entry, dict):
        return entry
    text = json.dumps([signature, entry], sort_keys=True, separators=(",", ":"))
    return {**entry, "digest": hashlib.sha256(text.encode()).hexdigest()}


def write_cache(path: Path, plans: dict[str, Any], header: dict[str, str] = HEADER) -> None:
    """A timing cache as a study saves it, each entry sealed with its digest (so that only its fields are wrong)."""
    path.write_text(json.dumps({"version": 3, "key": header,
                                "plans": {signature: sealed(signature, e) for signature, e in plans.items()}}))


def stored_plan(cache_path: Path, blob: bytes) -> str:
    """`blob` kept as a plan file beside the cache at `cache_path`, by its SHA-256; the name."""
    name = hashlib.sha256(blob).hexdigest()
    folder = cache_path.with_suffix(".plans")
    folder.mkdir(exist_ok=True)
    (folder / f"{name}.plan").write_bytes(blob)
    return name


class BoundsCheckedGraph:
    """A plan list that fails the test where it is asked about a plan it does not offer (cuDNN's frontend reads its
    list without a bounds check)."""

    def __init__(self, names: list[str]) -> None:
        self.names = names
        self.built: list[int] = []

    def _check(self, index: Any) -> int:
        assert type(index) is int and 0 <= index < len(self.names), f"plan {index!r} asked of {len(self.names)}"
        return index

    def get_execution_plan_count(self) -> int:
        return len(self.names)

    def get_plan_name_at_index(self, index: int) -> str:
        return self.names[self._check(index)]

    def build_plan_at_index(self, index: int) -> None:
        self.built.append(self._check(index))


# --- timing cache ---


class StandInCudnn:
    """What `kernels.load_plan` asks of cuDNN: a graph that deserializes any bytes."""

    def pygraph(self, handle: Any) -> Any:
        return self

    def deserialize(self, handle: Any, plan: bytes) -> None:
        self.loaded = plan


class Signature:
    def key(self) -> str:
        return "conv fp8 in=1x64x56x56"


def test_an_entry_that_does_not_read_is_a_miss_built_again_and_replaced_not_cudnns_refusal(tmp_path, monkeypatch):
    """Issue 41 H4: `"offered": "many"` beside an intact plan file."""
    path = tmp_path / "cache.json"
    name = stored_plan(path, b"first plan")
    write_cache(path, {Signature().key(): {"index": 0, "name": "p0", "tried": 1, "offered": "many", "time_us": 2.0,
                                           "plan": name}})
    built: list[str] = []

    def select_here(sig, cudnn, handle, limit, cache):
        built.append(sig.key())
        return ConvGraph(sig, cudnn, handle, "graph", Choice(1, "p1", 3, 3, 4.0, False, []), b"built again")

    monkeypatch.setattr(kernels, "select_in_process", select_here)
    cache = TimingCache(path, HEADER)
    graph, _, source = build_graph(Signature(), StandInCudnn(), None, 3, cache)  # type: ignore[arg-type]
    assert built == [Signature().key()] and graph.plan == b"built again" and source == "built"
    cache.save()
    entry = json.loads(path.read_text())["plans"][Signature().key()]
    assert (entry["index"], entry["offered"], entry["plan"]) == (1, 3, hashlib.sha256(b"built again").hexdigest())
    again, _, source = build_graph(Signature(), StandInCudnn(), None, 3, TimingCache(path, HEADER))  # type: ignore[arg-type]
    assert again.choice.cached and built == [Signature().key()] and source == "cached"  # repaired: loaded next time


@pytest.mark.parametrize("index", [-1, True, 3, 1.0, "1"])
def test_a_cached_index_is_used_only_where_it_is_an_integer_below_the_plans_offered(tmp_path, index):
    """Issue 41 M5 (-1 reached cuDNN's unchecked get_plan_name_at_index) and L9 (true was plan 1)."""
    path = tmp_path / "cache.json"
    write_cache(path, {"sig": {"index": index, "name": "p1", "tried": 3, "offered": 3, "time_us": 1.0}})
    graph = BoundsCheckedGraph(["p0", "p1", "p2"])
    choice = choose_plan(graph, "sig", 3, lambda i: graph.build_plan_at_index(i) or [5.0, 2.0, 9.0][i],
                         TimingCache(path, HEADER))
    assert (choice.index, choice.cached, choice.tried) == (1, False, 3)


@pytest.mark.parametrize("entry", [
    {"offered": 0}, {"offered": True}, {"tried": 0}, {"tried": 4}, {"name": ""}, {"name": 7}, {"name": "p\x1b[2A"},
    {"time_us": -1.0}, {"time_us": "fast"}, {"plan": "../elsewhere"}, {"plan": "A" * 64},
])
def test_an_entry_with_any_field_that_does_not_mean_what_it_should_is_a_miss(tmp_path, entry):
    path = tmp_path / "cache.json"
    write_cache(path, {"sig": {"index": 1, "name": "p1", "tried": 3, "offered": 3, "time_us": 1.0, **entry},
                       "kept": {"index": 0, "name": "p0", "tried": 1, "offered": 2, "time_us": None}})
    cache = TimingCache(path, HEADER)
    assert cache.get("sig") is None and cache.get("kept") == (0, "p0")


def test_a_timing_cache_nested_deep_and_a_plan_name_with_nul_are_misses(tmp_path):
    """Issue 41 M4: a RecursionError out of TimingCache(); `ValueError: embedded null byte` on every run."""
    path = tmp_path / "cache.json"
    path.write_text("[" * 200_000 + "]" * 200_000)
    assert TimingCache(path, HEADER).entries == {}
    write_cache(path, {"sig": {"index": 0, "name": "p0", "tried": 1, "offered": 1, "time_us": 1.0, "plan": "ab\x00c"}})
    cache = TimingCache(path, HEADER)
    assert not cache.holds_plan("sig") and cache.plan("sig") is None


def test_a_fifo_as_the_timing_cache_or_named_as_a_plan_is_never_opened(tmp_path):
    """Issue 41 H5: a FIFO as the cache file hung; plan names joined unchecked reached any path (`../`, absolute)."""
    path = tmp_path / "cache.json"
    os.mkfifo(path)
    assert finishes(lambda: TimingCache(path, HEADER).entries, unblock=path) == {}
    path.unlink()
    fifo = tmp_path / "elsewhere.plan"
    os.mkfifo(fifo)
    write_cache(path, {"up": {"index": 0, "name": "p0", "tried": 1, "offered": 1, "time_us": 1.0,
                              "plan": "../elsewhere"},
                       "abs": {"index": 0, "name": "p0", "tried": 1, "offered": 1, "time_us": 1.0,
                               "plan": str(tmp_path / "elsewhere")}})
    (tmp_path / "cache.plans").mkdir()
    cache = TimingCache(path, HEADER)
    assert finishes(lambda: (cache.plan("up"), cache.plan("abs")), unblock=fifo) == (None, None)


def test_a_plan_file_linked_to_dev_zero_is_not_read(tmp_path):
    """Issue 41 H5: /dev/zero was read until MemoryError (the hash checked after the whole read). Not run on the old
    code: it would fill the machine's memory."""
    path = tmp_path / "cache.json"
    name = hashlib.sha256(b"plan").hexdigest()
    (tmp_path / "cache.plans").mkdir()
    (tmp_path / "cache.plans" / f"{name}.plan").symlink_to("/dev/zero")
    write_cache(path, {"sig": {"index": 0, "name": "p0", "tried": 1, "offered": 1, "time_us": 1.0, "plan": name}})
    assert finishes(lambda: TimingCache(path, HEADER).plan("sig")) is None


def test_two_studies_saving_one_timing_cache_keep_both_choices_and_orphaned_plans_are_pruned(tmp_path):
    """Issue 41 L1: the last writer won; nothing pruned `*.plans/`."""
    path = tmp_path / "cache.json"
    first, second = TimingCache(path, HEADER), TimingCache(path, HEADER)
    first.put("one", Choice(0, "p0", 2, 2, 1.0, False, []), b"plan one")
    second.put("two", Choice(1, "q1", 2, 2, 3.0, False, []), b"plan two")
    orphan, young = stored_plan(path, b"nobody's, long ago"), stored_plan(path, b"another study's, not saved yet")
    day_ago = time.time() - 2 * 24 * 3600
    os.utime(path.with_suffix(".plans") / f"{orphan}.plan", (day_ago, day_ago))
    first.save()
    second.save()
    reread = TimingCache(path, HEADER)
    assert (reread.get("one"), reread.get("two")) == ((0, "p0"), (1, "q1"))
    assert reread.plan("one")[0] == b"plan one" and reread.plan("two")[0] == b"plan two"
    kept = {p.stem for p in path.with_suffix(".plans").iterdir()}
    assert kept == {hashlib.sha256(b).hexdigest() for b in (b"plan one", b"plan two")} | {young}


def test_a_plans_folder_that_is_a_link_is_never_written_through(tmp_path):
    """Issue 41 L8: the plans folder made a symbolic link elsewhere: plans were written into its target."""
    target = tmp_path / "elsewhere"
    target.mkdir()
    path = tmp_path / "cache.json"
    path.with_suffix(".plans").symlink_to(target)
    cache = TimingCache(path, HEADER)
    cache.put("sig", Choice(0, "p0", 1, 1, 1.0, False, []), b"plan")
    assert list(target.iterdir()) == [] and cache.get("sig") == (0, "p0") and not cache.holds_plan("sig")


# --- FP8 calibration cache ---


def small_model() -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3), torch.nn.ReLU(), torch.nn.Conv2d(16, 8, 1),
                               torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(8, 10)).eval()


MODEL = small_model()
FIT = TwinFit.of(MODEL, (10,))
IMAGES = torch.arange(3 * 3 * 8 * 8, dtype=torch.float32).reshape(3, 3, 8, 8) / 100
KEY = "k" * 64


class Simulated:
    """What `Twin.infer` asks of a made simulated module: the model in fp16 as `module`."""

    module = copy.deepcopy(MODEL).half()


def kept_twin() -> Twin:
    """A calibration-cache twin of MODEL, written by hand: per-channel, per-tensor and per-channel weight scales."""
    recipe = Recipe(method="max", number_format="fp8 e4m3", layout="all", exclude_patterns=[],
                    quantized=["0", "2", "5"], excluded=[], scales="amax / 448", calibration_source="",
                    calibration_count=3)
    scales = {"0": (0.01, torch.linspace(0.001, 0.1, 16)), "2": (0.02, torch.tensor([0.05])),
              "5": (0.03, torch.linspace(0.002, 0.2, 10))}
    with torch.no_grad():
        outputs = {tensors_digest([IMAGES]): MODEL(IMAGES).numpy()}
    return Twin(KEY, {"0", "2", "5"}, scales, recipe, lambda: Simulated(), outputs=outputs)  # type: ignore[arg-type]


def array(values: Any) -> dict[str, Any]:
    data = np.asarray(values, dtype="<f4")
    return {"dtype": "<f4", "shape": list(data.shape), "data": base64.b64encode(data.tobytes()).decode()}


def keep(folder: Path, change: Callable[[dict[str, Any]], Any] | None = None) -> TwinCache:
    """The hand-written twin kept in `folder`, its document changed by `change` first (in place) where given."""
    cache = TwinCache(folder)
    doc = kept_twin().document()
    if change is not None:
        change(doc)
    doc.pop("digest", None)
    text = json.dumps(doc, sort_keys=True, separators=(",", ":"))  # the digest a saved document carries
    doc["digest"] = hashlib.sha256(text.encode()).hexdigest()  # (written here: only the values are wrong)
    (folder / f"{KEY}.json").write_text(json.dumps(doc))  # json writes NaN and Infinity as a poisoned file has them
    return cache


def made() -> Simulated:
    pytest.fail("a miss was expected to be a miss, not to make the module")


def test_a_kept_twin_of_the_model_reads_back(tmp_path):
    loaded = keep(tmp_path).load(KEY, made, FIT)
    assert loaded is not None and loaded.cached and loaded.quantized == {"0", "2", "5"}
    assert loaded.scales["0"][0] == 0.01 and torch.equal(loaded.scales["0"][1], torch.linspace(0.001, 0.1, 16))
    with torch.no_grad():
        assert torch.equal(loaded.infer([IMAGES], "cpu"), MODEL(IMAGES))


def _set(path: tuple[Any, ...], value: Any) -> Callable[[dict[str, Any]], None]:
    def change(doc: dict[str, Any]) -> None:
        target = doc
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
    return change


OUTPUTS = tensors_digest([IMAGES])
POISONED = {
    "input scale 0": _set(("scales", "0", "input"), 0.0),
    "input scale NaN": _set(("scales", "0", "input"), float("nan")),
    "input scale Infinity": _set(("scales", "2", "input"), float("inf")),
    "input scale 1e-300": _set(("scales", "5", "input"), 1e-300),
    "input scale below the 2^-14 floor": _set(("scales", "5", "input"), 2.0**-15),
    "input scale a string": _set(("scales", "5", "input"), "0.5"),
    "weight scales all NaN": _set(("scales", "0", "weight"), array([float("nan")] * 16)),
    "weight scales all 0": _set(("scales", "0", "weight"), array([0.0] * 16)),
    "weight scales of the wrong count": _set(("scales", "0", "weight"), array([0.01] * 7)),
    "weight scales of two dimensions": _set(("scales", "0", "weight"), array([[0.01] * 16])),
    "weight scales in float64": _set(("scales", "2", "weight", "dtype"), "<f8"),
    "weight scales of a shape that does not hold the data": _set(("scales", "2", "weight", "shape"), [-1]),
    "outputs NaN": _set(("outputs", OUTPUTS), array(np.full((3, 10), np.nan))),
    "outputs of another class count": _set(("outputs", OUTPUTS), array(np.ones((3, 9)))),
    "a quantized layer without scales": lambda doc: doc["scales"].pop("2"),
    "scales for a layer not quantized": lambda doc: doc["quantized"].remove("2"),
    "a quantized layer the model lacks": lambda doc: (doc["quantized"].append("9"),
                                                     doc["recipe"]["quantized"].append("9"),
                                                     doc["scales"].update({"9": doc["scales"]["2"]})),
}


@pytest.mark.parametrize("poison", sorted(POISONED))
def test_a_poisoned_calibration_cache_is_a_miss(tmp_path, poison):
    """Issue 41 H3: poisoned scales and outputs loaded, and the engine divided by 0 or ran on them."""
    assert keep(tmp_path, POISONED[poison]).load(KEY, made, FIT) is None


def test_kept_outputs_with_a_row_count_other_than_the_images_are_computed_again(tmp_path):
    """Issue 41 H3: the real-vs-simulated agreement is never computed against outputs of other images."""
    calls: list[int] = []

    def make() -> Simulated:
        calls.append(1)
        return Simulated()

    cache = keep(tmp_path, _set(("outputs", OUTPUTS), array(np.ones((2, 10)))))
    loaded = cache.load(KEY, make, FIT)
    with torch.no_grad():
        assert torch.equal(loaded.infer([IMAGES], "cpu"), Simulated.module(IMAGES.half()).float()) and calls == [1]


@pytest.mark.parametrize("document", ["[1, 2]", '"x"', "deep", "scales a list"])
def test_a_calibration_cache_of_another_shape_is_a_miss_not_a_traceback(tmp_path, document):
    """Issue 41 M3: AttributeError and RecursionError escaped the loader."""
    path = tmp_path / f"{KEY}.json"
    if document == "deep":
        path.write_text("[" * 100_000 + "]" * 100_000)
    elif document == "scales a list":
        doc = kept_twin().document()
        path.write_text(json.dumps({**doc, "scales": [1]}))
    else:
        path.write_text(document)
    assert TwinCache(tmp_path).load(KEY, made, FIT) is None


def test_a_fifo_as_the_calibration_cache_is_a_miss(tmp_path):
    """Issue 41 H5."""
    os.mkfifo(tmp_path / f"{KEY}.json")
    assert finishes(lambda: TwinCache(tmp_path).load(KEY, made, FIT), unblock=tmp_path / f"{KEY}.json") is None


def test_a_calibration_cache_folder_that_is_a_link_is_never_written_through(tmp_path):
    """Issue 41 L8."""
    target = tmp_path / "elsewhere"
    target.mkdir()
    (tmp_path / "twins").symlink_to(target)
    TwinCache(tmp_path / "twins").save(kept_twin())
    assert list(target.iterdir()) == []
