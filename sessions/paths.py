"""Where trt-inspect keeps its files: sessions, and the engine and ONNX cache."""

from __future__ import annotations

import os
from pathlib import Path

HOME_ENV = "TRT_INSPECT_HOME"  # overrides the platform's user-data folder (tests, CI)


def data_home() -> Path:
    home = os.environ.get(HOME_ENV)
    if home:
        if os.path.exists(home) and not os.path.isdir(home):
            from sessions.errors import InputError

            raise InputError(f"{HOME_ENV}={home} is not a folder")
        return Path(home)
    import platformdirs

    return Path(platformdirs.user_data_dir("trt-inspect", appauthor=False))


def sessions_dir() -> Path:
    """Where sessions go when `--out` is not given."""
    return data_home() / "sessions"


def cache_dir() -> Path:
    """Built engines, exported ONNX files and timing caches, keyed by content."""
    return data_home() / "engines"


def exports_dir() -> Path:
    """Where the TUI's `x` writes Markdown, from every screen: one folder beside the sessions."""
    return data_home() / "exports"
