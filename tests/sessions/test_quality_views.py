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


def test_a_zero_initialised_head_is_warned_of_wherever_quality_is_shown(tmp_path, monkeypatch, capsys):
    """timm's Sequencer with random weights: a zero-initialised head makes every logit 0, so the study export read
    fp8 at 100 % top-1, KL 0, error 0 with no caveat. The stand-in reference is such a head: zeros for every class
    and every image. Each warning the session stores is printed by show, show --json, export md (whole and its
    quality section alone), export study (the quality section and the decision's quality bullet) and the verdict."""
    monkeypatch.setattr(tests.fake_backend.FakeBackend, "reference", lambda self, batch: np.zeros_like(batch))
    monkeypatch.setattr(tests.fake_backend.FakeEngine, "infer", lambda self, batch: np.zeros_like(batch))
    _, path = run_study(fake_plan(tmp_path), [], lambda p: None)
    raw = orjson.loads(path.read_bytes())["variants"]
    warnings = raw[-1]["quality"]["reference_warnings"]
    assert raw[-1]["quality"]["top1_agreement"] == 1.0 and raw[-1]["quality"]["mean_kl"] == 0.0  # reads lossless
    assert any("same for every class" in w for w in warnings) and any("does not depend" in w for w in warnings)
    lines = [f"quality figures say little: {w}" for w in warnings]
    capsys.readouterr()
    assert main(["show", str(path)]) == 0
    shown = capsys.readouterr().out
    assert main(["show", str(path), "--json"]) == 0
    caveats = json.loads(capsys.readouterr().out)["quality_caveats"]
    assert all(line in caveats for line in lines)
    outputs = {"show": shown}
    for name, options in {"md": ["--format", "md"], "md quality": ["--format", "md", "--sections", "quality"],
                          "study": ["--format", "study"]}.items():
        out = tmp_path / f"{name.replace(' ', '-')}.md"
        assert main(["export", str(path), *options, "-o", str(out)]) == 0
        outputs[name] = out.read_text()
    for name, text in outputs.items():
        assert all(line in text for line in lines), name
    study_text = outputs["study"]
    quality = study_text.split("### Quality")[1].split("###")[0]
    assert all(line in quality for line in lines)
    bullet = next(b for b in study_text.splitlines() if b.startswith("- FP8 top-1 agreement with fp32"))
    assert "quality figures say little" in bullet


def test_a_cpu_verdicts_numerics_carry_the_references_warnings(tmp_path, monkeypatch):
    """The verdict of a simulated variant on a CPU states its numerics (top-1 100 %, KL 0 on a zero head): each
    warning the session stores stands inside them, so the line read alone (export --format json) keeps its caveat."""
    from sessions.analyses.groups import load_rules
    from sessions.analyses.verdict import verdict_lines

    monkeypatch.setattr(tests.fake_backend.FakeBackend, "reference", lambda self, batch: np.zeros_like(batch))
    path = study(tmp_path)
    warnings = {v["name"]: v["quality"]["reference_warnings"] for v in orjson.loads(path.read_bytes())["variants"]}
    session = storage.load(path)
    session.variant("fp8-all").simulated = True  # as ModelOpt's fake quantization on a CPU
    line = next(v for v in verdict_lines(session, load_rules()) if v.startswith("fp8-all (simulated) ran on a CPU"))
    numerics = line.split("the numerics (")[1]
    assert warnings["fp8-all"] and all(f"quality figures say little: {w}" in numerics for w in warnings["fp8-all"])


def test_a_study_of_two_jobs_labels_a_warning_that_holds_for_one_of_them(tmp_path, monkeypatch):
    from sessions.reports.sections import jobs_quality_section

    healthy = storage.load(study(tmp_path / "healthy"))
    monkeypatch.setattr(tests.fake_backend.FakeBackend, "reference", lambda self, batch: np.zeros_like(batch))
    path = study(tmp_path / "zero")
    warnings = orjson.loads(path.read_bytes())["variants"][0]["quality"]["reference_warnings"]
    text = jobs_quality_section([("healthy job", healthy), ("zero job", storage.load(path))])
    assert warnings and all(f"zero job: quality figures say little: {w}" in text for w in warnings)
    assert "healthy job: quality figures say little" not in text
    assert text.count("random weights (") == 1  # both jobs' random weights: said once, unlabelled
