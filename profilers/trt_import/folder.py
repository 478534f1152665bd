"""The files of one engine in a folder, as users keep them side by side (`trt-inspect import DIR`).

Each file is classified by its content into the role it fills (`kinds`: a JSON file's kind, or what a
trtexec log holds: its options, its `--dumpLayerInfo` or verbose layer block, its `--dumpProfile` table; a
log's block or table is taken only where no JSON file of that role is there), and the files are
grouped by engine name (`metadata.engine_stem`). A folder with one engine's layer file (or, without
one, one profile) imports it with the profile, times and metadata of the same engine name, or the only
ones there; a folder with several engines is refused with one line naming them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from profilers.trt_import import documents
from profilers.trt_import.kinds import LAYERS, PROFILE, ImportFiles, kind_of, roles, text_kinds
from profilers.trt_import.metadata import engine_stem
from profilers.trt_import.text_layers import is_text
from sessions.documents.errors import InputError

MAX_FILES = 1000  # a folder of TensorRT files, not a home directory


@dataclass
class FolderImport:
    files: ImportFiles
    taken: list[Path]
    left: list[Path]  # files of no kind this tool reads, or of another engine


def _log_roles(path: Path) -> list[str]:
    """The roles a log's text fills (its options, a layer block, a profile table: `kinds.text_kinds`); empty for none."""
    try:
        text = documents.read_text(path, "file")
    except InputError:
        return []
    return list(dict.fromkeys(kind.role for kind in text_kinds() if kind.recognise(text)))


def _role(path: Path) -> str | None:
    """The role of a JSON file by its content (`kinds.kind_of`), or None for a file this tool does not read as JSON."""
    try:
        kind = kind_of(documents.read_json(path, "file"))
    except InputError:
        return None
    return kind.role if kind else None


def _by_role(paths: list[Path]) -> dict[str, list[Path]]:
    """The files of each role; a log fills a one-file role only where no JSON file fills it."""
    found: dict[str, list[Path]] = {}
    logged: dict[str, list[Path]] = {}
    several = {role.name for role in roles() if role.repeatable}
    for path in paths:
        if is_text(path):
            for role in _log_roles(path):
                (found if role in several else logged).setdefault(role, []).append(path)
        elif (json_role := _role(path)) is not None:
            found.setdefault(json_role, []).append(path)
    for role, logs in logged.items():
        if not found.get(role):
            found[role] = logs
    return found


def _pick(paths: list[Path], stem: str) -> Path | None:
    same = [p for p in paths if engine_stem(p) == stem]
    return same[0] if len(same) == 1 else paths[0] if len(paths) == 1 else None


def files_of_folder(folder: Path) -> FolderImport:
    """The one engine of `folder`; InputError (one line) for a folder of several engines or none."""
    if not folder.is_dir():
        raise InputError(f"{folder} is not a folder")
    paths = sorted(p for p in folder.iterdir() if p.is_file())
    if len(paths) > MAX_FILES:
        raise InputError(f"{folder} holds {len(paths)} files, over the {MAX_FILES} an engine's folder may have")
    found = _by_role(paths)
    mains = found.get(LAYERS) or found.get(PROFILE) or []
    if not mains:
        raise InputError(f"{folder}: no layer information or profile file found")
    if len(mains) > 1:
        names = ", ".join(p.name for p in mains[:6]) + (" ..." if len(mains) > 6 else "")
        raise InputError(f"{folder} holds {len(mains)} engines ({names}): pass the files of one with --layers / --profile")
    main = mains[0]
    stem = engine_stem(main)
    layers = main if LAYERS in found else None
    chosen = ImportFiles.of(layers=layers, profile=_pick(found.get(PROFILE, []), stem) if layers is not None else main,
                            find_metadata=False)
    for role in roles():  # the other roles: the files of the same engine name, or the only ones there
        given = found.get(role.name, []) if role.name not in (LAYERS, PROFILE) else []
        picked = ([p for p in given if engine_stem(p) == stem or len(given) == 1] if role.repeatable
                  else [_pick(given, stem)])
        chosen.add(role.name, [p for p in picked if p is not None])
    taken = list(dict.fromkeys(p for role in roles() for p in chosen.every(role.name)))  # a log may be several
    return FolderImport(chosen, taken, [p for p in paths if p not in taken])
