"""The export formats, one module each, and their registry: what `trt-inspect export --format` offers and what
the TUI's export key writes.

A format is a module of this package holding `EXPORTER`, an `Exporter`; the package is read for them, so a new
format is its module alone. Its `render` turns the sessions asked for into the text written out.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING

from sessions.documents.errors import InputError

if TYPE_CHECKING:  # the command line reads the registry to build its parser: nothing more loads then
    from sessions.analyses.groups import Rules
    from sessions.documents.model import Session

BUILT_IN = ("md", "csv", "json", "study", "matrix", "perfetto")  # listed first, in this order; the first is the default


@dataclass(frozen=True)
class ExportRequest:
    """What an exporter renders: the sessions with the paths they were read from ("" for one never saved), the
    grouping rules (loaded only by a format that reads them) and the `--sections` words as given (None: the
    format's own)."""

    sources: list[tuple[str, Session]]
    rules: Callable[[], Rules]
    sections: str | None = None

    def one(self) -> tuple[str, Session]:
        """The one session a single-session format renders."""
        return self.sources[0]


@dataclass(frozen=True)
class Exporter:
    name: str  # the --format word
    render: Callable[[ExportRequest], str]
    many: bool = False  # takes several sessions; else exactly one
    help: str = ""  # what --format's help says of it; empty: the name says it


@cache
def exporters() -> dict[str, Exporter]:
    """Every format of this package by name: the built-in ones in `BUILT_IN` order, then the others by module name."""
    names = {module.name for module in pkgutil.iter_modules(__path__)}
    modules = [name for name in BUILT_IN if name in names] + sorted(names - set(BUILT_IN))
    found = [importlib.import_module(f"{__name__}.{name}").EXPORTER for name in modules]
    return {exporter.name: exporter for exporter in found}


def exporter(name: str) -> Exporter:
    try:
        return exporters()[name]
    except KeyError:
        raise InputError(f"unknown export format {name!r}; known: {', '.join(exporters())}") from None
