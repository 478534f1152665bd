"""The TensorRT files `import` reads, each kind registered by the module that reads it.

A role is what files do in an import (`layers`, `profile`, `times`, `metadata`): its `import --<role>`
flag and help, whether several files fill it, and, for a role the importer's core does not read itself,
how its files go into the imported variant (`apply`). A file kind is one file a tool writes: what
`file_kind` calls it (in the words of the option that writes it), the role it fills, how to recognise it
by content (a JSON document, or the text of a log) and the name endings its writers give it
(`metadata.engine_stem`). The importer (`importer`), the folder reader (`folder`) and the `import`
command's arguments read this registry; adding a kind is one module that registers it (every module of
this package is imported before the registry is read, as `sessions.reports.exporters` finds its formats).
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sessions.documents.errors import InputError

LAYERS, PROFILE, METADATA = "layers", "profile", "metadata"  # the roles the importer's core reads (see Role)


@dataclass
class ImportFiles:
    """The files of one import by role (`roles()`), in the order given; `find_metadata`: also read the
    metadata files written beside the layer or profile file."""

    paths: dict[str, list[Path]] = field(default_factory=dict)
    find_metadata: bool = True

    @classmethod
    def of(cls, *, find_metadata: bool = True, **given: Path | list[Path] | None) -> ImportFiles:
        """`ImportFiles.of(layers=a, profile=b, metadata=[c])`: a path (or a list of them, or None) by role name."""
        known = {role.name: role for role in roles()}
        unknown = set(given) - set(known)
        if unknown:
            raise TypeError(f"unknown import roles: {', '.join(sorted(unknown))}")
        paths = {name: [Path(p) for p in (value if isinstance(value, list) else [value])]
                 for name, value in given.items() if value}
        for name, found in paths.items():
            if len(found) > 1 and not known[name].repeatable:
                raise InputError(f"--{name} takes one file; got {len(found)}: {', '.join(p.name for p in found)}")
        return cls(paths, find_metadata)

    def one(self, role: str) -> Path | None:
        """The file of a role one file fills, or None."""
        found = self.paths.get(role, [])
        return found[0] if found else None

    def every(self, role: str) -> list[Path]:
        return self.paths.get(role, [])

    def add(self, role: str, paths: list[Path]) -> None:
        """`paths` after the role's files (none: no change)."""
        if paths:
            self.paths[role] = [*self.every(role), *paths]


@dataclass(frozen=True)
class Role:
    """What files do in an import: `import --<name>`, its help, one file or several (`repeatable`, with `metavar`).

    `order` places the flag among the others and the files in the note that says what a folder gave.
    `by_trtexec`: a file of this role is trtexec's, so the variant's backend is trtexec. `apply(paths, reading)`
    puts the role's files into the variant, after its layers are read (`reading`: an `importer.Reading`, which
    this registry cannot name without importing every importer); None for the roles the importer's core reads
    (layers and profile make the layers and their times, metadata the run's facts).
    """

    name: str
    help: str
    order: int
    repeatable: bool = False
    metavar: str | None = None
    by_trtexec: bool = False
    apply: Callable[[list[Path], Any], None] | None = None

    @property
    def flag(self) -> str:
        return f"--{self.name}"


@dataclass(frozen=True)
class FileKind:
    """One file a tool writes. `description` is what `file_kind` says it is; `recognise` takes the JSON document
    (or, for a log's `text` kind, the log's text); `rank` orders the tests of JSON kinds, lowest first (the first
    that recognises a document names it). A log's kind fills a single-file role only where no JSON file does.
    `head`: a pattern the first HEAD_BYTES of a JSON file of this kind match, which classifies a file in a folder
    without reading it whole (the import reads it, once, and `recognise` checks it then)."""

    description: str
    role: str
    recognise: Callable[[Any], bool]
    rank: int = 0
    text: bool = False
    suffixes: tuple[str, ...] = ()
    head: str | None = None


_ROLES: dict[str, Role] = {}
_KINDS: list[FileKind] = []


def register_role(role: Role) -> Role:
    if role.name in _ROLES:
        raise ValueError(f"import role {role.name!r} is registered twice")
    _ROLES[role.name] = role
    return role


def register_kind(kind: FileKind) -> FileKind:
    _KINDS.append(kind)
    return kind


@functools.cache
def _load() -> None:
    """Import every module of this package, so each registers its roles and kinds (once)."""
    import profilers.trt_import as package

    for module in pkgutil.iter_modules(package.__path__):
        importlib.import_module(f"{package.__name__}.{module.name}")


def roles() -> list[Role]:
    """Every registered role, in flag order."""
    _load()
    return sorted(_ROLES.values(), key=lambda role: role.order)


def json_kinds() -> list[FileKind]:
    """The kinds read from a JSON document, in the order they are tested."""
    _load()
    return sorted((kind for kind in _KINDS if not kind.text), key=lambda kind: kind.rank)


def text_kinds() -> list[FileKind]:
    """The kinds read from a log's text; a log may hold several (its options, a layer block, a profile table)."""
    _load()
    return [kind for kind in _KINDS if kind.text]


def suffixes() -> tuple[str, ...]:
    """Every name ending the kinds' writers give their files, the longest first (the most specific)."""
    _load()
    return tuple(sorted({s for kind in _KINDS for s in kind.suffixes}, key=len, reverse=True))


HEAD_BYTES = 4096


def kind_of_head(head: str) -> FileKind | None:
    """The registered JSON kind whose `head` pattern the opening of a file matches, in rank order; None for none."""
    return next((kind for kind in json_kinds() if kind.head and re.search(kind.head, head)), None)


def kind_of(doc: Any) -> FileKind | None:
    """The registered kind of a JSON document, or None."""
    return next((kind for kind in json_kinds() if kind.recognise(doc)), None)


def file_kind(doc: Any) -> str | None:
    """Which TensorRT tool file a document is, in the words of the option that writes it."""
    kind = kind_of(doc)
    return kind.description if kind else None


def wrong_kind(doc: Any, origin: str, expected: str) -> InputError:
    """The one line for a document that is not the kind a role expects: what it is instead, where known."""
    kind = file_kind(doc)
    found = f"this is {kind}" if kind else "its content is not a TensorRT file this tool knows"
    return InputError(f"{origin}: expected {expected}; {found}")


def first_record(doc: Any) -> dict[str, Any] | None:
    """The first record of a JSON list of records (past a `{"count": N}` header), or None for anything else."""
    if not (isinstance(doc, list) and doc and all(isinstance(item, dict) for item in doc[:3])):
        return None
    first: dict[str, Any] = doc[1] if len(doc) > 1 and "count" in doc[0] and "name" not in doc[0] else doc[0]
    return first
