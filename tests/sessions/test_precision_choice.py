"""What the layers a recipe asked for in FP8 ran, by role: counted from a real H200 session's raw JSON and its own
notes, and on hand-made layers."""

from __future__ import annotations

import csv
import io
import json
import re
from collections import Counter

import pytest

from sessions.analyses.groups import load_rules, role_of
from sessions.analyses.precision_choice import precision_by_role
from sessions.documents import storage
from sessions.documents.model import Layer, Variant
from sessions.reports import views
from sessions.reports.layer_detail import layer_facts
from tests.conftest import ROOT, run_cli

ENGINE_SESSION = ROOT / "benchmarks/results/h200/scaled-fp16/main/senet154-warm.json"


@pytest.fixture(scope="module")
def session():
    return storage.load(ENGINE_SESSION)


def raw_outcomes(variant: dict) -> Counter[str]:
    """From the raw JSON: each layer asked for in FP8 (no quantize layer) by what it ran (`raw_choice`)."""
    return Counter(outcome for layer in variant["layers"] if (outcome := raw_choice(layer)[0]) is not None)


def test_counts_by_role_add_up_to_the_raw_layers_and_to_the_engines_own_notes(session):
    raw = json.loads(ENGINE_SESSION.read_text())
    rules = load_rules()
    for variant in raw["variants"]:
        rows = precision_by_role(session.variant(variant["name"]), rules)
        expected = raw_outcomes(variant)
        if not expected:
            assert rows == []
            continue
        summed = Counter()
        for row in rows:
            summed.update(row.ran)
            assert row.asked == sum(row.ran.values())
        assert +summed == expected
        notes = " ".join(variant["notes"])
        chosen = re.search(r"(\d+) of (\d+) layers the recipe quantizes run fp16: their fp16 tactic timed faster",
                           notes)
        assert chosen is not None and int(chosen.group(1)) == expected["fp16 by timing"]
        assert int(chosen.group(2)) == sum(expected.values())
        refused = re.search(r"(\d+) layers asked for in FP8 ran in fp16", notes)
        assert int(refused.group(1)) == expected["fp16 refused"]


def test_each_layer_counts_under_its_role_with_the_library_that_ran_it():
    rules = load_rules()
    grouped = Layer(name="b.conv2", kind="cuDNN conv graph (fp16)", op="conv", groups=64, kernel_shape=[3, 3],
                    in_channels=512, out_channels=1024, precision="fp16",
                    attrs={"asked": "fp8", "fallback": "FP8 asked; fp16 chosen by timing: best FP8 tactic ...",
                           "library": "cuDNN scaled"})
    refused = Layer(name="c.conv2", kind="cuDNN conv graph (fp16)", op="conv", groups=64, kernel_shape=[3, 3],
                    in_channels=512, out_channels=1024, precision="fp16",
                    attrs={"asked": "fp8", "fallback": "cuDNN: no engine", "library": "cuDNN"})
    pointwise = Layer(name="b.conv3", kind="cuBLASLt GEMM, 1x1 conv (fp8)", op="conv", groups=1,
                      kernel_shape=[1, 1], in_channels=1024, out_channels=256, precision="fp8", quantized=True,
                      attrs={"asked": "fp8", "library": "cuBLASLt"})
    untouched = Layer(name="b.conv1", kind="cuDNN conv graph (fp16)", op="conv", groups=1, kernel_shape=[1, 1],
                      precision="fp16", attrs={"asked": "fp16", "library": "cuDNN"})
    quantize = Layer(name="b.conv3.input_quantizer", kind="quantize", op="quantize", precision="fp8",
                     attrs={"asked": "fp8"})
    variant = Variant(name="engine-fp8", backend="cudnn", precision="fp8", device="cuda",
                      layers=[grouped, refused, pointwise, untouched, quantize])
    rows = {row.role: row for row in precision_by_role(variant, rules)}
    assert set(rows) == {role_of(grouped, rules), role_of(pointwise, rules)}
    assert role_of(grouped, rules) != role_of(pointwise, rules)
    by_grouped = rows[role_of(grouped, rules)]
    assert (by_grouped.asked, by_grouped.ran) == (2, {"fp8": 0, "fp16 by timing": 1, "fp16 refused": 1})
    assert by_grouped.libraries == {"cuDNN": 1, "cuDNN scaled": 1}
    assert rows[role_of(pointwise, rules)].ran == {"fp8": 1, "fp16 by timing": 0, "fp16 refused": 0}
    plain = Variant(name="fp16", backend="torch", precision="fp16", device="cuda", layers=[untouched])
    assert precision_by_role(plain, rules) == []


def test_groups_prints_and_exports_the_table(session):
    text = run_cli("groups", str(ENGINE_SESSION))
    assert text.returncode == 0, text.stderr
    table = views.precision_table(session, load_rules())
    assert f"{table.title}:" in text.stdout
    assert re.search(r"cudnn-fp8-all\s+grouped convolution\s+50\s+3\s+44\s+3\s+cuDNN 39, cuDNN scaled 11", text.stdout)
    as_json = run_cli("groups", str(ENGINE_SESSION), "--json")
    rows = json.loads(as_json.stdout)["precision"]
    assert {row["variant"] for row in rows} == {"cudnn-fp8-all", "cudnn-fp8-no-se"}
    exported = run_cli("export", str(ENGINE_SESSION), "--format", "md")
    assert exported.returncode == 0, exported.stderr
    assert "Layers asked for in FP8, by role" in exported.stdout


LIBRARY_SESSIONS = [ROOT / "benchmarks/results/h200/matmul-tactic/final/recipes/senet154-b32-kept.json",
                    ROOT / "benchmarks/results/h200/matmul-tactic/final/main/senet154-warm.json"]


