"""The files of one engine in a folder, as users keep them side by side (`trt-inspect import DIR`).

Each file is classified by its content (`layer_info.file_kind`, or a trtexec log: its options, its
`--dumpLayerInfo` or verbose layer block, its `--dumpProfile` table; a log's block or table is taken only
where no JSON file of that kind is there), and the files are
grouped by engine name (`metadata.engine_stem`). A folder with one engine's layer file (or, without
one, one profile) imports it with the profile, times and metadata of the same engine name, or the only
ones there; a folder with several engines is refused with one line naming them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from profilers.trt_import import documents
from profilers.trt_import.importer import ImportFiles
from profilers.trt_import.layer_info import SAMPLES_KIND, file_kind
from profilers.trt_import.metadata import engine_stem
from profilers.trt_import.text_layers import LOG_HEAD, LOG_MARKS, is_text, text_layer_kind
from profilers.trt_import.text_profile import PROFILE_HEADING
from sessions.errors import InputError

MAX_FILES = 1000  # a folder of TensorRT files, not a home directory


@dataclass
class FolderImport:
    files: ImportFiles
    taken: list[Path]
    left: list[Path]  # files of no kind this tool reads, or of another engine


def _log_kinds(path: Path) -> list[str]:
    """What a text file holds: `metadata` (trtexec's options), `log-layers`, `log-profile`; empty for none."""
    try:
        text = documents.read_text(path, "file")
    except InputError:
        return []
    kinds = ["metadata"] if any(mark in text[:LOG_HEAD] for mark in LOG_MARKS) else []
    if text_layer_kind(text):
        kinds.append("log-layers")
    if PROFILE_HEADING.search(text):
        kinds.append("log-profile")
    return kinds


def _kind(path: Path) -> str | None:
    """layers | profile | times | metadata (JSON), or None for a file this tool does not read as JSON."""
    try:
        kind = file_kind(documents.read_json(path, "file"))
    except InputError:
        return None
    if kind is None:
        return None
    if kind.startswith("layer information"):
        return "layers"
    if "--exportProfile" in kind or kind == SAMPLES_KIND:
        return "profile"
    if "--exportTimes" in kind:
        return "times"
    return "metadata" if "--metadata" in kind else None


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
    kinds: dict[str, list[Path]] = {}
    for path in paths:
        for kind in _log_kinds(path) if is_text(path) else [_kind(path)]:
            if kind:
                kinds.setdefault(kind, []).append(path)
    for kind in ("layers", "profile"):  # a log's layer block or profile table where no JSON file gives them
        if not kinds.get(kind) and kinds.get(f"log-{kind}"):
            kinds[kind] = kinds[f"log-{kind}"]
    mains = kinds.get("layers") or kinds.get("profile") or []
    if not mains:
        raise InputError(f"{folder}: no layer information or profile file found")
    if len(mains) > 1:
        names = ", ".join(p.name for p in mains[:6]) + (" ..." if len(mains) > 6 else "")
        raise InputError(f"{folder} holds {len(mains)} engines ({names}): pass the files of one with --layers / --profile")
    main = mains[0]
    stem = engine_stem(main)
    layers = main if "layers" in kinds else None
    profile = _pick(kinds.get("profile", []), stem) if layers is not None else main
    times = _pick(kinds.get("times", []), stem)
    metadata = [p for p in kinds.get("metadata", []) if engine_stem(p) == stem or len(kinds.get("metadata", [])) == 1]
    taken = list(dict.fromkeys(p for p in (layers, profile, times, *metadata) if p is not None))  # a log may be several
    return FolderImport(ImportFiles(layers, profile, times, metadata, find_metadata=False), taken,
                        [p for p in paths if p not in taken])
