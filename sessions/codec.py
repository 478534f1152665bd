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
    return _convert(cls, data, path or cls.__name__)


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
    if dataclasses.is_dataclass(tp):
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
    if origin is list:
        if not isinstance(value, list):
            raise ShapeError(f"{path}: expected a list")
        (item,) = typing.get_args(tp)
        if item in (int, float, str) or typing.get_origin(item) is list:
            return value  # large columns: checked by their owner's validate(), not item by item
        return [_convert(item, v, f"{path}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise ShapeError(f"{path}: expected an object")
        _, item = typing.get_args(tp)
        return {k: _convert(item, v, f"{path}.{k}") for k, v in value.items()}
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
