"""The engines of a folder of TensorRT files, as users keep them side by side (`trt-inspect import DIR`).

Each file is classified without being parsed whole: a JSON file by its opening (`kinds.kind_of_head`), a log by
its marks (`kinds.text_kinds`: trtexec's options, a `--dumpLayerInfo` or verbose layer block, a `--dumpProfile`
table), a file that cannot be read is left with its reason. Each file belongs to an engine: a log to the engine
file its trtexec command saved or loaded (`--saveEngine`, `--loadEngine`), a JSON file to the engine its name
gives (trtexec's and trex's endings, `metadata.engine_stem`); a file that names none belongs to the folder's only
engine.

A folder whose layer and profile files name one engine (or none) is one engine. A folder of several is a variant
per engine, each named by what the engines' names do not share (`gpu_mark_at_38` among `googlenet_*.profile`),
the shared part naming the model. Within an engine each role takes the best of its files: a JSON file, else a
log's `--dumpLayerInfo` block, else a verbose build's layer lines (a JSON profile, else a `--dumpProfile` table);
every log and metadata file of the engine is read for its run facts and performance summary. Refused with one
line naming the files: two files that fill one role of one engine equally well, and, in a folder of several
engines, a layer or profile file whose name and options name none of them.
"""

from __future__ import annotations

import fnmatch
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from profilers.trt_import import documents
from profilers.trt_import.kinds import (
    HEAD_BYTES,
    LAYERS,
    METADATA,
    PROFILE,
    FileKind,
    ImportFiles,
    json_kinds,
    kind_of,
    kind_of_head,
    roles,
    suffixes,
    text_kinds,
)
from profilers.trt_import.metadata import command_options, engine_stem, model_name
from profilers.trt_import.summary import HEADING as SUMMARY_HEADING
from profilers.trt_import.text_layers import LOG_HEAD, opens_as_json, text_layer_kind
from sessions.documents.errors import InputError
from sessions.documents.input_files import read_file_head

MAX_FILES = 1000  # a folder of TensorRT files, not a home directory
SEPARATORS = "_-."  # where a shared part of engine names may end
SHOWN = 6  # files a refusal names before it counts the rest
# how well a file fills a role, best first: a JSON file; a log's --dumpLayerInfo block (or its table, or any other
# block a log holds); a verbose build's layer lines
RANKS = {"json": 0, "--dumpLayerInfo": 1, "log": 1, "verbose": 2}
# a JSON document with nothing in it to read: `[]`, `{}`, or a profile's count header alone (a run that wrote none)
NO_RECORDS = re.compile(r'\s*(\[\s*(\{\s*"count"\s*:\s*[0-9.eE+-]+\s*\}\s*)?\]|\{\s*\})\s*')


@dataclass
class Found:
    """A classified file: the roles it can fill, by how well (RANKS), and the engine its name or options name."""

    path: Path
    ranks: dict[str, int]
    engine: str | None
    summary: bool = False  # a log with trtexec's performance summary


@dataclass
class Engine:
    """One engine's files: the variant's name (None: the importer names it), its files by role, a note per file."""

    name: str | None
    files: ImportFiles
    taken: list[str] = field(default_factory=list)  # `file (what was taken from it)`


@dataclass
class FolderImport:
    engines: list[Engine]
    left: list[str]  # `file (why)`
    model: str | None  # the part every engine's name shares, where the folder holds several


def _shown(paths: list[Path]) -> str:
    return ", ".join(p.name for p in paths[:SHOWN]) + (f" and {len(paths) - SHOWN} more" if len(paths) > SHOWN else "")


def _listing(folder: Path) -> list[Path]:
    """The entries of `folder` (files, and anything else, which `_classify` leaves saying why); InputError (one
    line) for a folder that is none or cannot be read."""
    shown = str(folder) if len(str(folder)) <= 200 else f"{str(folder)[:200]}..."
    try:
        if not folder.is_dir():
            raise InputError(f"{shown} is not a folder")
        paths = sorted(folder.iterdir())
    except OSError as exc:
        raise InputError(f"{shown}: the folder cannot be read ({exc.strerror or exc})") from None
    if len(paths) > MAX_FILES:
        raise InputError(f"{shown} holds {len(paths)} files, over the {MAX_FILES} an engine's folder may have")
    return paths


def _json_engine(path: Path) -> str | None:
    """The engine a JSON file's name gives, where it ends as trtexec and trex name their files; else None."""
    return engine_stem(path) if path.name.endswith(suffixes()) else None


def _classify(path: Path) -> Found | str:
    """What `path` can fill, or why it is left (unreadable, too large, no kind this tool reads)."""
    try:
        head = documents.text_of(read_file_head(path, "file", HEAD_BYTES))
    except InputError as exc:
        return exc.message
    if not head.strip():
        return "empty"
    if opens_as_json(head) or head.lstrip().startswith('"'):  # a JSON document, or one double-encoded as a string
        kind = kind_of_head(head) or _kind_of_whole(path)
        if kind:
            return Found(path, {kind.role: RANKS["json"]}, _json_engine(path))
        return "a JSON document with no records in it" if NO_RECORDS.fullmatch(head) else (
            "not a TensorRT file this tool reads")
    try:
        text = documents.read_text(path, "file")
    except (InputError, OSError) as exc:
        return str(exc.message if isinstance(exc, InputError) else exc.strerror or exc)
    filled = {kind.role for kind in text_kinds() if kind.recognise(text)}
    if not filled:
        return "not a TensorRT file this tool reads"
    ranks = {role: RANKS["log"] for role in filled}
    if LAYERS in filled:
        ranks[LAYERS] = RANKS[text_layer_kind(text) or "verbose"]
    options = command_options(text[:LOG_HEAD])
    engine = options.get("--saveEngine") or options.get("--loadEngine")
    return Found(path, ranks, Path(engine.replace("\\", "/")).name if engine else None, SUMMARY_HEADING in text)


