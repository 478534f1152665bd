"""The TUI table's column widths: the widest cell as shown, however many rows repeat a value."""

from inspector.tui.widgets.virtual_table import MAX_COLUMN, column_widths
from sessions.reports.views import Column


def test_equal_values_that_print_differently_each_count():
    rows = [(0.0, 1, "a"), (-0.0, 1.0, "a")]  # -0.0 == 0.0 and 1 == 1.0, but a text column prints "-0.0" and "1.0"
    assert column_widths(rows, [Column("x"), Column("y"), Column("z")], ["x", "y", "z"]) == [4, 3, 1]


def test_a_long_cell_is_cut_and_a_long_label_kept():
    rows = [("n" * 100, 12.5)] * 3
    labels = ["name", "l" * 90]
    assert column_widths(rows, [Column("name"), Column("ms", "ms")], labels) == [MAX_COLUMN, 90]
    assert column_widths(rows[:0], [Column("name"), Column("ms", "ms")], labels) == [4, 90]
