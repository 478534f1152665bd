"""The comparison model: one baseline rule, one speed-up, one noise judgement behind every view.

Expected figures are read from the raw session JSON with plain `json` and arithmetic, never through
the session classes or the views under test.
"""

from __future__ import annotations

import copy
import io
import json
import re
from contextlib import redirect_stdout
from pathlib import Path

import pytest

from sessions.analyses.comparison import baseline_for, compare, comparisons
from sessions.analyses.groups import load_rules
from sessions.analyses.verdict import verdicts
from sessions.documents import storage
from sessions.reports import views
from sessions.reports.export import export_markdown
from tests.conftest import ROOT

MERGED = ROOT / "tests/data/h200/sweep-2gpu-merged.json"
MAINJOB = ROOT / "tests/data/h200/senet154-mainjob-warm.json"


def raw(path: Path) -> dict:
    return json.loads(path.read_text())


def job_fp16_speedups(doc: dict) -> dict[str, float]:
    """Each variant's speed-up against the fp16 row of its own job, from the raw document."""
    fp16 = {v["job"]: v["latency"]["median_ms"] for v in doc["variants"] if v["precision"] == "fp16"}
    return {v["name"]: fp16[v["job"]] / v["latency"]["median_ms"] for v in doc["variants"]}


def test_merged_speedups_are_against_each_jobs_own_fp16_in_table_and_verdict():
    expected = job_fp16_speedups(raw(MERGED))
    session = storage.load(MERGED)
    table = views.session_variant_table(session)
    column = next(i for i, c in enumerate(table.columns) if c.kind == "speedup")
    assert {key: row[column] for key, row in zip(table.keys, table.rows, strict=False)} == pytest.approx(expected)
    found = verdicts(session, load_rules(None))
    assert len(found) == 4  # one FP8 row per job; no fp16 row is compared with another job's fp16
    for verdict in found:
        name = verdict.variant.removesuffix(" (simulated)")
        assert verdict.speedup == pytest.approx(expected[name])
        assert verdict.baseline.split("/")[0] == name.split("/")[0]  # the same job
        assert f"{max(verdict.speedup, 1 / verdict.speedup):.2f}x" in verdict.text or "within noise" in verdict.text


def test_merged_session_has_no_batch_sentinel_anywhere_it_is_shown():
    session = storage.load(MERGED)
    assert session.study.batch is None
    text = export_markdown(session, load_rules(None), sections=None)
    assert not re.search(r"\bbatch 0\b|Batch / input:\*\* 0\b", text)
    assert "batch per job (1, 32)" in text


def test_diff_pairs_a_merged_job_with_a_plain_session_per_image(tmp_path):
    from inspector.cli import main

    out = io.StringIO()
    with redirect_stdout(out):
        code = main(["diff", str(MERGED), str(MAINJOB), "--pair", "senet154 b32/fp16=fp16", "--format", "json"])
    assert code in (0, 1)
    doc = json.loads(out.getvalue())
    latency = next(c for c in doc["changes"] if c["what"] == "latency")
    merged_fp16 = next(v for v in raw(MERGED)["variants"] if v["name"] == "senet154 b32/fp16")
    plain_fp16 = next(v for v in raw(MAINJOB)["variants"] if v["name"] == "fp16")
    assert latency["a"] == pytest.approx(merged_fp16["latency"]["median_ms"] / 32)
    assert latency["b"] == pytest.approx(plain_fp16["latency"]["median_ms"] / raw(MAINJOB)["study"]["batch"])
    assert doc["per_image"] is True


def with_backend_rows(doc: dict) -> dict:
    """The main job's session with an engine's fp16 and FP8 rows beside PyTorch's (copies, renamed)."""
    doc = copy.deepcopy(doc)
    extra = []
    for source, name in (("fp16", "engine-fp16"), ("fp8-all", "engine-fp8-all")):
        variant = copy.deepcopy(next(v for v in doc["variants"] if v["name"] == source))
        variant["name"], variant["backend"] = name, "engine"
        extra.append(variant)
    doc["variants"] += extra
    return doc


def test_a_variant_is_compared_with_its_own_backends_fp16_and_that_fp16_with_the_reference(tmp_path):
    path = tmp_path / "s.json"
    path.write_text(json.dumps(with_backend_rows(raw(MAINJOB))))
    session = storage.load(path)
    base = {v.name: (baseline_for(session, v).name if baseline_for(session, v) else None) for v in session.variants}
    assert base["fp8-all"] == "fp16" and base["fp32"] == "fp16" and base["fp16"] == "fp16"
    assert base["engine-fp8-all"] == "engine-fp16"  # the same lowering, precision alone differs
    assert base["engine-fp16"] == "fp16"  # the engine's fp16 against the study's reference
    table = views.session_variant_table(session)
    assert "vs" in table.labels  # several baselines: each row names its own


