"""Which process made the semaphores multiprocessing's resource tracker calls leaked? A hook, installed into this
Python's site-packages, logs in every process of that Python each semaphore registered with or unregistered from the
tracker, with the stack that made it; the report lists those never unregistered, by command and making stack.

    python benchmarks/semaphore_log.py install      # then run the study (its workers are processes of this Python)
    python benchmarks/semaphore_log.py report       # what was registered and never unregistered
    python benchmarks/semaphore_log.py uninstall

The log is one file per process in $SEMAPHORE_LOG (default /tmp/semaphore-log). A semaphore the tracker warns of at
exit is one registered and never unregistered; the report counts those by the command line of the process that made
it and the last frames of the stack that made it.
"""

from __future__ import annotations

import argparse
import ast
import collections
import os
import re
import site
import sys
from pathlib import Path

MODULE = "trt_inspect_semaphore_log"
LOG_DIR = Path(os.environ.get("SEMAPHORE_LOG", "/tmp/semaphore-log"))
HOOK = '''"""Installed by benchmarks/semaphore_log.py: logs each semaphore registered with or unregistered from
multiprocessing's resource tracker, with its stack, one file per process."""


def _install():
    from multiprocessing import resource_tracker

    register, unregister = resource_tracker.register, resource_tracker.unregister

    def log(kind, name, rtype):
        import os
        import sys
        import traceback

        if rtype != "semaphore":
            return
        try:  # a log that cannot be written must not break the program it watches
            folder = os.environ.get("SEMAPHORE_LOG", "/tmp/semaphore-log")
            os.makedirs(folder, exist_ok=True)
            stack = "".join(traceback.format_stack(limit=14)[:-2])
            with open(os.path.join(folder, f"{os.getpid()}.txt"), "a") as out:
                out.write(f"== {kind} {name} pid={os.getpid()} ppid={os.getppid()} argv={sys.argv[:4]}\\n{stack}\\n")
        except Exception:
            pass

    def logged_register(name, rtype):
        log("register", name, rtype)
        return register(name, rtype)

    def logged_unregister(name, rtype):
        log("unregister", name, rtype)
        return unregister(name, rtype)

    resource_tracker.register, resource_tracker.unregister = logged_register, logged_unregister


_install()
'''
HEAD = re.compile(r"(register|unregister) (\S+) pid=(\d+) ppid=(\d+) argv=(.*)")
FRAME = re.compile(r'File "([^"]+)", line (\d+), in (\S+)')


def _site() -> Path:
    return Path(site.getsitepackages()[0])


def install() -> None:
    (_site() / f"{MODULE}.py").write_text(HOOK)
    (_site() / f"{MODULE}.pth").write_text(f"import {MODULE}\n")
    print(f"installed in {_site()}; logging to {LOG_DIR}")


def uninstall() -> None:
    for suffix in (".py", ".pth"):
        (_site() / f"{MODULE}{suffix}").unlink(missing_ok=True)


def _short(path: str) -> str:
    """An absolute path as its last two parts (`package/file.py`), so that a report names no machine's folders."""
    return "/".join(Path(path).parts[-2:]) if os.path.isabs(path) else path


def _command(argv: str) -> str:
    """A logged command line (the repr of a list of words) as words, its absolute paths shortened."""
    try:
        words = ast.literal_eval(argv)
    except (ValueError, SyntaxError):
        return argv
    return " ".join(_short(str(word)) for word in words)


def _frames(stack: str) -> list[str]:
    """A logged stack's frames as `package/file.py:line in function`, outermost first."""
    return [f"{_short(path)}:{line} in {function}" for path, line, function in FRAME.findall(stack)]


def report(folder: Path) -> None:
    """The semaphores registered and never unregistered, counted by command and by the frames that made them."""
    made: dict[str, tuple[str, str, str, str]] = {}  # name -> pid, parent pid, command line, stack
    ended: set[str] = set()
    for path in sorted(folder.glob("*.txt")):
        for block in re.split(r"^== ", path.read_text(), flags=re.MULTILINE)[1:]:  # a record opens a line
            head, _, stack = block.partition("\n")
            found = HEAD.match(head)
            if found is None:
                continue
            kind, name, pid, ppid, argv = found.groups()
            if kind == "register":
                made[name] = (pid, ppid, _command(argv), stack)
            else:
                ended.add(name)
    left = {name: what for name, what in made.items() if name not in ended}
    print(f"semaphores registered {len(made)}, unregistered {len(ended)}, never unregistered {len(left)}")
    pids = {pid for pid, _, _, _ in made.values()}
    by_command = collections.Counter(f"{argv}{' (a child process of one that logged)' if ppid in pids else ''}"
                                     for _, ppid, argv, _ in left.values())
    for command, count in by_command.most_common():
        print(f"  {count:4d}  made by {command}")
    by_stack = collections.Counter(" <- ".join(_frames(stack)[-6:][::-1]) for _, _, _, stack in left.values())
    for frames, count in by_stack.most_common(5):
        print(f"  {count:4d}  {frames}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=("install", "report", "uninstall"))
    parser.add_argument("folder", nargs="?", type=Path, default=LOG_DIR, help="the log folder (report)")
    args = parser.parse_args()
    if args.action == "install":
        install()
    elif args.action == "uninstall":
        uninstall()
    else:
        report(args.folder)
    return 0


if __name__ == "__main__":
    sys.exit(main())
