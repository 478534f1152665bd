"""`trt-inspect import`: a session (or more variants of one) from trtexec / engine-inspector files.

A folder of one engine's files is one variant; a folder of several engines is a variant per engine (`--engine
PATTERN` keeps those whose name or a file's name matches), one session to compare them.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from inspector.commands.output import check_out, err, print_session
from inspector.options import argument_type
from sessions.documents.errors import ExitCode, InputError
from sessions.documents.options import option

if TYPE_CHECKING:
    from profilers.trt_import.importer import Imported
    from sessions.documents.model import Session

NAME = "import"


def add_parser(sub: Any) -> None:
    sub.add_parser(NAME, help="make a session from trtexec / engine-inspector JSON files", arguments=_add_arguments)


def _add_arguments(p: argparse.ArgumentParser) -> None:
    """The command's arguments, a flag for each file role the importers register (`profilers.trt_import.kinds`):
    added when the command's line is parsed (`cli._Parser`), since reading the registry imports the importers."""
    from profilers.trt_import.kinds import roles

    p.add_argument("folder", nargs="?", help="a folder of TensorRT files: one engine's, or several engines' (a variant "
                   "each); files found by content, paired by name and trtexec's --saveEngine / --loadEngine")
    p.add_argument("--engine", metavar="PATTERN", help="with a folder: only the engines whose variant name or a file's "
                   "name matches this shell pattern (e.g. 'gpu_*')")
    for role in roles():
        if role.repeatable:
            p.add_argument(role.flag, action="append", default=[], metavar=role.metavar, help=role.help)
        else:
            p.add_argument(role.flag, help=role.help)
    p.add_argument("--no-metadata-search", action="store_true",
                   help="do not read metadata files found beside the layer file")
    p.add_argument("--name", type=_name, help="variant name (default: from the file name)")
    p.add_argument("--model", help="model name, where the files do not say it "
                   "(default: trtexec's model option, else the file name)")
    p.add_argument("--batch", type=argument_type(option("batch")),
                   help="batch size, where the files do not give the input shape")
    p.add_argument("--force", action="store_true", help="with --into: join files of another model, batch or GPU; "
                   "with --out: replace the session there")
    target = p.add_mutually_exclusive_group()
    target.add_argument("--into", help="add the variant to this existing session")
    target.add_argument("--out", help="session file to write (default: the user-data folder)")
    p.add_argument("--json", action="store_true")


def _name(text: str) -> str:
    """A name, never a path: it becomes part of a file name in the sessions folder."""
    from inspector.request import check_name

    try:
        return check_name(text)
    except InputError as exc:
        raise argparse.ArgumentTypeError(exc.message) from None


def run(args: argparse.Namespace) -> int:
    import datetime as dt
    from pathlib import Path

    from profilers.trt_import.folder import Engine, files_of_folder
    from profilers.trt_import.importer import import_variant, new_session
    from profilers.trt_import.kinds import ImportFiles, roles
    from sessions.documents.paths import session_file
    from sessions.documents.storage import LOCK_WAIT_S, load, resolve, session_writer

    single = [role for role in roles() if not role.repeatable]
    if args.folder and any(getattr(args, role.name) for role in single):
        raise InputError(f"give a folder or {' / '.join(role.flag for role in single)}, not both")
    if not args.folder and not args.layers and not args.profile:
        raise InputError("import needs a folder, --layers, --profile or both")
    if args.engine is not None and not args.folder:
        raise InputError("--engine picks engines of a folder: give the folder")
    target = args.into or args.out or "the sessions folder"
    if not args.into:  # the file it writes, before any file is read (a 100 MB log takes seconds)
        try:
            check_out(args.out, "session", args.force, LOCK_WAIT_S)
        except OSError as exc:
            raise _unwritable(exc, target) from None
    found = files_of_folder(Path(args.folder), args.engine) if args.folder else None
    if found is not None and len(found.engines) > 1 and args.name:
        raise InputError(f"--name names one variant; {args.folder} holds {len(found.engines)} engines "
                         "(--engine keeps one)")
    engines = found.engines if found else [Engine(args.name, ImportFiles(
        {role.name: [Path(getattr(args, role.name))] for role in single if getattr(args, role.name)},
        not args.no_metadata_search))]
    imports = []
    for engine in engines:
        for role in roles():
            if role.repeatable:
                engine.files.add(role.name, [Path(each) for each in getattr(args, role.name)])
        imported = import_variant(engine.files, args.name or engine.name, args.model, args.batch,
                                  folder_model=found.model if found else None)
        if found:
            imported.variant.notes.insert(0, f"from {args.folder}: took {', '.join(engine.taken)}; "
                                             f"left {', '.join(found.left) or 'nothing'}")
        imported.variant.command = list(args.argv)
        imports.append(imported)
    variants = [imported.variant for imported in imports]
    try:
        if args.into:
            path = resolve(args.into)
            with session_writer(path, force=True, wait_s=LOCK_WAIT_S) as writer:  # read, add, write: one at a time
                session = load(path)
                _add(session, imports, args.force)
                writer.finish(session)
        else:
            session = new_session(imports[0], variants[0].command)
            created = dt.datetime.fromisoformat(session.study.created)
            named = variants[0].name if len(variants) == 1 else f"{len(variants)}-engines"
            path = session_file(args.out, session.study.model, created, "import", named)
            _add(session, imports, args.force)
            with session_writer(path, args.force, LOCK_WAIT_S) as writer:
                writer.finish(session)
    except OSError as exc:
        raise _unwritable(exc, target) from None
    if args.json:  # the text summary prints the notes
        for note in (note for variant in variants for note in variant.notes):
            err(note)
    print_session(session, path, args.json)
    return ExitCode.OK


def _unwritable(exc: OSError, target: str) -> InputError:
    """A folder without search or write permission, a name too long: the user's to fix, in one line."""
    return InputError(f"{exc.filename or target}: the session cannot be written there ({exc.strerror or exc})")


def _add(session: Session, imports: list[Imported], force: bool) -> None:
    """The imported variants added to `session`, each of its model, batch and GPU (or `force`), each name new."""
    from profilers.trt_import.importer import check_joinable

    for imported in imports:
        variant = imported.variant
        if any(v.name == variant.name for v in session.variants):
            raise InputError(f"the session already has a variant {variant.name!r}; pass --name")
        if session.variants:
            check_joinable(session, imported, force)
        session.variants.append(variant)
