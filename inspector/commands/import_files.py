"""`trt-inspect import`: a session (or one more variant of one) from trtexec / engine-inspector JSON files."""

from __future__ import annotations

import argparse
from typing import Any

from inspector.commands.output import err, print_session
from inspector.options import argument_type
from sessions.documents.errors import ExitCode, InputError
from sessions.documents.options import option

NAME = "import"


def add_parser(sub: Any) -> None:
    sub.add_parser(NAME, help="make a session from trtexec / engine-inspector JSON files", arguments=_add_arguments)


def _add_arguments(p: argparse.ArgumentParser) -> None:
    """The command's arguments, a flag for each file role the importers register (`profilers.trt_import.kinds`):
    added when the command's line is parsed (`cli._Parser`), since reading the registry imports the importers."""
    from profilers.trt_import.kinds import roles

    p.add_argument("folder", nargs="?", help="a folder holding the files of one engine (found by name and content)")
    for role in roles():
        if role.repeatable:
            p.add_argument(role.flag, action="append", default=[], metavar=role.metavar, help=role.help)
        else:
            p.add_argument(role.flag, help=role.help)
    p.add_argument("--no-metadata-search", action="store_true", help="do not read metadata files found beside the layer file")
    p.add_argument("--name", type=_name, help="variant name (default: from the file name)")
    p.add_argument("--model", help="model name, where the files do not say it (default: trtexec's model option, else the file name)")
    p.add_argument("--batch", type=argument_type(option("batch")), help="batch size, where the files do not give the input shape")
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

    from profilers.trt_import.folder import files_of_folder
    from profilers.trt_import.importer import check_joinable, import_variant, new_session
    from profilers.trt_import.kinds import ImportFiles, roles
    from sessions.documents.paths import session_file
    from sessions.documents.storage import LOCK_WAIT_S, load, resolve, session_writer

    single = [role for role in roles() if not role.repeatable]
    if args.folder and any(getattr(args, role.name) for role in single):
        raise InputError(f"give a folder or {' / '.join(role.flag for role in single)}, not both")
    if not args.folder and not args.layers and not args.profile:
        raise InputError("import needs a folder, --layers, --profile or both")
    found = files_of_folder(Path(args.folder)) if args.folder else None
    files = found.files if found else ImportFiles({role.name: [Path(getattr(args, role.name))] for role in single
                                                   if getattr(args, role.name)}, not args.no_metadata_search)
    for role in roles():
        if role.repeatable:
            files.add(role.name, [Path(each) for each in getattr(args, role.name)])
    imported = import_variant(files, args.name, args.model, args.batch)
    variant = imported.variant
    if found:
        variant.notes.insert(0, f"from {args.folder}: took {', '.join(p.name for p in found.taken)}; "
                                f"left {', '.join(p.name for p in found.left) or 'nothing'}")
    variant.command = list(args.argv)
    if args.into:
        path = resolve(args.into)
        with session_writer(path, force=True, wait_s=LOCK_WAIT_S) as writer:  # read, add, write: one writer at a time
            session = load(path)
            if any(v.name == variant.name for v in session.variants):
                raise InputError(f"{path} already has a variant {variant.name!r}; pass --name")
            check_joinable(session, imported, args.force)
            session.variants.append(variant)
            writer.finish(session)
    else:
        session = new_session(imported, variant.command)
        created = dt.datetime.fromisoformat(session.study.created)
        path = session_file(args.out, session.study.model, created, "import", variant.name)
        session.variants.append(variant)
        with session_writer(path, args.force, LOCK_WAIT_S) as writer:
            writer.finish(session)
    if args.json:  # the text summary prints the notes
        for note in variant.notes:
            err(note)
    print_session(session, path, args.json)
    return ExitCode.OK
