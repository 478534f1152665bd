"""The report sections are written once (sessions/reports/sections.py): `export --format md` and `--format study`
show a variant's figures in the same cells, and every "(simulated)" tag comes from `captions.variant_label`."""

from __future__ import annotations

import ast

from sessions.analyses.captions import variant_label
from sessions.analyses.groups import load_rules
from sessions.documents import storage
from sessions.reports.export import export_markdown
from sessions.reports.study_export import study_markdown
from tests.conftest import H200, ROOT

SESSION = H200 / "senet154-h200.json"  # simulated FP8 variants with quality figures
TAG = variant_label("", True).strip()  # "(simulated)"


def table_rows(text: str, heading: str) -> list[list[str]]:
    """The body rows of the first table under `heading`, as lists of cells."""
    section = text.split(heading + "\n", 1)[1].split("\n#", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("|")]
    return [[cell.strip() for cell in row.strip("|").split("|")] for row in rows[2:]]


def test_the_quality_figures_read_the_same_in_both_reports():
    session = storage.load(SESSION)
    one = {row[0]: row[1:] for row in table_rows(export_markdown(session, load_rules(), ["quality"]), "## Quality")}
    study = table_rows(study_markdown([(str(SESSION), session)], load_rules()), "### Quality")
    assert len(study) == len(one) > 2
    for _, name, *figures in study:
        variant = session.variant(name.removesuffix(f" {TAG}"))
        assert name == variant_label(variant.name, variant.simulated)
        assert figures == one[variant.name]


def test_no_report_or_view_tags_a_simulated_variant_by_hand():
    """A string holding the tag (not a docstring) anywhere in sessions/ or inspector/ but captions.py."""
    found = []
    for path in [*ROOT.glob("sessions/**/*.py"), *ROOT.glob("inspector/**/*.py")]:
        if path.name == "captions.py":
            continue
        tree = ast.parse(path.read_text())
        docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                      if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
                      and node.body and isinstance(node.body[0], ast.Expr)}
        found += [f"{path.relative_to(ROOT)}:{node.lineno}" for node in ast.walk(tree)
                  if isinstance(node, ast.Constant) and isinstance(node.value, str) and TAG in node.value
                  and id(node) not in docstrings]
    assert found == []


def test_the_study_states_the_method_in_the_words_of_the_one_session_report():
    """The recorded words hold "7 eager call(s)" and "the timed (graph) runs"; both reports say them one way."""
    session = storage.load(SESSION)
    assert "call(s)" in session.method.kernels and "(graph)" in session.method.kernels
    one = export_markdown(session, load_rules(), ["method"])
    study = study_markdown([(str(SESSION), session)], load_rules())
    for heading in ("Kernels", "Per-layer time"):
        words = next(line for line in one.splitlines() if line.startswith(f"- **{heading}:**"))
        assert f"- {heading}: {words.removeprefix(f'- **{heading}:** ')}" in study.splitlines()
    assert "call(s)" not in study and "(graph)" not in study
