"""Where a trt-inspect command spends its wall time: the command runs in this process while a thread samples the
main thread's Python stack every 5 ms (each sample weighs the seconds since the last one, so a C call that holds the
interpreter lock is charged to the stack seen when it lets go); prints the functions with the most seconds on the
stack (inclusive) and at its top (own). A few per cent of overhead; C calls are charged to the Python function that
made them.

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


def _sample(stop: threading.Event, inclusive: collections.Counter, own: collections.Counter) -> None:
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
        while frame is not None:
            key = _key(frame.f_code)
            if key not in seen:
                inclusive[key] += weight
                seen.add(key)
            frame = frame.f_back


def main() -> int:
    report, argv = sys.argv[1], sys.argv[2:]
    inclusive: collections.Counter = collections.Counter()
    own: collections.Counter = collections.Counter()
    stop = threading.Event()
    sampler = threading.Thread(target=_sample, args=(stop, inclusive, own), daemon=True)
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
    return code


if __name__ == "__main__":
    sys.exit(main())
