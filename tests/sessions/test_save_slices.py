"""The save's bytes made and read back a slice of layers at a time: `storage.encode_in_slices` gives `storage.encode`'s
bytes, byte for byte, and `storage.check_encoded` raises exactly what `storage.check_loads` raises on them, message
for message, on real sessions, on 2,000 sessions with one value replaced by a wrong-typed or out-of-range one, and on
a large session with one bad layer deep in a late slice."""

from __future__ import annotations

import dataclasses
import math
import random
from collections.abc import Iterator
from typing import Any

import orjson
import pytest

from sessions.documents import storage
from sessions.documents.errors import InspectError
from sessions.documents.model import SCHEMA_VERSION, Layer, Session, Tensor
from tests.sessions.test_save_check import REPLACEMENTS, SEEDS, outcome

SMALL_SLICE = 4  # the seeds' variants hold 6 layers: two slices each, the second one short


def seed_session(name: str) -> Session:
    return storage.decode(orjson.dumps(SEEDS[name]), "seed")


def places(value: Any) -> Iterator[tuple[Any, Any]]:
    """Every (container, key) of a session's objects: each field of a dataclass, each item of a list or a dict."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        for field in dataclasses.fields(value):
            yield value, field.name
            yield from places(getattr(value, field.name))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield value, index
            yield from places(item)
    elif isinstance(value, dict):
        for key, item in value.items():
            yield value, key
            yield from places(item)


def put(container: Any, key: Any, value: Any) -> None:
    if isinstance(container, (list, dict)):
        container[key] = value
    else:
        object.__setattr__(container, key, value)  # frozen ones too


def mutant(rng: random.Random) -> Session:
    """A seed session with one value of any of its objects (layers most often) replaced, as a bug would put it."""
    session = seed_session(rng.choice(sorted(SEEDS)))
    found = list(places(session))
    in_layers = [place for place in found if isinstance(place[0], (Layer, Tensor))]
    container, key = rng.choice(in_layers if rng.random() < 0.6 else found)
    put(container, key, rng.choice([*REPLACEMENTS, math.nan, math.inf, -math.inf]))
    return session


def check_outcome(session: Session) -> str:
    return outcome(storage.check_encoded, storage.encode_in_slices(session))


def many_layers(count: int, tag: str) -> list[Layer]:
    return [Layer(name=f"{tag} layer {i}", kind="CaskConvolution", op="conv", time_ms=0.01 * (i % 7), precision="fp16",
                  kernel_shape=[3, 3], inputs=[Tensor(f"{tag} t{i}", "fp16", [1, 8, 4, 4], "Half")],
                  outputs=[Tensor(f"{tag} t{i + 1}", "fp16", [1, 8, 4, 4], "Half")], attrs={"stream": 0})
            for i in range(count)]


def large_session() -> Session:
    """A seed session whose variants hold no layers, one slice exactly, and several slices with a short last one."""
    session = seed_session("schema 2")
    counts = [0, storage.LAYER_SLICE, 5 * storage.LAYER_SLICE + 17]
    for variant, count in zip(session.variants, counts, strict=True):
        variant.layers = many_layers(count, variant.name)
        if variant.kernels is not None and not count:  # its kernels ran outside every layer: it has none
            variant.kernels.layer = [-1] * len(variant.kernels.layer)
    return session


def test_the_sliced_bytes_are_the_encoded_bytes(monkeypatch):
    sessions = [large_session()]
    monkeypatch.setattr(storage, "LAYER_SLICE", SMALL_SLICE)
    sessions += [seed_session(name) for name in sorted(SEEDS)]
    for session in sessions:
        encoded = storage.encode_in_slices(session)
        assert encoded.data == storage.encode(session)
        layers = [layer for variant in session.variants for layer in variant.layers]
        assert [item for piece in encoded.slices for item in orjson.loads(piece)] == orjson.loads(orjson.dumps(layers))
        emptied = dataclasses.replace(session, variants=[dataclasses.replace(variant, layers=[])
                                                         for variant in session.variants])
        assert encoded.rest == storage.encode(emptied)


def test_the_sliced_check_raises_what_the_whole_check_raises(monkeypatch):
    monkeypatch.setattr(storage, "LAYER_SLICE", SMALL_SLICE)
    rng = random.Random(11)
    outcomes = set()
    for _ in range(2000):
        session = mutant(rng)
        expected = outcome(storage.check_loads, storage.encode(session))
        assert check_outcome(session) == expected
        assert storage.encode_in_slices(session).data == storage.encode(session)
        outcomes.add(expected == "loads")
    assert outcomes == {True, False}


def test_a_bad_layer_deep_in_a_late_slice_is_not_saved(tmp_path):
    session = large_session()
    target = tmp_path / "s.json"
    storage.save(session, target)
    before = target.read_bytes()
    session.variants[2].layers[4 * storage.LAYER_SLICE + 9].outputs[0].shape = [1, 8.5]  # type: ignore[list-item]
    whole = outcome(storage.check_loads, storage.encode(session))
    assert whole.endswith(f"variants[2].layers[{4 * storage.LAYER_SLICE + 9}].outputs[0].shape[1]: "
                          "expected an integer")
    with pytest.raises(InspectError) as refused:
        storage.save(session, target)
    assert refused.value.message == f"cannot save {target}: {whole.replace('s.json', 'the session', 1)}"
    assert target.read_bytes() == before


def test_a_session_whose_layers_are_not_a_list_is_refused_as_before():
    session = seed_session("schema 2")
    session.variants[1].layers = None  # type: ignore[assignment]
    expected = outcome(storage.check_loads, storage.encode(session))
    assert expected != "loads"
    assert check_outcome(session) == expected


@pytest.mark.parametrize(("field", "value"), [("tool", "other"), ("schema_version", SCHEMA_VERSION + 1),
                                              ("schema_version", 0), ("schema_version", 1), ("schema_version", True),
                                              ("schema_version", 2.0), ("schema_version", str(SCHEMA_VERSION))])
def test_a_session_of_another_tool_or_schema_is_refused_as_before(monkeypatch, field, value):
    """The rest is taken as it is only where the load would take it so: another tool's, or a schema the load refuses
    or migrates (an older one migrates the layers too), goes to the whole check."""
    monkeypatch.setattr(storage, "LAYER_SLICE", SMALL_SLICE)
    session = seed_session("schema 2")
    setattr(session, field, value)
    assert check_outcome(session) == outcome(storage.check_loads, storage.encode(session))
