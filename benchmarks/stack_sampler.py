"""Where a trt-inspect command spends its wall time: the command runs in this process while a thread samples the
main thread's Python stack every 5 ms (each sample weighs the seconds since the last one, so a C call that holds the
interpreter lock is charged to the stack seen when it lets go); prints the functions with the most seconds on the
stack (inclusive) and at its top (own), then the call tree from the command's entry down (every call path with at
least TREE_MIN_S seconds, indented by depth). A few per cent of overhead; C calls are charged to the Python function
that made them.

    python benchmarks/stack_sampler.py REPORT.txt senet154 --out s.json    (the arguments of trt-inspect)
"""

from __future__ import annotations

import collections
import os
import sys
import threading
import time

INTERVAL_S = 0.005
TOP = 60
TREE_MIN_S = 0.05
TREE_ROOT = "main  inspector/cli.py"  # the tree starts at the command's entry (the sampler's own frames above it)


def _import_roots() -> list[str]:
    """The folders modules are imported from (this project, site folders, the standard library), longest first."""
    roots = {os.path.abspath(p or os.curdir) for p in sys.path} | {os.path.dirname(os.__file__)}
    return sorted((root + os.sep for root in roots), key=len, reverse=True)


_ROOTS = _import_roots()


def _key(code) -> str:
    """A function by name and file, the file relative to the folder it was imported from (no machine's paths)."""
    name = code.co_filename
    relative = next((name[len(root):] for root in _ROOTS if name.startswith(root)), name)
    return f"{code.co_name}  {relative}:{code.co_firstlineno}"


def _sample(stop: threading.Event, inclusive: collections.Counter, own: collections.Counter,
            paths: collections.Counter) -> None:
    main_id = threading.main_thread().ident
    last = time.perf_counter()
    while not stop.wait(INTERVAL_S):
        frame = sys._current_frames().get(main_id)
        now = time.perf_counter()
        weight, last = now - last, now
        if frame is None:
            continue
        own[_key(frame.f_code)] += weight
        seen = set()
        stack = []
        while frame is not None:
            key = _key(frame.f_code)
            stack.append(key)
            if key not in seen:
                inclusive[key] += weight
                seen.add(key)
            frame = frame.f_back
        stack.reverse()
        for depth in range(len(stack)):  # every prefix of the path: the tree's inclusive seconds
            paths[tuple(stack[: depth + 1])] += weight


def _tree(paths: collections.Counter) -> list[str]:
    """Call paths below TREE_ROOT with at least TREE_MIN_S seconds, depth first, children by seconds."""
    start = next((i for path in paths for i, key in enumerate(path) if key.startswith(TREE_ROOT)), None)
    if start is None:
        return []
    children: dict[tuple, list[tuple]] = collections.defaultdict(list)
    for path, seconds in paths.items():
        if len(path) > start and seconds >= TREE_MIN_S:
            children[path[:-1]].append(path)
    lines: list[str] = []

    def walk(path: tuple) -> None:
        lines.append(f"{paths[path]:8.2f}  {'  ' * (len(path) - start - 1)}{path[-1]}")
        for child in sorted(children[path], key=paths.__getitem__, reverse=True):
            walk(child)

    for root in sorted((p for p in paths if len(p) == start + 1 and paths[p] >= TREE_MIN_S), key=paths.__getitem__,
                       reverse=True):
        walk(root)
    return lines


def main() -> int:
    report, argv = sys.argv[1], sys.argv[2:]
    inclusive: collections.Counter = collections.Counter()
    own: collections.Counter = collections.Counter()
    paths: collections.Counter = collections.Counter()
    stop = threading.Event()
    sampler = threading.Thread(target=_sample, args=(stop, inclusive, own, paths), daemon=True)
    start = time.perf_counter()
    sampler.start()
    from inspector.cli import main as trt_inspect

    code = trt_inspect(argv)
    stop.set()
    sampler.join()
    wall = time.perf_counter() - start
    with open(report, "w") as out:
        out.write(f"trt-inspect {' '.join(argv)}: exit {code}, {wall:.1f} s wall\n")
        for title, counts in (("inclusive", inclusive), ("own", own)):
            out.write(f"\n{title} seconds\n")
            out.writelines(f"{seconds:8.2f}  {key}\n" for key, seconds in counts.most_common(TOP))
        out.write(f"\ncall tree (paths with at least {TREE_MIN_S} s)\n")
        out.writelines(line + "\n" for line in _tree(paths))
    return code


if __name__ == "__main__":
    sys.exit(main())
