"""A session file whose figures contradict each other or their meaning is refused on load, in one line naming the
variant and the field, and a session in memory that holds one is refused on save: a kernel pointing at no layer, a
negative kernel duration, a median outside its own samples, a share above 1, a batch of none, a negative size.

Each case edits the real H200 session's JSON with plain dict operations; the limits come from what the figures are
(a share, a duration, an index into the variant's layers), not from the code under test.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import orjson
import pytest

from inspector import cli
from sessions.documents import storage
from sessions.documents.errors import InputError, InspectError
from tests.conftest import H200

REAL = H200 / "senet154-h200.json"
DOC = orjson.loads(REAL.read_bytes())
Edit = Callable[[dict[str, Any]], None]


def _variant(doc: dict[str, Any], index: int = 1) -> dict[str, Any]:
    return doc["variants"][index]


def _set_kernel(column: str, value: Callable[[dict[str, Any]], int]) -> Edit:
    def edit(doc: dict[str, Any]) -> None:
        variant = _variant(doc)
        variant["kernels"][column][3] = value(variant)
    return edit


def _set_latency(field: str, value: Callable[[dict[str, Any]], Any]) -> Edit:
    def edit(doc: dict[str, Any]) -> None:
        latency = _variant(doc)["latency"]
        latency[field] = value(latency)
    return edit


def _zero_latency(doc: dict[str, Any]) -> None:
    """The least and the median 0 ms: each a duration alone, in order together; no inference takes no time."""
    _variant(doc)["latency"].update(min_ms=0.0, median_ms=0.0)
    _variant(doc)["latency"]["samples_ms"][0] = 0.0


def _set(path: tuple[str, ...], value: Any) -> Edit:
    def edit(doc: dict[str, Any]) -> None:
        target = _variant(doc) if path[0] != "study" else doc
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
    return edit


REFUSED = {
    "a kernel in a layer past the last": (_set_kernel("layer", lambda v: len(v["layers"])), "kernels.layer"),
    "a kernel in layer -2": (_set_kernel("layer", lambda v: -2), "kernels.layer"),
    "a negative kernel duration": (_set_kernel("duration_ns", lambda v: -5000), "kernels.duration_ns"),
    "a kernel in call -2": (_set_kernel("call", lambda v: -2), "kernels.call"),
    "a median above the greatest sample": (_set_latency("median_ms", lambda lat: 2 * lat["max_ms"]), "median_ms"),
    "a p99 below the least": (_set_latency("p99_ms", lambda lat: lat["min_ms"] / 2), "p99_ms"),
    "a sample above the greatest": (_set_latency("samples_ms", lambda lat: [*lat["samples_ms"], 3 * lat["max_ms"]]),
                                    "samples_ms"),
    "a median of zero": (_zero_latency, "median_ms"),
    "a sample of no inference": (_set_latency("inferences_per_sample", lambda lat: 0), "inferences_per_sample"),
    "an agreement of 170 %": (_set(("quality", "top1_agreement"), 1.7), "top1_agreement"),
    "a negative error": (_set(("quality", "max_abs_logit_error"), -1.0), "max_abs_logit_error"),
    "more failing stress inputs than run": (_set(("quality", "stress_nonfinite"), 10**6), "stress_nonfinite"),
    "a negative engine size": (_set(("artifact_bytes",), -5), "artifact_bytes"),
    "a batch of none": (_set(("study", "batch"), 0), "study.batch"),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_a_file_whose_figures_lie_is_refused_in_one_line_naming_the_field(case, tmp_path, capsys):
    edit, field = REFUSED[case]
    doc = copy.deepcopy(DOC)
    edit(doc)
    path = tmp_path / "edited.json"
    path.write_bytes(orjson.dumps(doc))
    with pytest.raises(InputError) as raised:
        storage.load(path)
    line = raised.value.message
    assert line.startswith(f"{path} is not a valid session: ") and field in line and "\n" not in line
    if not field.startswith("study"):
        assert repr(_variant(doc)["name"]) in line
    assert cli.main(["show", str(path)]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [f"trt-inspect: error: {line}"]


ACCEPTED = {
    "a kernel in the last layer": _set_kernel("layer", lambda v: len(v["layers"]) - 1),
    "a kernel outside every layer": _set_kernel("layer", lambda v: -1),
    "a kernel outside every traced call": _set_kernel("call", lambda v: -1),
    "a median equal to the greatest sample": _set_latency("median_ms", lambda lat: lat["max_ms"]),
    "a mean a rounding above the greatest": _set_latency("mean_ms", lambda lat: lat["max_ms"] * (1 + 1e-12)),
    "an agreement of 100 %": _set(("quality", "top1_agreement"), 1.0),
    "no engine size": _set(("artifact_bytes",), None),
}


@pytest.mark.parametrize("case", sorted(ACCEPTED))
def test_figures_at_their_limits_load(case, tmp_path):
    doc = copy.deepcopy(DOC)
    ACCEPTED[case](doc)
    path = tmp_path / "edited.json"
    path.write_bytes(orjson.dumps(doc))
    assert storage.load(path).variants[1].name == _variant(doc)["name"]


def test_a_session_in_memory_whose_kernel_points_at_no_layer_is_not_saved(tmp_path):
    """The save reads its bytes back before replacing the file, the layers a slice at a time: the count of each
    variant's layers still bounds its kernels' layer indices."""
    session = storage.load(REAL)
    variant = session.variants[2]
    assert variant.kernels is not None
    variant.kernels.layer[0] = len(variant.layers)
    target = tmp_path / "out.json"
    with pytest.raises(InspectError, match=rf"variant {variant.name!r}: kernels.layer points outside"):
        storage.save(session, target)
    assert not target.exists()
    with pytest.raises(InputError, match="kernels.layer points outside"):
        storage.check_loads(storage.encode(session), "bytes")