def raw_libraries(variant: dict) -> str | None:
    """From the raw JSON: how many of the variant's layers record each library, as `library 12` in name order."""
    counts = Counter(layer["attrs"]["library"] for layer in variant["layers"] if "library" in (layer["attrs"] or {}))
    return ", ".join(f"{name} {counts[name]}" for name in sorted(counts)) or None


@pytest.mark.parametrize("path", LIBRARY_SESSIONS, ids=lambda p: p.parent.name + "/" + p.name)
def test_show_and_export_count_libraries_from_the_layers_the_session_holds(path):
    """The note engines stored counted layers before Inductor's regions replaced some, and only where several
    libraries were timed (senet154's cudnn-fp8-no-se: "cuDNN 3, cuDNN matmul 151" beside 53 and 54 layers): `show`
    and the Markdown export print the count of the layers held, the count `groups` gives by role, instead."""
    raw = json.loads(path.read_text())
    shown = run_cli("show", str(path)).stdout.splitlines()
    exported = run_cli("export", str(path), "--sections", "comparison").stdout
    session = storage.load(path)
    rules = load_rules()
    for variant in raw["variants"]:
        name, expected = variant["name"], raw_libraries(variant)
        lines = [line for line in shown if line.startswith(f"note ({name}): convolutions by the library")]
        assert lines == ([f"note ({name}): convolutions by the library whose tactic runs them: {expected}"]
                         if expected else [])
        assert (f"{name}: convolutions by the library whose tactic runs them: {expected}" in exported) == bool(expected)
        assert "timed fastest" not in "\n".join(shown) + exported
        by_role: Counter[str] = Counter()
        for row in precision_by_role(session.variant(name), rules):
            by_role.update(row.libraries)
        asked = Counter(layer["attrs"]["library"] for layer in variant["layers"]
                        if (layer["attrs"] or {}).get("asked") == "fp8" and "library" in layer["attrs"]
                        and layer["op"] not in ("quantize", "dequantize"))
        assert by_role == asked


LAYERS_SESSION = ROOT / "benchmarks/results/h200/matmul-tactic/final/main/senet154-warm.json"


def raw_choice(layer: dict) -> tuple[str | None, str | None]:
    """From the raw JSON: what became of a layer asked for in FP8 (no quantize layer), and the reason it recorded."""
    attrs = layer.get("attrs") or {}
    if attrs.get("asked") != "fp8" or layer.get("op") in ("quantize", "dequantize"):
        return None, attrs.get("fallback")
    if layer["precision"] == "fp8":
        return "fp8", attrs.get("fallback")
    timing = str(attrs.get("fallback", "")).startswith("FP8 asked; fp16 chosen by timing")
    return ("fp16 by timing" if timing else "fp16 refused"), attrs.get("fallback")


def test_the_layer_views_tell_fp16_by_timing_from_fp16_refused():
    """`show --layers`, its JSON and the CSV / JSON layer exports say what became of each layer asked for in FP8 and
    why, so the split `groups` prints (here 210 by timing, 3 refused in cudnn-fp8-all) can be rebuilt from them."""
    raw = json.loads(LAYERS_SESSION.read_text())
    csv_rows = list(csv.DictReader(io.StringIO(run_cli("export", str(LAYERS_SESSION), "--format", "csv", "--sections",
                                                       "layers").stdout)))
    exported = json.loads(run_cli("export", str(LAYERS_SESSION), "--format", "json", "--sections", "layers").stdout)
    shown = json.loads(run_cli("show", str(LAYERS_SESSION), "--layers", "--json").stdout)
    assert len(csv_rows) == sum(len(variant["layers"]) for variant in raw["variants"])
    rows = iter(csv_rows)
    for variant in raw["variants"]:
        records = exported["variants"][variant["name"]]
        assert records == shown["variants"][variant["name"]]
        for layer, record in zip(variant["layers"], records, strict=True):
            row = next(rows)
            choice, why = raw_choice(layer)
            assert (row["variant"], row["layer"], record["layer"]) == (variant["name"], layer["name"], layer["name"])
            assert (record["fp8 choice"], record["why"]) == (choice, why)
            assert (row["fp8 choice"], row["why"]) == (choice or "", why or "")
        counted = Counter(record["fp8 choice"] for record in records if record["fp8 choice"])
        assert counted == raw_outcomes(variant)
    fp8_all = Counter(record["fp8 choice"] for record in exported["variants"]["cudnn-fp8-all"])
    assert (fp8_all["fp16 by timing"], fp8_all["fp16 refused"]) == (210, 3)
    text = run_cli("show", str(LAYERS_SESSION), "--layers", "--variant", "cudnn-fp8-all").stdout.splitlines()
    by_timing = next(line for line in text if line.startswith("layer2.0.conv2 "))
    refused = next(line for line in text if line.startswith("layer1.0.conv2 "))
    assert "fp16 by timing" in by_timing and "6.6x slower" in by_timing
    assert "fp16 refused" in refused and "CUDNN_STATUS_NOT_SUPPORTED" in refused


def test_the_detail_pane_calls_a_choice_by_timing_a_choice():
    variant = storage.load(LAYERS_SESSION).variant("cudnn-fp8-all")
    layers = {layer.name: layer for layer in variant.layers}
    chosen = dict(layer_facts(variant, layers["layer2.0.conv2"]))["precision"]
    refused = dict(layer_facts(variant, layers["layer1.0.conv2"]))["precision"]
    assert chosen.startswith("fp16 (quantized by the recipe; the engine chose fp16 by timing: best FP8 tactic (cuDNN) "
                             "6.6x slower") and "fell back" not in chosen
    assert "the engine fell back to fp16: cuDNN: no engine" in refused
