"""Issue 17, defects 7, 8, 14 and 16: crafted names, bad model inputs, names that are paths, misleading messages.

Each case runs the CLI as a user would and checks the output's structure or the one error line.
"""

from __future__ import annotations

import copy
import re

import pytest

from sessions import storage
from sessions.tables import markdown_table_problems
from tests.conftest import H200, run_cli

# A name that tries every way out of a Markdown cell or line: row and line breaks, a pipe, a heading,
# a list item, a link label, a code fence and raw HTML.
EVIL = "x\r\n# Injected heading\n| a | b |\r<script>alert(1)</script>\x0b1. [l]: http://e\n```\n- item"


def evil_session(tmp_path, name: str = "evil.json"):
    """The H200 session with session-supplied strings crafted: model, variant, layer, GPU, notes, method, command."""
    session = copy.deepcopy(storage.load(H200 / "senet154-h200.json"))
    session.study.model = EVIL
    session.study.command = [*session.study.command, EVIL]
    session.environment.gpu.name = EVIL
    session.method.timed_region = EVIL
    for variant in session.variants:
        if variant.precision == "fp8":
            variant.name = f"{variant.name}{EVIL}"
        variant.notes.append(EVIL)
        for layer in variant.layers:
            if layer.name == "layer1.0.conv2":  # a flagged layer: it reaches the flag table and the study's bullets
                layer.name = EVIL + "layer1.0.conv2"
    path = tmp_path / name
    storage.save(session, path)
    return path, session


def outside_fences(text: str) -> list[str]:
    lines, fence = [], None
    for line in text.splitlines():
        marker = re.match(r"^(`{3,})", line)
        if fence is None and marker:
            fence = marker.group(1)
        elif fence is not None and line.strip() == fence:
            fence = None
        elif fence is None:
            lines.append(line)
    assert fence is None, "a code fence is left open"
    return lines


def tables(lines: list[str]) -> list[list[str]]:
    found, current = [], []
    for line in [*lines, ""]:
        if line.startswith("|"):
            current.append(line)
        elif current:
            found.append(current)
            current = []
    return found


def assert_safe_markdown(text: str, headings: set[str]) -> list[list[str]]:
    """Well-formed tables, no heading, row or raw HTML made by data; returns the tables' lines."""
    assert markdown_table_problems(text) == []
    assert "\r" not in text and "\x0b" not in text
    lines = outside_fences(text)
    assert [line for line in lines if line.lstrip().startswith("#") and line not in headings] == [], "a heading from data"
    assert not [line for line in lines if re.match(r"\s*(- item|1\. |\[l\]:|\| a \| b \|)", line)], "a block from data"
    assert "<script>" not in "\n".join(lines)
    return tables(lines)


def headings_of(text: str) -> set[str]:
    """The section headings the writer puts there itself (constant text after the hashes)."""
    return {line for line in text.splitlines() if re.fullmatch(r"#{1,3} [A-Za-z0-9 ,/().:-]+", line)} | {
        line for line in text.splitlines() if line.startswith(("# x", "## FP8 quantization study: x", "## Sweep: x"))}


def test_crafted_names_cannot_change_the_markdown_export(tmp_path):
    path, session = evil_session(tmp_path)
    result = run_cli("export", str(path), "--format", "md")
    assert result.returncode == 0, result.stderr
    found = assert_safe_markdown(result.stdout, headings_of(result.stdout))
    comparison = found[0]
    assert len(comparison) == 2 + len(session.variants)  # header, separator, one row per variant
    assert "&lt;script&gt;" in result.stdout
    rerun = result.stdout.split("## Rerun", 1)[1].splitlines()
    assert rerun[2].endswith("$'x\\x0d\\x0a# Injected heading\\x0a| a | b |\\x0d<script>alert(1)</script>\\x0b1. [l]: "
                             "http://e\\x0a```\\x0a- item'")  # the recorded command, one line that bash reads back


def test_crafted_names_cannot_change_the_markdown_diff(tmp_path):
    a, _ = evil_session(tmp_path, "a.json")
    b, session = evil_session(tmp_path, "b.json")
    changed = storage.load(b)
    for variant in changed.variants:
        variant.latency.median_ms *= 2  # every variant regresses: the head table lists them all
    storage.save(changed, b)
    result = run_cli("diff", str(a), str(b), "--format", "md")
    assert result.returncode == 1, result.stderr  # the regression
    assert "Traceback" not in result.stderr
    assert_safe_markdown(result.stdout, set())
    assert "&lt;script&gt;" in result.stdout


def test_crafted_names_cannot_change_the_study_and_matrix_exports(tmp_path):
    a, _ = evil_session(tmp_path, "a.json")
    b, _ = evil_session(tmp_path, "b.json")
    changed = storage.load(b)
    changed.study.batch = 8
    storage.save(changed, b)
    study = run_cli("export", str(a), str(b), "--format", "study")
    assert study.returncode == 0, study.stderr
    assert_safe_markdown(study.stdout, headings_of(study.stdout))
    matrix = run_cli("export", str(a), str(b), "--format", "matrix")
    assert matrix.returncode == 0, matrix.stderr
    assert_safe_markdown(matrix.stdout, headings_of(matrix.stdout))


def test_the_markdown_escapes_keep_text_readable():
    from sessions.tables import md_cell, md_code, md_fence, md_text

    assert md_cell("a|b <i> & c\nd") == "a\\|b &lt;i&gt; &amp; c d"
    assert md_text("# heading") == "\\# heading" and md_text("1. item") == "1\\. item" and md_text("layer1.0") == "layer1.0"
    assert md_code("layer1.0.conv2") == "`layer1.0.conv2`" and md_code("a`b") == "a\\`b"
    assert md_fence(["echo ```"]) == "````\necho ```\n````"


def test_a_command_with_a_newline_stays_one_line_that_bash_reads_back():
    import subprocess

    from sessions.export import shell_line

    line = shell_line(["printf", "%s|", "a\nb", "it's", "caf\xe9"])
    assert line == "printf '%s|' $'a\\x0ab' 'it'\"'\"'s' 'caf\xe9'"
    assert subprocess.run(["bash", "-c", line], capture_output=True, text=True).stdout == "a\nb|it's|caf\xe9|"
