"""trtexec's `--dumpProfile` table, read from the text of its log.

The table follows `=== Profile (N iterations ) ===`: a header, one row a layer, a `Total` row. Its
columns are found by the header's words (`sessions.documents.trt_names.PROFILE_COLUMNS`), so every layout reads:
7.x (`Layer`, `Time (ms)`, `Avg. Time (ms)`, `Time %`), 8.x (adds `Median Time (ms)`) and 8.6+ / 10.x
(`Time(ms)  Avg.(ms)  Median(ms)  Time(%)  Layer`, the name last). Each row gives the same record an
`--exportProfile` JSON gives; the `Total` row is kept to check the rows against.

Every row up to `Total` is read, and every cell checked (`documents`): a row that does not read (a `nan` or
`inf` cell), a cell out of range, or a table that ends before its `Total` row is refused with one line, never
read as the end of the table. A warning or error line another thread printed inside the table is passed over.
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass
from decimal import Decimal

from profilers.trt_import import documents
from profilers.trt_import.kinds import PROFILE, FileKind, register_kind
from profilers.trt_import.layer_info import normalize_name, profile_index
from profilers.trt_import.profile import PAIRING_MIN, Profile, ProfileRecord
from profilers.trt_import.text_layers import LOG_PREFIX, log_line, one_run
from sessions.documents.errors import InputError
from sessions.documents.trt_names import PROFILE_COLUMNS

NUMBER = r"[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?"
PROFILE_HEADING = re.compile(r"=== Profile \((\d+) iterations? *\) ===")
TABLE_LINE = re.compile(r"\[I\] " + PROFILE_HEADING.pattern)  # as a log line (`log_line`), not prose
OTHER_MESSAGE = re.compile(r"^(?:\[[^\]]*\] )?\[[VWEF]\] ")  # a verbose, warning or error line another thread printed
# an info line's time stamp and `[I] ` as `LOG_PREFIX` takes them off (its stamp ends at the first `]`), on a line
# `OTHER_MESSAGE` does not match: a row of the table, where the rest is one, is this and `_row_pattern`'s row
STAMPED_INFO = r"\[\d\d/\d\d/\d{4}-\d\d:\d\d:\d\d\] \[I\] ?"
TOTAL_AGREEMENT = 0.01  # the rows' summed time against the Total row, relative (the table rounds to 0.01 ms)
register_kind(FileKind("the --dumpProfile table of a trtexec log", PROFILE, text=True,
                       recognise=lambda text: log_line(text, TABLE_LINE) is not None))


@dataclass
class TextProfile:
    profile: Profile
    total_ms: float | None  # the `Total` row's summed time, where the table has one
    layout: str  # the header's words, as the log writes them


def _columns(header: str) -> list[str]:
    """The table's fields in the header's order, each found by its longest spelling first."""
    spans: list[tuple[int, int, str]] = []
    aliases = sorted(((alias, field) for field, words in PROFILE_COLUMNS.items() for alias in words),
                     key=lambda pair: -len(pair[0]))
    for alias, field in aliases:
        for match in re.finditer(re.escape(alias), header):
            if all(match.end() <= start or match.start() >= end for start, end, _ in spans):
                spans.append((match.start(), match.end(), field))
    return [field for _, _, field in sorted(spans)]


def _unprefixed(raw: str) -> str:
    """A line of the table without its log prefix, stripped at its end."""
    return LOG_PREFIX.sub("", raw).rstrip()


def _row_pattern(columns: list[str]) -> re.Pattern[str]:
    """A row of a table with these columns: the name first (7.x, 8.x) or last (8.6+), a number in every other."""
    cells = r"\s+".join([f"({NUMBER})"] * sum(1 for c in columns if c != "name"))
    # a name last is all up to its last character not a space (`(.*?)\s*$` takes that too, a character at a time)
    return re.compile(rf"^(.*?)\s+{cells}\s*$" if columns[0] == "name" else rf"^\s*{cells}\s+(.*\S|)\s*$")


def _group_order(columns: list[str]) -> list[str]:
    """The fields in the order `_row_pattern`'s groups hold them: the name first, or last as the header has it."""
    names = [c for c in columns if c == "name"]
    cells = [c for c in columns if c != "name"]
    return names + cells if columns[0] == "name" else cells + names


@functools.lru_cache(maxsize=4096)  # a table's cells repeat (`1.00`, `0.0100`): each spelling's step found once
def _unit(cell: str) -> float:
    """The rounding step of a printed number: 0.01 for `137.84`, 0.0001 for `0.0069` (counted from a plain decimal's
    digits, which is what `Decimal` gives it; `Decimal` reads any other spelling, `1e-3`)."""
    whole, _, decimals = cell.partition(".")
    if decimals.isdigit() and decimals.isascii() and whole.lstrip("+-").isdigit():
        return 10.0 ** -len(decimals)
    exponent = Decimal(cell).as_tuple().exponent
    if not isinstance(exponent, int):
        return 1.0
    try:
        return 10.0 ** exponent
    except OverflowError:  # `0e400`: a zero spelled with a step past any float, so never the finer cell
        return math.inf


def _finer_average(total: str, average: str | None, count: int) -> float:
    """A row's time per iteration from whichever cell is rounded finer: the Avg. column (4 decimals, 2 in 7.x),
    or Time over the iterations (Time has 2 decimals, so over 20,079 iterations it is finer than 4-decimal Avg.;
    over 11 it is not). Both state one figure: in every real table read (7.1.3, 8.5.2, 10.14.1, 10.16.0, 10.16.1)
    Avg. is Time over the iterations to within its rounding."""
    if average is None or _unit(total) / count < _unit(average):
        return float(total) / count
    return float(average)


