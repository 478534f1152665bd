import os

import orjson
import pytest

from sessions.documents import storage
from sessions.documents.errors import InputError, InspectError
from sessions.documents.model import SCHEMA_VERSION
from tests.conftest import H200

REAL = H200 / "senet154-h200.json"


def test_real_session_round_trips(tmp_path):
    session = storage.load(REAL)
    assert [v.name for v in session.variants] == ["fp16", "fp8-all", "fp8-no-se"]
    out = storage.save(session, tmp_path / "copy.json")
    again = storage.load(out)
    assert again == session


def test_save_is_atomic_when_the_write_fails(tmp_path, monkeypatch):
    session = storage.load(REAL)
    target = tmp_path / "s.json"
    storage.save(session, target)
    before = target.read_bytes()

    def full_disk(*_args, **_kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", full_disk)
    session.variants.pop()
    with pytest.raises(InspectError, match="No space left"):
        storage.save(session, target)
    assert target.read_bytes() == before  # the old file is intact
    assert [p.name for p in tmp_path.iterdir()] == ["s.json"]  # no temporary left behind


@pytest.mark.parametrize(
    "content, message",
    [
        (b"", "is empty"),
        (b"   \n", "is empty"),
        (b'{"tool": "trt-inspect", "schema_version": 1, "study": {', "not valid JSON"),
        (b"\x89PNG\r\n\x1a\n\x00\x00", "not valid JSON"),
        (b"[1, 2, 3]", "not a trt-inspect session"),
        (b'{"tool": "trt-inspect"}', "no valid schema_version"),
        (b'{"tool": "trt-inspect", "schema_version": 99}', "newer than this trt-inspect reads"),
        (b'{"tool": "trt-inspect", "schema_version": 1}', "missing field 'study'"),
    ],
)
def test_bad_files_fail_with_one_line(tmp_path, content, message):
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    with pytest.raises(InputError, match=message) as info:
        storage.load(path)
    assert "\n" not in info.value.message


def test_truncated_real_session_is_refused(tmp_path):
    data = REAL.read_bytes()
    path = tmp_path / "cut.json"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(InputError, match="corrupt or truncated"):
        storage.load(path)


def test_wrong_field_type_names_its_path(tmp_path):
    doc = orjson.loads(REAL.read_bytes())
    doc["variants"][1]["latency"]["median_ms"] = "fast"
    path = tmp_path / "typed.json"
    path.write_bytes(orjson.dumps(doc))
    with pytest.raises(InputError, match=r"variants\[1\]\.latency\.median_ms: expected a number"):
        storage.load(path)


def test_kernel_columns_must_agree(tmp_path):
    doc = orjson.loads(REAL.read_bytes())
    doc["variants"][0]["kernels"]["duration_ns"].pop()
    path = tmp_path / "ragged.json"
    path.write_bytes(orjson.dumps(doc))
    with pytest.raises(InputError, match="kernels.duration_ns has"):
        storage.load(path)


def test_a_schema_1_session_loads_with_typed_layers_and_its_plan():
    assert orjson.loads(REAL.read_bytes())["schema_version"] == 1 < SCHEMA_VERSION  # committed before schema 2
    session = storage.load(REAL)
    fp16 = session.variant("fp16")
    conv = next(layer for layer in fp16.layers if layer.name == "layer1.0.conv2")
    assert (conv.op, conv.groups, conv.in_channels, conv.out_channels, conv.kernel_shape) == (
        "conv", 64, 128, 256, [3, 3])
    assert "op" not in conv.attrs and "in_channels" not in conv.attrs
    fp8 = session.variant("fp8-all")
    assert sum(layer.quantized for layer in fp8.layers) == len(fp8.recipe.quantized)
    plan = session.study.plan
    assert [v.name for v in plan.variants] == [v.name for v in session.variants]
    assert (plan.backend, plan.device, plan.tracer, plan.model) == ("torch", "cuda", "cupti", "senet154")
    assert (plan.timing.rounds, plan.timing.iters) == (session.method.rounds, session.method.iters)


def test_a_migrated_session_saves_as_the_current_schema_and_loads_back(tmp_path):
    session = storage.load(REAL)
    storage.save(session, tmp_path / "v2.json")
    assert orjson.loads((tmp_path / "v2.json").read_bytes())["schema_version"] == SCHEMA_VERSION
    assert storage.load(tmp_path / "v2.json") == session


@pytest.mark.parametrize(("where", "value", "message"), [
    (("variants", 0, "kernels", "duration_ns", 3), "x", r"duration_ns\[3\]: expected an integer"),
    (("variants", 0, "kernels", "grid", 2), [1, "a", 1], r"grid\[2\]: expected a list of integers"),
    (("variants", 0, "precision"), "fp9", r"'fp9' is not one of"),
    (("variants", 0, "latency", "samples_ms", 0), True, r"samples_ms\[0\]: expected a number"),
])
def test_a_wrong_element_type_fails_on_load_with_its_path(tmp_path, where, value, message):
    doc = orjson.loads(REAL.read_bytes())
    target = doc
    for key in where[:-1]:
        target = target[key]
    target[where[-1]] = value
    path = tmp_path / "bad.json"
    path.write_bytes(orjson.dumps(doc))
    with pytest.raises(InputError, match=message):
        storage.load(path)


def test_listing_skips_bad_files(isolated_home):
    folder = storage.sessions_dir()
    folder.mkdir(parents=True)
    (folder / "good.json").write_bytes(REAL.read_bytes())
    (folder / "bad.json").write_bytes(b"{")
    entries, problems = storage.list_sessions()
    assert [e.model for e in entries] == ["senet154"]
    assert entries[0].gpu == "NVIDIA H200"
    assert len(problems) == 1 and "bad.json" in problems[0]


def test_a_session_whose_variants_share_a_name_is_refused_on_load_and_on_save(tmp_path, capsys):
    """An edited session with one variant renamed to another's: one line naming the name, exit 2, in every view."""
    from inspector import cli

    doc = orjson.loads(REAL.read_bytes())
    doc["variants"][2]["name"] = "fp8-all"  # fp16, fp8-all, fp8-no-se -> fp16, fp8-all, fp8-all
    edited = tmp_path / "edited.json"
    edited.write_bytes(orjson.dumps(doc))
    line = (f"{edited} is not a valid session: two variants are named 'fp8-all'; each variant needs a name of its "
            "own")
    with pytest.raises(InputError) as raised:
        storage.load(edited)
    assert raised.value.message == line
    for command in (["show", str(edited)], ["groups", str(edited)]):
        assert cli.main(command) == 2
        assert capsys.readouterr().err.strip().splitlines() == [f"trt-inspect: error: {line}"]
    session = storage.load(REAL)
    session.variants[0].name = "fp8-no-se"
    with pytest.raises(InspectError, match=r"cannot save .*: the session is not a valid session: two variants are "
                                           r"named 'fp8-no-se'"):
        storage.save(session, tmp_path / "dup.json")
    assert not (tmp_path / "dup.json").exists()
