"""Record what the read-only commands print on the committed sessions, and compare two records byte for byte.

A refactor of the reports should leave every figure and word as it was: record before, change, record again,
compare. Recorded, for every session file (`benchmarks/results/h200/*.json`, `benchmarks/results/cpu/*.json` and
the tests' session fixtures under `tests/data/`): `export --format md`, `csv`, `json` and `study`, `show`,
`show --layers` and `groups`; `export --format study` of all the sessions of each results folder; and `--help` of
the CLI and of each of its commands. Each output is one file holding the exit status, stdout and stderr. Commands
run in the checkout given (an unpacked `git archive` of another commit works too), with session paths relative to
it, so two checkouts record the same bytes.

    python benchmarks/output_identity.py record /tmp/identity/before            # from this checkout
    python benchmarks/output_identity.py record /tmp/identity/after --repo DIR  # from another checkout
    python benchmarks/output_identity.py compare /tmp/identity/before /tmp/identity/after

`compare` lists each output that differs, or is in one record only, and exits 1 if any does.
"""

from __future__ import annotations

import argparse
import difflib
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SESSION_GLOBS = ("benchmarks/results/h200/*.json", "benchmarks/results/cpu/*.json", "tests/data/**/*.json")
SESSION_COMMANDS = {  # output file suffix -> the command's arguments after the session
    "export-md": ("export", "--format", "md"),
    "export-csv": ("export", "--format", "csv"),
    "export-json": ("export", "--format", "json"),
    "export-study": ("export", "--format", "study"),
    "show": ("show",),
    "show-layers": ("show", "--layers"),
    "groups": ("groups",),
}
ENV = {"COLUMNS": "100", "LINES": "40", "NO_COLOR": "1", "PYTHONHASHSEED": "0"}  # the same width and hashing each run


def session_files(repo: Path) -> list[str]:
    """The session files under `repo`, relative to it, sorted: every JSON file of the globs whose top level has a
    `study` and `variants` (the fixtures also hold traces and TensorRT files, which are no sessions)."""
    import json

    found = []
    for pattern in SESSION_GLOBS:
        for path in repo.glob(pattern):
            try:
                document = json.loads(path.read_text())
            except (UnicodeDecodeError, ValueError):
                continue
            if isinstance(document, dict) and "study" in document and "variants" in document:
                found.append(path.relative_to(repo).as_posix())
    return sorted(set(found))


def commands(repo: Path) -> dict[str, list[str]]:
    """Each output's file name -> the `python -m inspector` arguments that print it."""
    names = subprocess.run([sys.executable, "-c", "from inspector.cli import COMMANDS; print(*COMMANDS)"], cwd=repo,
                           capture_output=True, text=True, check=True).stdout.split()
    runs = {"help.txt": ["--help"]} | {f"help-{name}.txt": [name, "--help"] for name in names}
    for session in session_files(repo):
        stem = session.replace("/", "__")
        for suffix, args in SESSION_COMMANDS.items():
            runs[f"{stem}.{suffix}.txt"] = [args[0], session, *args[1:]]
    for folder in ("benchmarks/results/h200", "benchmarks/results/cpu"):  # the study section of several sessions
        several = [session for session in session_files(repo) if session.startswith(folder + "/")]
        runs[f"{folder.replace('/', '__')}.export-study-all.txt"] = ["export", *several, "--format", "study"]
    return runs


def run_one(repo: Path, args: list[str]) -> bytes:
    """The exit status, stdout and stderr of `python -m inspector ARGS` run in `repo`, as one byte string."""
    done = subprocess.run([sys.executable, "-m", "inspector", *args], cwd=repo, capture_output=True,
                          env={**os.environ, **ENV}, check=False)
    return b"exit %d\n--- stdout\n%s--- stderr\n%s" % (done.returncode, done.stdout, done.stderr)


def record(out: Path, repo: Path, jobs: int) -> None:
    """Write every output of `commands` into `out` (which must not exist yet)."""
    out.mkdir(parents=True)
    runs = commands(repo)
    with ThreadPoolExecutor(jobs) as pool:
        for name, text in zip(runs, pool.map(lambda args: run_one(repo, args), runs.values()), strict=True):
            (out / name).write_bytes(text)
    print(f"{len(runs)} outputs in {out}")


def compare(before: Path, after: Path) -> int:
    """Print each file of two records (folders, searched to any depth) that differs (with a short diff) or is in one
    record only; 1 if any, else 0."""
    names_before = {p.relative_to(before) for p in before.rglob("*") if p.is_file()}
    names_after = {p.relative_to(after) for p in after.rglob("*") if p.is_file()}
    changed = 0
    for name in sorted(names_before | names_after):
        if name not in names_after or name not in names_before:
            print(f"only in {before if name in names_before else after}: {name}")
            changed += 1
            continue
        a, b = (before / name).read_bytes(), (after / name).read_bytes()
        if a != b:
            changed += 1
            print(f"differs: {name}")
            diff = difflib.unified_diff(a.decode(errors="replace").splitlines(),
                                        b.decode(errors="replace").splitlines(), lineterm="", n=1)
            print("\n".join(list(diff)[:40]))
    print(f"{len(names_before | names_after)} files, {changed} differ")
    return 1 if changed else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="action", required=True)
    rec = sub.add_parser("record")
    rec.add_argument("out", type=Path)
    rec.add_argument("--repo", type=Path, default=ROOT, help="the checkout to run the commands in")
    rec.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    cmp = sub.add_parser("compare")
    cmp.add_argument("before", type=Path)
    cmp.add_argument("after", type=Path)
    args = parser.parse_args()
    if args.action == "record":
        record(args.out, args.repo.resolve(), args.jobs)
        return 0
    return compare(args.before, args.after)


if __name__ == "__main__":
    sys.exit(main())
