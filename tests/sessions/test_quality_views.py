"""Quality figures shown with what they mean: the relative error beside the absolute one, the
degenerate-reference warnings once, and "random weights" naming --checkpoint wherever quality is shown (the variant
table's notes, which `show`, `export` and the TUI overview print; `show --json`). Expected figures from the raw JSON."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import orjson

import tests.fake_backend
from inspector.cli import main
from inspector.study import run_study
from sessions.analyses import captions
from sessions.documents import storage
from sessions.reports import views
from sessions.reports.tables import format_value
from tests.inspector.test_study_fake import fake_plan

OLD = "tests/data/h200/senet154-h200.json"  # written before these fields: read with none of them


def study(tmp_path, monkeypatch=None, reference_scale: float = 1.0, **changes):
    if monkeypatch is not None:
        reference = tests.fake_backend.FakeBackend.reference
        monkeypatch.setattr(tests.fake_backend.FakeBackend, "reference",
                            lambda self, batch: reference(self, batch) * reference_scale)
    _, path = run_study(fake_plan(tmp_path, **changes), [], lambda p: None)
    return path


def column(table, label):
    index = table.labels.index(label)
    return {key: row[index] for key, row in zip(table.keys, table.rows, strict=False)}


def test_the_relative_error_stands_beside_the_absolute_one_with_the_sessions_figures(tmp_path, monkeypatch):
    path = study(tmp_path, monkeypatch, reference_scale=4.0)  # the fake's images reach 1: the reference 4
    raw = {v["name"]: v["quality"] for v in orjson.loads(path.read_bytes())["variants"]}
    table = views.session_variant_table(storage.load(path))
    assert table.labels.index(captions.RELATIVE_ERROR) == table.labels.index("max abs err") + 1
    assert column(table, captions.RELATIVE_ERROR) == {name: q["relative_error"] for name, q in raw.items()}
    fp8 = raw["fp8-all"]  # the fake fp8 engine negates the images: error 4 + 1 over the reference's 4
    assert fp8["relative_error"] == fp8["max_abs_logit_error"] / fp8["reference_scale"] == 5 / 4


def test_random_weights_are_named_with_checkpoint_wherever_quality_is_shown(tmp_path, capsys):
    path = study(tmp_path)
    weights = orjson.loads(path.read_bytes())["study"]["weights"]
    assert weights.startswith("random (")
    line = captions.weights_caveat(weights)
    assert line.startswith(f"random weights {weights.removeprefix('random ')}: ") and "--checkpoint" in line
    assert line in views.session_variant_table(storage.load(path)).notes  # show, export, the TUI overview
    capsys.readouterr()
    assert main(["show", str(path)]) == 0
    assert line in capsys.readouterr().out.splitlines()
    assert main(["show", str(path), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["weights"] == weights and line in shown["quality_caveats"]
    assert main(["export", str(path), "--format", "md", "-o", str(tmp_path / "s.md")]) == 0
    assert "--checkpoint" in (tmp_path / "s.md").read_text()


def test_trained_weights_get_no_random_weights_line(tmp_path):
    session = storage.load(study(tmp_path))
    trained = dataclasses.replace(session,
                                  study=dataclasses.replace(session.study, weights="/models/senet154.safetensors"))
    assert captions.weights_caveat(trained.study.weights) is None
    assert not any("random weights" in note for note in views.session_variant_table(trained).notes)


def test_a_degenerate_reference_is_warned_of_once_for_all_variants(tmp_path, monkeypatch):
    path = study(tmp_path, monkeypatch, reference_scale=1e12)  # the random-weight logits
    raw = orjson.loads(path.read_bytes())["variants"]
    warnings = [q["reference_warnings"] for q in (v["quality"] for v in raw)]
    assert len(raw) == 3 and warnings[0] == warnings[1] == warnings[2] and len(warnings[0]) == 1
    assert "past fp16's largest value 65504" in warnings[0][0]
    notes = views.session_variant_table(storage.load(path)).notes
    assert [n for n in notes if n.startswith("quality figures say little: ")] == [
        f"quality figures say little: {warnings[0][0]}"]


def test_an_older_session_reads_with_no_relative_error_and_no_warnings_but_random_weights_named():
    session = storage.load(OLD)
    assert all(v.quality.relative_error is None and v.quality.reference_warnings == [] for v in session.variants)
    table = views.session_variant_table(session)
    assert set(column(table, captions.RELATIVE_ERROR).values()) == {None}
    assert captions.weights_caveat("random (pretrained=False)") in table.notes


def test_large_and_tiny_errors_read_in_scientific_notation():
    assert format_value(5.8e10, "sci") == "5.80e+10"
    assert format_value(2.5e-5, "sci") == "2.50e-05" and format_value(0.058, "sci") == "0.0580"
    assert format_value(float(np.float32(99999.0)), "sci") == "99999.0000"


def test_a_live_study_reports_the_caveats_once_quality_is_measured(tmp_path, monkeypatch):
    seen = []
    reference = tests.fake_backend.FakeBackend.reference
    monkeypatch.setattr(tests.fake_backend.FakeBackend, "reference", lambda self, batch: reference(self, batch) * 1e12)
    _, path = run_study(fake_plan(tmp_path), [], seen.append)
    weights = orjson.loads(path.read_bytes())["study"]["weights"]
    assert seen[0].caveats == ()  # nothing measured yet: nothing to qualify
    last = seen[-1].caveats
    assert last[0] == captions.weights_caveat(weights)
    assert len(last) == 2 and last[1].startswith("quality figures say little: ") and "65504" in last[1]