def test_a_zero_or_missing_time_is_not_a_speed_and_breaks_nothing():
    """A file is refused a zero median (tests/sessions/test_session_figures.py); in memory the views still take one."""
    session = storage.load(MAINJOB)
    fp16 = session.variant("fp16")
    assert fp16 is not None and fp16.latency is not None
    fp16.latency.median_ms = 0.0
    assert all(c.speedup is None for c in comparisons(session) if not c.is_baseline)
    assert verdicts(session, load_rules(None)) == []
    views.session_variant_table(session)
    export_markdown(session, load_rules(None), sections=None)


def test_colour_and_verdict_follow_one_judgement():
    session = storage.load(MAINJOB)
    table = views.session_variant_table(session)
    tones = dict(zip(table.keys, table.tones, strict=False))
    for verdict in verdicts(session, load_rules(None)):
        name = verdict.variant.removesuffix(" (simulated)")
        expected = {"faster": "good", "slower": "bad"}.get(verdict.judgement or "", "")
        assert tones[name] == expected, (name, verdict.judgement, tones[name])
        assert compare(session, session.variant(name)).judgement == verdict.judgement


def test_a_job_the_merged_session_lacks_is_one_line(tmp_path):
    from inspector.cli import main

    doc = raw(MERGED)
    doc["variants"][1]["job"] = 99
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc))
    err = io.StringIO()
    from contextlib import redirect_stderr

    with redirect_stderr(err), redirect_stdout(io.StringIO()):
        code = main(["export", str(path), "--format", "matrix"])
    assert code == 2
    assert err.getvalue().count("\n") == 1 and "job 99" in err.getvalue()


def test_diff_warns_when_one_side_folded_batchnorm_into_its_convolutions(tmp_path):
    from inspector.cli import main

    doc = raw(MAINJOB)
    for variant in doc["variants"]:
        variant["batchnorm_folded"] = 157 if variant["name"] == "fp16" else 0
    path = tmp_path / "folded.json"
    path.write_text(json.dumps(doc))
    out = io.StringIO()
    with redirect_stdout(out):
        main(["diff", str(MAINJOB), str(path), "--format", "json"])
    warnings = json.loads(out.getvalue())["warnings"]
    assert any(w.startswith("fp16: BatchNorm") and "157 in B" in w for w in warnings)


@pytest.mark.parametrize("speedup", [1.23, 0.81, 1 / 1.0013, 1.0004, 0.99996, 1.0])
def test_a_speed_factor_never_reads_one_where_the_times_differ(speedup):
    from sessions.analyses.comparison import speed_factor

    words = speed_factor(speedup)
    number, direction = re.fullmatch(r"(\d+\.\d+)x (faster|slower)", words).groups()
    factor = speedup if speedup >= 1 else 1 / speedup
    assert direction == ("faster" if speedup >= 1 else "slower")
    assert abs(float(number) - factor) <= 0.5 * 10 ** -len(number.split(".")[1]) + 1e-12  # the factor, rounded
    assert (float(number) == 1) == (speedup == 1)
    assert len(number.split(".")[1]) == 2 or abs(factor - 1) < 0.005  # two decimals wherever two tell them apart


def test_variants_of_one_study_are_judged_on_their_own_bands_not_widened_for_another_process():
    """Within one study both rows come from one process: a 0.4 % difference outside both bands is called (a diff of
    two sessions would not call it: tests/sessions/test_diff_noise.py)."""
    from tests.sessions.latency_edits import moved

    session = storage.load(MAINJOB)
    base = session.variant("fp16")
    assert base is not None and base.latency is not None
    variant = copy.deepcopy(base)
    variant.name = "fp16-copy"
    moved(variant.latency, 1.004)
    session.variants.append(variant)
    # the premise: the bands do not meet (100 samples: the median's 95 % interval is order statistics 40 to 61)
    ordered_base, ordered_variant = sorted(base.latency.samples_ms), sorted(variant.latency.samples_ms)
    assert len(ordered_base) == 100
    assert max(ordered_base[60], *base.latency.round_medians_ms) < min(ordered_variant[39],
                                                                       *variant.latency.round_medians_ms)
    assert compare(session, variant).judgement == "slower"
