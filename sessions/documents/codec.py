"""Turn session JSON back into the dataclasses of `sessions.documents.model`, checking shapes on the way.

orjson writes dataclasses natively; reading needs the reverse, with a clear path to the first
field that does not fit (``variants[2].latency.median_ms: expected a number``).

Each type gets one converter, made once from its annotations: a study saves its session after every
step and checks that the file loads back, so reading is on the study's path, not only the viewers'.
A converter knows nothing of where its value sits; the path is put together only when a check fails,
as the error passes up through the containers.

Values are checked for meaning too, not only for type: every field named `*_ms` is a duration in
milliseconds (`_duration`), so a view that divides by one (images per second) never overflows.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math
import operator
import types
import typing
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

T = TypeVar("T")
Convert = Callable[[Any], Any]


class ShapeError(ValueError):
    """A document does not have the shape of the dataclass it should fill."""

    def __init__(self, problem: str, where: str = "") -> None:
        super().__init__(problem)
        self.problem, self.where = problem, where

    def within(self, segment: str) -> ShapeError:
        self.where = segment + self.where
        return self

    def __str__(self) -> str:
        return f"{self.where}: {self.problem}"


def build(cls: type[T], data: Any, path: str = "") -> T:
    """Build dataclass `cls` from decoded JSON; unknown keys are ignored, missing required ones fail."""
    try:
        built: T = _converter(typing.cast(Any, cls))(data)  # cache keys must be hashable; mypy cannot see a class is
    except ShapeError as exc:
        raise exc.within(path or cls.__name__) from None
    return built


@functools.cache  # made on first use; no session type contains itself, which would recurse here
def _converter(tp: Any) -> Convert:
    if tp is Any:
        return _same
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        return _optional(tp)
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return _dataclass(tp)
    if origin is typing.Literal:
        return _literal(tp)
    if origin is list or origin is tuple:
        return _list(typing.get_args(tp)[0], origin is tuple)
    if origin is dict:
        return _dict(typing.get_args(tp)[1])
    if tp in _SCALARS:
        return _SCALARS[tp]
    raise TypeError(f"unsupported type {tp!r}")


def _same(value: Any) -> Any:
    return value


def _optional(tp: Any) -> Convert:
    args = typing.get_args(tp)
    nullable = type(None) in args
    (inner,) = [a for a in args if a is not type(None)]
    convert = _converter(inner)

    def optional(value: Any) -> Any:
        if value is None:
            if nullable:
                return None
            raise ShapeError("must not be null")
        return convert(value)

    return optional


DURATION_SUFFIX = "_ms"  # a field so named holds milliseconds, or a list of them
SPREADS = frozenset({"std_ms"})  # durations that are spreads: any small amount is right (near-equal samples)
MIN_TIME_MS = 1e-6  # a nanosecond: the finest tick of any clock trt-inspect reads (CUPTI, perf_counter_ns)
MAX_TIME_MS = 1e12  # about 30 years: no measured call lasts longer


def _dataclass(tp: type) -> Convert:
    hints = typing.get_type_hints(tp)
    missing = dataclasses.MISSING
    fields = [
        (f.name, _checked(f.name, _converter(hints[f.name])), f.default is missing and f.default_factory is missing)
        for f in dataclasses.fields(tp)
    ]

    def dataclass(value: Any) -> Any:
        if not isinstance(value, dict):
            raise ShapeError("expected an object")
        kwargs = {}
        for name, convert, required in fields:
            if name in value:
                try:
                    kwargs[name] = convert(value[name])
                except ShapeError as exc:
                    raise exc.within(f".{name}") from None
            elif required:
                raise ShapeError(f"missing field {name!r}")
        return tp(**kwargs)

    return dataclass


def _checked(name: str, convert: Convert) -> Convert:
    """`convert`, then the meaning check of a field named `name`: `_duration` for a `*_ms` field."""
    if not name.endswith(DURATION_SUFFIX):
        return convert
    spread = name in SPREADS

    def duration_field(value: Any) -> Any:
        converted = convert(value)
        for each in converted if isinstance(converted, (list, tuple)) else [converted]:
            if isinstance(each, (int, float)) and not isinstance(each, bool):
                _duration(float(each), spread)
        return converted

    return duration_field


def _duration(ms: float, spread: bool) -> None:
    """A duration a session may hold: finite, between 0 and MAX_TIME_MS, and a time (not a spread) either 0 or at
    least MIN_TIME_MS, so that dividing by it stays finite (5e-324 ms would make the images per second infinite)."""
    if not math.isfinite(ms) or not 0 <= ms <= MAX_TIME_MS:
        raise ShapeError(f"{ms!r} ms is not a duration between 0 and {MAX_TIME_MS:g} ms")
    if not spread and 0 < ms < MIN_TIME_MS:
        raise ShapeError(f"{ms!r} ms is below a nanosecond, finer than any clock trt-inspect reads")


def _all_durations(numbers: list[int | float], spread: bool) -> bool:
    """True exactly where `_duration(float(n), spread)` accepts every number of `numbers` (ints and floats), decided
    in C by the numbers' sum, least and greatest, not number by number. The sum is finite only where every number
    is (NaN and infinity carry through a sum; numbers within the bounds cannot overflow it)."""
    if not numbers:
        return True
    if not (math.isfinite(sum(numbers)) and min(numbers) >= 0 and max(numbers) <= MAX_TIME_MS):
        return False
    positive = list(filter(None, numbers))  # 0 is always a duration; the others must reach a clock's tick
    return spread or not positive or min(positive) >= MIN_TIME_MS


def _literal(tp: Any) -> Convert:
    allowed = typing.get_args(tp)
    words = ", ".join(map(str, allowed))

    def literal(value: Any) -> Any:
        if value not in allowed or isinstance(value, bool):
            raise ShapeError(f"{str(value)[:40]!r} is not one of {words}")
        return value

    return literal


def _list(item: Any, as_tuple: bool) -> Convert:
    column = _column_check(item)
    if column is not None:  # large columns: one fast pass, no per-item conversion
        words = _ITEM_WORDS[item if item in _ITEM_WORDS else list]

        def plain_list(value: Any) -> Any:
            if not isinstance(value, list):
                raise ShapeError("expected a list")
            bad = column(value)
            if bad is not None:
                raise ShapeError(words, f"[{bad}]")
            return tuple(value) if as_tuple else value

        return plain_list
    convert = _converter(item)

    def converted_list(value: Any) -> Any:
        if not isinstance(value, list):
            raise ShapeError("expected a list")
        items = []
        for i, v in enumerate(value):
            try:
                items.append(convert(v))
            except ShapeError as exc:
                raise exc.within(f"[{i}]") from None
        return tuple(items) if as_tuple else items

    return converted_list


def _dict(item: Any) -> Convert:
    convert = _converter(item)

    def mapping(value: Any) -> Any:
        if not isinstance(value, dict):
            raise ShapeError("expected an object")
        out = {}
        for k, v in value.items():
            try:
                out[k] = convert(v)
            except ShapeError as exc:
                raise exc.within(f".{k}") from None
        return out

    return mapping


def _float(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ShapeError("expected a number")
    return float(value)


def _int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ShapeError("expected an integer")
    return value


def _bool(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ShapeError("expected true or false")
    return value


def _str(value: Any) -> str:
    if not isinstance(value, str):
        raise ShapeError("expected a string")
    return value


_SCALARS: dict[Any, Convert] = {float: _float, int: _int, bool: _bool, str: _str}
_ITEM_WORDS = {int: "expected an integer", float: "expected a number", str: "expected a string",
               list: "expected a list of integers"}


def _first_bad(values: list[Any], ok: Callable[[Any], bool]) -> int | None:
    for i, v in enumerate(values):
        if not ok(v):
            return i
    return None


def _is_int_list(v: Any) -> bool:
    return type(v) is list and all(type(x) is int for x in v)


_COLUMN_TYPES: dict[Any, frozenset[type]] = {
    int: frozenset({int}), float: frozenset({int, float}), str: frozenset({str}),
}


def _column_check(item: Any) -> Callable[[list[Any]], int | None] | None:
    """A checker returning the first bad index, for columns of plain values; None for other items.

    The types of a column are collected in C (`set(map(type, ...))`); only a column that fails is walked in
    Python, to name its first bad element. `type(...) is`, not isinstance: true and false are not numbers.
    """
    if item == list[int]:
        def int_lists(values: list[Any]) -> int | None:
            if set(map(type, values)) <= {list} and set(map(type, itertools.chain.from_iterable(values))) <= {int}:
                return None
            return _first_bad(values, _is_int_list)

        return int_lists
    allowed = _COLUMN_TYPES.get(item)
    if allowed is None:
        return None

    def plain(values: list[Any]) -> int | None:
        return None if set(map(type, values)) <= allowed else _first_bad(values, lambda v: type(v) in allowed)

    return plain


ColumnCheck = Callable[[Sequence[Any]], bool]


def builds_all(cls: type, values: Sequence[Any]) -> bool:
    """True only where `build(cls, value)` returns (raises nothing) for every value of `values`, decoded JSON.

    Checked column by column, no object made: each field's values across all the items at once, the types of a
    column collected in C, nested lists and dataclasses flattened into one column each, the `*_ms` meaning check
    (`_duration`) on every number, a field's presence where it is required. Stricter than `build` where that
    is simpler (exact types: `type(v) is dict`, not a subclass; `Literal` columns of strings only; no dataclass
    with a `__post_init__` or its own `__init__`), so False means only "not shown here": a value fails, or the
    columns cannot tell, and `build` decides (and names the problem).
    """
    return _columns(typing.cast(Any, cls))(values)


@functools.cache  # one checker per type and nullability, as `_converter`
def _columns(tp: Any, nullable: bool = False) -> ColumnCheck:
    """The column check of `tp`; `nullable`: None is allowed too (the inner type of `X | None`)."""
    if tp is Any:
        return _anything
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        (inner,) = [a for a in args if a is not type(None)]
        return _columns(inner, nullable or type(None) in args)
    if origin is typing.Literal:
        return _literal_column(typing.get_args(tp), nullable)
    if tp in _SCALAR_TYPES:
        allowed = _SCALAR_TYPES[tp] | ({type(None)} if nullable else set())
        return lambda values: set(map(type, values)) <= allowed
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        check = _dataclass_column(tp)
    elif origin is list or origin is tuple:
        check = _list_column(typing.get_args(tp)[0])
    elif origin is dict:
        check = _dict_column(typing.get_args(tp)[1])
    else:
        raise TypeError(f"unsupported type {tp!r}")
    return _without_none(check) if nullable else check


_SCALAR_TYPES = {**_COLUMN_TYPES, bool: frozenset({bool})}


def _anything(values: Sequence[Any]) -> bool:
    return True


def _without_none(check: ColumnCheck) -> ColumnCheck:
    def nullable(values: Sequence[Any]) -> bool:
        return check(values if None not in values else list(filter(_not_none, values)))

    return nullable


_not_none = functools.partial(operator.is_not, None)


def _literal_column(words: tuple[Any, ...], nullable: bool) -> ColumnCheck:
    if not all(type(word) is str for word in words):
        return lambda values: False  # `build` compares other words with `in` (1.0 is 1): it decides
    allowed = frozenset(words) | ({None} if nullable else set())

    def literal(values: Sequence[Any]) -> bool:
        try:
            return set(values) <= allowed  # decoded JSON: only a string equals a string
        except TypeError:  # a list or an object: unhashable, and no word
            return False

    return literal


def _dataclass_column(tp: type) -> ColumnCheck:
    if "__post_init__" in dir(tp) or not typing.cast(Any, tp).__dataclass_params__.init:
        return lambda values: False  # its construction may refuse what its fields allow: `build` decides
    hints = typing.get_type_hints(tp)
    missing = dataclasses.MISSING
    fields = [
        (f.name, _checked_column(f.name, _columns(hints[f.name])),
         f.default is missing and f.default_factory is missing)
        for f in dataclasses.fields(tp)
    ]
    names = [name for name, _, _ in fields]
    every_field = operator.itemgetter(*names) if len(names) > 1 else lambda value: tuple(value[n] for n in names)

    def dataclass(values: Sequence[Any]) -> bool:
        if not set(map(type, values)) <= {dict}:
            return False
        if not values or not names:
            return True
        try:  # every field in every item (as `save` writes them): the columns cut in C
            columns: Sequence[Sequence[Any]] = list(zip(*map(every_field, values), strict=True))
        except KeyError:
            columns = [[value[name] for value in values if name in value] for name in names]
        return all((len(column) == len(values) or not required) and check(column)
                   for column, (_, check, required) in zip(columns, fields, strict=True))

    return dataclass


def _checked_column(name: str, check: ColumnCheck) -> ColumnCheck:
    """`check`, then the meaning check `_checked` adds to a field named `name` (`_duration` of a `*_ms` field)."""
    if not name.endswith(DURATION_SUFFIX):
        return check
    spread = name in SPREADS

    def duration_column(values: Sequence[Any]) -> bool:
        if not check(values):
            return False
        numbers = [each for value in values for each in (value if type(value) is list else (value,))
                   if type(each) is int or type(each) is float]
        return _all_durations(numbers, spread)

    return duration_column


def _list_column(item: Any) -> ColumnCheck:
    check = _columns(item)

    def list_column(values: Sequence[Any]) -> bool:
        return set(map(type, values)) <= {list} and check(list(itertools.chain.from_iterable(values)))

    return list_column


def _dict_column(item: Any) -> ColumnCheck:
    check = _columns(item)

    def dict_column(values: Sequence[Any]) -> bool:
        if not set(map(type, values)) <= {dict}:
            return False
        return check is _anything or check(list(itertools.chain.from_iterable(map(dict.values, values))))

    return dict_column
