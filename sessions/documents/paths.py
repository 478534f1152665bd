"""Where trt-inspect keeps its files: sessions, and the engine and ONNX cache."""

from __future__ import annotations

import datetime as dt
import os
import re
from pathlib import Path

HOME_ENV = "TRT_INSPECT_HOME"  # overrides the platform's user-data folder (tests, CI)


def data_home() -> Path:
    home = os.environ.get(HOME_ENV)
    if home:
        if os.path.exists(home) and not os.path.isdir(home):
            from sessions.documents.errors import InputError

            raise InputError(f"{HOME_ENV}={home} is not a folder")
        return Path(home)
    import platformdirs

    return Path(platformdirs.user_data_dir("trt-inspect", appauthor=False))


def sessions_dir() -> Path:
    """Where sessions go when `--out` is not given."""
    return data_home() / "sessions"


class ChosenPath(type(Path())):  # type: ignore[misc]  # the concrete class (PosixPath) is the one to extend
    """A file name trt-inspect chose where the user named none (a session's default name, a TUI export): its
    writer (`sessions.documents.storage.file_writer`) never replaces a file there and never advises --force; it
    takes the first of NAME.EXT, NAME-2.EXT, NAME-3.EXT ... that is free."""


def session_file(out: str | None, subject: str, created: dt.datetime, *qualifiers: str) -> Path:
    """Where a new session is saved: `out` where given, else in `sessions_dir()` as
    `<subject>[-<qualifier>...]-<YYYYmmdd-HHMMSS>.json` (`created`, as the session records it).

    The subject is a model name or path (an .onnx file by its stem); in the name, every run of characters other
    than letters, digits, `.`, `_` and `-` becomes one `_`, and the subject keeps its first 120. That default is a
    `ChosenPath`: two commands may get one name in one second, and the writer takes the next free `-2`, `-3` ....
    An empty `out` is an InputError, never taken for an `out` not given.
    """
    if out is not None:
        if not out:
            from sessions.documents.errors import InputError

            raise InputError("--out is empty; give a session file name, or leave --out out for the sessions folder")
        return Path(out)
    base = Path(subject).stem if subject.endswith(".onnx") else subject
    words = [re.sub(r"[^A-Za-z0-9._-]+", "_", base)[:120], *(re.sub(r"[^A-Za-z0-9._-]+", "_", q) for q in qualifiers)]
    return ChosenPath(sessions_dir() / f"{'-'.join(words)}-{created:%Y%m%d-%H%M%S}.json")


def cache_dir() -> Path:
    """Built engines, exported ONNX files and timing caches, keyed by content."""
    return data_home() / "engines"


def exports_dir() -> Path:
    """Where the TUI's `x` writes Markdown, from every screen: one folder beside the sessions."""
    return data_home() / "exports"