def _kind_of_whole(path: Path) -> FileKind | None:
    """The kind of a JSON file read whole: only where a registered kind gives no `head` pattern to tell it by."""
    if all(kind.head for kind in json_kinds()):
        return None
    try:
        return kind_of(documents.read_json(path, "file"))
    except InputError:
        return None


def _best(found: list[Found], role: str, engine: str | None) -> Found | None:
    """The file that fills a one-file role best; InputError where two fill it equally well."""
    given = sorted((f for f in found if role in f.ranks), key=lambda f: f.ranks[role])
    if len(given) > 1 and given[0].ranks[role] == given[1].ranks[role]:
        same = [f.path for f in given if f.ranks[role] == given[0].ranks[role]]
        of = f" of engine {engine}" if engine else ""
        raise InputError(f"{len(same)} files{of} give its {role} equally: {_shown(same)}; pass the one to read "
                         f"with --{role} (and the others with --metadata)")
    return given[0] if given else None


def _engine(name: str | None, key: str | None, found: list[Found]) -> Engine:
    """The files of one engine by role, with a note per file of what was taken from it."""
    chosen = {role.name: _best(found, role.name, key) for role in roles() if not role.repeatable}
    files = ImportFiles.of(find_metadata=False, **{role: f.path for role, f in chosen.items() if f is not None})
    files.add(METADATA, [f.path for f in found if METADATA in f.ranks])
    engine = Engine(name, files)
    for f in found:
        took = [role for role, best in chosen.items() if best is f]
        if METADATA in f.ranks:
            took.append("run facts" + (" and performance summary" if f.summary else ""))
        unused = [role for role in f.ranks if role not in took and role != METADATA and chosen.get(role) is not None]
        if unused:
            took.append(f"its {' and '.join(unused)} not read: "
                        f"{', '.join(chosen[r].path.name for r in unused)} gives it")
        engine.taken.append(f"{f.path.name} ({'; '.join(took)})")
    return engine


def _distinct(names: list[str]) -> tuple[list[str], str]:
    """Each name without the part every name shares, and that shared part (cut at a separator): the variants'
    names and the model's."""
    prefix = os.path.commonprefix(names)
    suffix = os.path.commonprefix([n[::-1] for n in names])[::-1]
    prefix = prefix[:max(prefix.rfind(s) for s in SEPARATORS) + 1]
    suffix = suffix[min((i for i in (suffix.find(s) for s in SEPARATORS) if i >= 0), default=len(suffix)):]
    parts = [n[len(prefix):len(n) - len(suffix)] for n in names]
    if any(not p for p in parts) or len(set(parts)) < len(parts):
        return names, ""
    return parts, (prefix + suffix).strip(SEPARATORS)


def files_of_folder(folder: Path, pattern: str | None = None) -> FolderImport:
    """The engines of `folder` (those whose name or a file's name matches `pattern`, a shell pattern, where given);
    InputError (one line) for a folder of no engine, an ambiguous file, or a pattern that keeps none."""
    left: list[str] = []
    found: list[Found] = []
    for path in _listing(folder):
        kind = _classify(path)
        if isinstance(kind, str):
            left.append(f"{path.name} ({kind})")
        else:
            found.append(kind)
    mains = [f for f in found if LAYERS in f.ranks or PROFILE in f.ranks]
    if not mains:
        raise InputError(f"{folder}: no layer information or profile file found")
    keys = list(dict.fromkeys(f.engine for f in mains if f.engine))
    if len(keys) > 1 and (unnamed := [f.path for f in mains if not f.engine]):
        raise InputError(f"{folder} holds {len(keys)} engines, and {_shown(unnamed)} names none of them: pass the "
                         "files of one with --layers / --profile")
    groups: dict[str | None, list[Found]] = {key: [] for key in keys or [None]}
    for f in found:
        if len(groups) == 1 and (f.engine is None or not keys or f.engine == keys[0]):
            groups[next(iter(groups))].append(f)  # the folder's only engine
        elif f.engine in groups:
            groups[f.engine].append(f)
        elif f.engine:
            left.append(f"{f.path.name} (of engine {f.engine}, whose layers and profile are not here)")
        else:
            left.append(f"{f.path.name} (names no engine of the {len(groups)} here)")
    names, model = _distinct([model_name(key) for key in keys]) if len(keys) > 1 else (
        [model_name(key) for key in keys] or [None], "")
    engines = [_engine(name, key, groups[key]) for name, key in zip(names, groups, strict=False)]
    if pattern is not None:
        engines = [e for e in engines if _matches(e, pattern)]
        if not engines:
            raise InputError(f"--engine {pattern!r} matches none of the {len(groups)} engines in {folder} "
                             f"({', '.join(str(n) for n in names[:SHOWN])}{' ...' if len(names) > SHOWN else ''})")
    return FolderImport(engines, left, model or None)


def _matches(engine: Engine, pattern: str) -> bool:
    """An engine matches by its variant name or any of its files' names (a shell pattern, `fnmatch`)."""
    words = [engine.name or "", *(p.name for role in roles() for p in engine.files.every(role.name))]
    return any(fnmatch.fnmatchcase(word, pattern) for word in words)

