"""Documents as the indented JSON text the commands print and export."""

from __future__ import annotations

from typing import Any


def json_text(document: Any) -> str:
    """Indented JSON; a path that is not UTF-8 (a POSIX file name is bytes) is shown with backslash escapes."""
    import orjson

    try:
        return orjson.dumps(document, option=orjson.OPT_INDENT_2).decode() + "\n"
    except orjson.JSONEncodeError:  # surrogates from os.fsdecode: not valid UTF-8, so not valid JSON
        return orjson.dumps(_printable(document), option=orjson.OPT_INDENT_2).decode() + "\n"


def _printable(value: Any) -> Any:
    import dataclasses

    if isinstance(value, str):
        return value.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    if isinstance(value, dict):
        return {_printable(k): _printable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_printable(v) for v in value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _printable(dataclasses.asdict(value))
    return value
