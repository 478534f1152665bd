"""The save's read-back check without a second build: `codec.builds_all` says True only where
`codec.build` builds, and `storage.check_loads` raises exactly what `storage.decode` raises, message for message,
on real sessions and on 3,000 sessions with one element replaced by a wrong-typed, out-of-range or missing value."""

from __future__ import annotations

import math
import random
from typing import Any

import orjson
import pytest

from sessions.documents import storage
from sessions.documents.codec import ShapeError, _all_durations, _duration, build, builds_all
from sessions.documents.errors import InputError, InspectError
from sessions.documents.migrations import migrate
from sessions.documents.model import SCHEMA_VERSION, Layer, Session
from tests.conftest import ROOT
from tests.test_fuzz import SESSION_SEEDS, element_paths

# what a mutant puts in place of one element: other JSON types, numbers no duration may be, words no vocabulary has
REPLACEMENTS: list[Any] = [None, True, False, 0, -1, 7, 2**63 - 1, 1.5, -0.5, 5e-324, 1e300, 1e13, "", "x", "fp9",
                           [], [1], [1.5], ["a", 2], [None], {}, {"a": 1}, {"name": "x"}]
MISSING = object()  # the element removed


def current(doc: dict[str, Any]) -> dict[str, Any]:
    """`doc` as this schema reads it (what `storage.decode` builds from)."""
    version = doc["schema_version"]
    return migrate(orjson.loads(orjson.dumps(doc)), version) if version < SCHEMA_VERSION else doc


SEEDS = {name: current(doc) for name, doc in SESSION_SEEDS.items()}


def mutant(rng: random.Random, doc: dict[str, Any]) -> dict[str, Any]:
    """A copy of `doc` with one element (a field of any object, an item of any list) replaced or removed."""
    copy = orjson.loads(orjson.dumps(doc))
    path = rng.choice(list(element_paths(copy)))
    target = copy
    for key in path[:-1]:
        target = target[key]
    value = rng.choice([*REPLACEMENTS, MISSING])
    if value is MISSING:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return copy


def outcome(check: Any, data: bytes) -> str:
    try:
        check(data, "s.json")
    except InputError as exc:
        return exc.message
    return "loads"


def test_builds_all_is_true_only_where_build_builds():
    rng = random.Random(41)
    counts = {"shown": 0, "refused": 0, "built, not shown": 0}
    for _ in range(3000):
        doc = mutant(rng, SEEDS[rng.choice(sorted(SEEDS))])
        shown = builds_all(Session, [doc])
        try:
            build(Session, doc)
        except (ShapeError, ValueError):
            assert not shown, doc  # the columns passed what build refuses
            counts["refused"] += 1
            continue
        counts["shown" if shown else "built, not shown"] += 1
    # both ways, many times; and every mutant that builds is shown by its columns (none is left to the build)
    assert counts["shown"] > 300 and counts["refused"] > 1000 and counts["built, not shown"] == 0, counts


def test_the_save_check_raises_what_the_load_raises():
    rng = random.Random(7)
    outcomes = set()
    for _ in range(3000):
        data = orjson.dumps(mutant(rng, SEEDS[rng.choice(sorted(SEEDS))]))
        expected = outcome(storage.decode, data)
        assert outcome(storage.check_loads, data) == expected
        outcomes.add(expected == "loads")
    assert outcomes == {True, False}


def committed_sessions() -> list[Any]:
    found = []
    for path in sorted((ROOT / "benchmarks" / "results").rglob("*.json")):
        doc = orjson.loads(path.read_bytes())
        if isinstance(doc, dict) and "study" in doc and "variants" in doc:
            found.append(pytest.param(path, id=str(path.relative_to(ROOT / "benchmarks" / "results"))))
    return found


@pytest.mark.parametrize("path", committed_sessions())
def test_every_committed_session_is_shown_by_its_columns(path):
    """The fast path is the one taken: every committed session's layers pass by columns, and the whole session."""
    doc = current(orjson.loads(path.read_bytes()))
    assert builds_all(Layer, [layer for variant in doc["variants"] for layer in variant["layers"]])
    assert builds_all(Session, [doc])


def test_a_layer_that_would_not_load_is_not_saved(tmp_path):
    session = storage.decode(orjson.dumps(SEEDS["schema 2"]), "seed")
    target = tmp_path / "s.json"
    storage.save(session, target)
    before = target.read_bytes()
    session.variants[1].layers[2].kind = 5  # type: ignore[assignment]  # a wrong type, as a bug would put there
    with pytest.raises(InspectError, match=r"cannot save .*variants\[1\]\.layers\[2\]\.kind: expected a string"):
        storage.save(session, target)
    session.variants[1].layers[2].kind = "Conv2d"
    session.variants[1].layers[3].time_ms = -1.0
    with pytest.raises(InspectError, match=r"layers\[3\]\.time_ms: -1\.0 ms is not a duration"):
        storage.save(session, target)
    assert target.read_bytes() == before


DURATION_POOL = [0, 0.0, 1e-6, 2.5, 7, 1e12, -0.0, -1e-9, -3, 5e-324, 1e-7, 1e12 + 1, 1e300, math.inf, -math.inf,
                 math.nan]


@pytest.mark.parametrize("spread", [False, True])
def test_durations_are_passed_by_their_column_only_where_each_passes(spread):
    """The column's shortcut (`_all_durations`: a sum, a least and a greatest) says True only where `_duration`
    accepts every number one by one, and True for every column of good durations."""
    rng = random.Random(5)
    for _ in range(4000):
        numbers = rng.sample(DURATION_POOL * 3, rng.randint(0, 6))
        try:
            for number in numbers:
                _duration(float(number), spread)
            each_passes = True
        except ShapeError:
            each_passes = False
        assert _all_durations(numbers, spread) == each_passes, numbers