def _time(value: float, origin: str, position: int, cell: str) -> float:
    """`documents.time_ms` of a row's cell; the line naming the row and cell made only where it refuses."""
    plain = documents.plain_time_ms(value)
    return plain if plain is not None else documents.time_ms(value, f"{origin}: profile row {position} {cell}")


def _percent(value: float, origin: str, position: int) -> float:
    """`documents.percent` of a row's Time % cell; the line naming the row made only where it refuses."""
    if 0 <= value <= documents.MAX_PERCENT:
        return value
    return documents.percent(value, f"{origin}: profile row {position} Time %")


def parse_text_profile(text: str, origin: str) -> TextProfile:
    """The `--dumpProfile` table of a log as a profile; InputError (one line) where the log has none, or several."""
    one_run(text, origin)
    match = PROFILE_HEADING.search(text)
    if match is None:
        raise InputError(f"{origin}: no `=== Profile (N iterations ) ===` table in this log "
                         "(trtexec prints it with --dumpProfile)")
    count = documents.count(int(match.group(1)), f"{origin}: the profile's iterations", positive=True)
    raw_lines = text[match.end():].split("\n")[1:]  # the lines after the heading's
    rest = iter(raw_lines)
    header = next((line for line in map(_unprefixed, rest) if line.strip()), "")
    columns = _columns(header)
    if "name" not in columns or "total_ms" not in columns or columns.count("name") != 1:
        raise InputError(f"{origin}: the profile table's header {header.strip()[:80]!r} is not one trtexec writes")
    row_pattern, order = _row_pattern(columns), _group_order(columns)
    stamped_row = re.compile(STAMPED_INFO + row_pattern.pattern.removeprefix("^"))
    at = {field: index for index, field in enumerate(order)}  # where a row's match holds each field
    at_name, at_total = at["name"], at["total_ms"]
    at_average, at_median, at_share = at.get("average_ms"), at.get("median_ms"), at.get("percentage")
    records: list[ProfileRecord] = []
    total = None
    for position, raw in enumerate(rest):
        match = stamped_row.fullmatch(raw)  # most rows: the line's stamp and row read by one match
        if match is None:
            line = _unprefixed(raw)
            if OTHER_MESSAGE.match(raw) or not line.strip() and not records:
                continue
            if not line.strip():
                break  # the table ends: at its Total row, or cut short (below)
            match = row_pattern.match(line)
            if match is None:
                raise InputError(f"{origin}: profile row {position} ({line.strip()[:80]!r}) is not a row of the "
                                 "table, and no Total row came before it: a cell that is not a number, or two tables "
                                 "mixed")
        cells = match.groups()
        name = cells[at_name].strip()
        total_ms = _time(float(cells[at_total]), origin, position, "Time")
        if name == "Total":
            total = total_ms
            break
        average_cell = cells[at_average] if at_average is not None else None
        if average_cell is not None:
            _time(float(average_cell), origin, position, "Avg.")
        median = _time(float(cells[at_median]), origin, position, "Median") if at_median is not None else None
        share = _percent(float(cells[at_share]), origin, position) if at_share is not None else None
        if profile_index(name):
            continue
        average = _time(_finer_average(cells[at_total], average_cell, count), origin, position, "Avg.")
        records.append(ProfileRecord(normalize_name(name), total_ms, average, median, share))
    if total is None:
        raise InputError(f"{origin}: the profile table ends before its Total row: a log cut short")
    if not records:
        raise InputError(f"{origin}: the profile table holds no layer rows")
    summed = sum(r.total_ms for r in records)
    if abs(summed - total) > TOTAL_AGREEMENT * total + 0.01 * len(records):
        raise InputError(f"{origin}: the profile rows add up to {summed:.2f} ms, its Total row says {total:.2f} ms: "
                         "a table cut short or two runs' tables mixed")
    return TextProfile(Profile(count, records), total, " | ".join(columns))


def with_unrun_layers(profile: Profile, layer_names: list[str]) -> tuple[Profile, list[str]]:
    """The table's profile with a 0 ms record for each layer it has no row for, in the layers' order; and their names.

    trtexec prints no row for a layer that did not run (`sampleReporting.cpp`: no time reported), where
    `--exportProfile` writes it with 0 ms. Only a table whose rows nearly all name one of these layers
    (PAIRING_MIN) is filled in; any other is returned as it is, for the pairing to refuse.
    """
    rows = {record.name for record in profile.records}
    names = set(layer_names)
    if sum(1 for record in profile.records if record.name in names) < PAIRING_MIN * len(profile.records):
        return profile, []
    missing = [name for name in layer_names if name not in rows]
    if not missing:
        return profile, []
    by_name: dict[str, list[ProfileRecord]] = {}
    for record in profile.records:
        by_name.setdefault(record.name, []).append(record)
    records = []
    for name in layer_names:
        queue = by_name.get(name)
        records.append(queue.pop(0) if queue else ProfileRecord(name, 0.0, 0.0, 0.0, 0.0))
    # rows naming no layer, for the pairing to list
    records.extend(record for queue in by_name.values() for record in queue)
    return Profile(profile.count, records), missing
