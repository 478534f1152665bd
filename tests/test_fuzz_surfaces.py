"""Property-based fuzzing of the sweep matrix, the terminal escape and the TUI's plain text: whatever the input,
one InputError or a result, and never a control character or markup on the screen.

`TRT_INSPECT_FUZZ_EXAMPLES=10000 python -m pytest tests/test_fuzz_surfaces.py` is the long run.
"""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from inspector.sweep.matrix import check_imports, combinations, parse_matrix
from inspector.tui.plain import plain
from sessions.documents.errors import InputError
from sessions.documents.input_files import check_bounds
from sessions.documents.options import BY_KEY
from sessions.reports.tables import render_text, terminal_text
from tests.test_fuzz import FUZZ, json_values

# what a terminal must never see, written here apart from tables.py: controls, line breaks, bidi and zero-width marks
UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028\u2029\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff]")
option_names = st.sampled_from(sorted({*BY_KEY, "bogus", "model"}))
option_values = st.one_of(st.integers(-3, 5), st.text(max_size=8), st.booleans(), st.floats(allow_nan=True),
                          st.lists(st.integers(0, 3) | st.text(max_size=4), max_size=3))
matrices = st.fixed_dictionaries({}, optional={
    "sweep": st.dictionaries(st.sampled_from(["name", "imports", "other"]), json_values, max_size=2),
    "base": st.dictionaries(option_names, option_values, max_size=4),
    "axes": st.dictionaries(option_names, st.lists(option_values, max_size=4) | option_values, max_size=4),
    "exclude": st.lists(st.dictionaries(option_names, option_values, max_size=2), max_size=2) | json_values,
    "other": json_values,
})


@FUZZ
@given(matrices)
def test_matrix_parsing_and_planning_on_generated_documents(doc):
    try:
        matrix = parse_matrix(check_bounds(doc, "m.toml"), "m", "m.toml")
        check_imports(matrix, "m.toml", allowed=False)
        found = combinations(matrix, "m.toml")
    except InputError as exc:
        assert exc.message and "\n" not in exc.message
        return
    assert found and all(c.request.model for c in found)


@FUZZ
@given(st.text())
def test_terminal_text_lets_no_control_character_through(text):
    shown = terminal_text(text)
    assert not UNSAFE.search(shown)
    assert shown == text or UNSAFE.search(text) or "\\" in text
    lines = terminal_text(text, keep_lines=True)
    assert not UNSAFE.search(lines.replace("\n", "").replace("\t", ""))
    table = render_text([text], [[text, 1.0]])
    assert not UNSAFE.search(table.replace("\n", "")) and table.count("\n") == 2  # header, rule, one row


@FUZZ
@given(st.text(alphabet=st.sampled_from("[]/@=ab \x1b\x07\n")))
def test_the_tuis_plain_text_is_never_markup(text):
    shown = plain(text)
    assert shown.spans == [] and "\x1b" not in shown.plain
    assert shown.plain == terminal_text(text)
