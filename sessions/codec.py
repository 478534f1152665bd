"""Turn session JSON back into the dataclasses of `sessions.model`, checking shapes on the way.

orjson writes dataclasses natively; reading needs the reverse, with a clear path to the first
field that does not fit (``variants[2].latency.median_ms: expected a number``).
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from typing import Any, TypeVar

T = TypeVar("T")


class ShapeError(ValueError):
    """A document does not have the shape of the dataclass it should fill."""


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def build(cls: type[T], data: Any, path: str = "") -> T:
    """Build dataclass `cls` from decoded JSON; unknown keys are ignored, missing required ones fail."""
    built: T = _convert(cls, data, path or cls.__name__)
    return built


def _convert(tp: Any, value: Any, path: str) -> Any:
    if tp is Any:
        return value
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        if value is None:
            if type(None) in args:
                return None
            raise ShapeError(f"{path}: must not be null")
        (inner,) = [a for a in args if a is not type(None)]
        return _convert(inner, value, path)
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        if not isinstance(value, dict):
            raise ShapeError(f"{path}: expected an object")
        hints = _hints(tp)
        kwargs = {}
        for f in dataclasses.fields(tp):
            if f.name in value:
                kwargs[f.name] = _convert(hints[f.name], value[f.name], f"{path}.{f.name}")
            elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise ShapeError(f"{path}: missing field {f.name!r}")
        return tp(**kwargs)
    if origin is typing.Literal:
        if value not in typing.get_args(tp) or isinstance(value, bool):
            allowed = ", ".join(map(str, typing.get_args(tp)))
            raise ShapeError(f"{path}: {str(value)[:40]!r} is not one of {allowed}")
        return value
    if origin is list or origin is tuple:
        if not isinstance(value, list):
            raise ShapeError(f"{path}: expected a list")
        item = typing.get_args(tp)[0]
        column = _column_check(item)
        if column is not None:  # large columns: one fast pass, no per-item conversion
            bad = column(value)
            if bad is not None:
                raise ShapeError(f"{path}[{bad}]: {_ITEM_WORDS[item if item in _ITEM_WORDS else list]}")
            items = value
        else:
            items = [_convert(item, v, f"{path}[{i}]") for i, v in enumerate(value)]
        return tuple(items) if origin is tuple else items
    if origin is dict:
        if not isinstance(value, dict):
            raise ShapeError(f"{path}: expected an object")
        _, item = typing.get_args(tp)
        return {k: _convert(item, v, f"{path}.{k}") for k, v in value.items()}
    return _scalar(tp, value, path)


def _scalar(tp: Any, value: Any, path: str) -> Any:
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ShapeError(f"{path}: expected a number")
        return float(value)
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ShapeError(f"{path}: expected an integer")
        return value
    if tp is bool:
        if not isinstance(value, bool):
            raise ShapeError(f"{path}: expected true or false")
        return value
    if tp is str:
        if not isinstance(value, str):
            raise ShapeError(f"{path}: expected a string")
        return value
    raise TypeError(f"unsupported type {tp!r} at {path}")


_ITEM_WORDS = {int: "expected an integer", float: "expected a number", str: "expected a string",
               list: "expected a list of integers"}


def _first_bad(values: list[Any], ok: typing.Callable[[Any], bool]) -> int | None:
    for i, v in enumerate(values):
        if not ok(v):
            return i
    return None


def _is_int(v: Any) -> bool:
    return type(v) is int


def _is_number(v: Any) -> bool:
    return type(v) is int or type(v) is float


def _is_str(v: Any) -> bool:
    return type(v) is str


def _is_int_list(v: Any) -> bool:
    return type(v) is list and all(type(x) is int for x in v)


def _column_check(item: Any) -> typing.Callable[[list[Any]], int | None] | None:
    """A checker returning the first bad index, for columns of plain values; None for other items."""
    ok = {int: _is_int, float: _is_number, str: _is_str}.get(item)
    if ok is None and item == list[int]:
        ok = _is_int_list
    if ok is None:
        return None
    checker = ok
    return lambda values: None if all(map(checker, values)) else _first_bad(values, checker)
