"""`import DIR` of a folder holding one trtexec log of 100,000 layers: wall and CPU seconds and peak
memory of the command, in a child process of the checkout given.

    python benchmarks/trt_import_large_log.py [--checkout PATH] [--layers N] [--repeat N] [--stages]

The log repeats a real TensorRT 10.16 `--dumpLayerInfo` record (`trt10.16-mnist-cnn-fp32-h100/result-04.log`, 1 KB a
layer) with numbered names, then a `--dumpProfile` table of the same layers and its Total: the format is
trtexec's, the engine is not one. `--checkout` runs another checkout's code on the same file (an earlier commit's
worktree), so two figures compare on one machine; `--repeat` runs the command that many times, a line each (on a
shared machine the least CPU time is the one least inflated by the others' work), after one uncounted run that
writes the modules' bytecode, as an installed tool has it (peak RSS: the largest of the command's runs so far,
that one's included, as the OS counts its waited-for children). `--stages` adds a line of each
stage's CPU seconds in one process (`STAGES`): the folder classified, the import, the session's encode
(`storage.encode_in_slices`, or `storage.encode` in a checkout without it), its save check (`storage.check_encoded`,
or in a checkout without it `storage.check_loads`, or `storage.decode`), the file written, and the session freed.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT.parent / "shared" / "fixtures" / "trt" / "trt10.16-mnist-cnn-fp32-h100" / "result-04.log"


def write_log(path: Path, layers: int) -> None:
    lines = SOURCE.read_text().split("\n")
    record = next(line for line in lines if line.startswith("Name: node_conv2d + node_relu,"))
    head = lines[:lines.index(next(line for line in lines if line.endswith("] Layer Information:")))]
    stamp = "[07/07/2026-02:11:38] [I] "
    with path.open("w") as out:
        out.write("\n".join(head) + f"\n{stamp}Layer Information:\n{stamp}Layers:\n")
        previous = "x"
        for i in range(layers):
            out.write(record.replace("node_conv2d + node_relu", f"node_conv2d_{i} + node_relu_{i}")
                      .replace("Name: x,", f"Name: {previous},").replace("Name: relu,", f"Name: relu_{i},") + "\n")
            previous = f"relu_{i}"
        out.write(f"Bindings:\nx\nrelu_{layers - 1}\n{stamp}=== Profile (100 iterations ) ===\n"
                  f"{stamp}   Time(ms)     Avg.(ms)   Median(ms)   Time(%)   Layer\n")
        for i in range(layers):
            out.write(f"{stamp}       1.00       0.0100       0.0100       0.0   node_conv2d_{i} + node_relu_{i}\n")
        out.write(f"{stamp}  {layers:.2f}       {layers / 100:.4f}       {layers / 100:.4f}     100.0   Total\n"
                  f"{stamp}\n")


STAGES = """
import gc, sys, time
from pathlib import Path
import inspector.commands.import_files as command
from profilers.trt_import.folder import files_of_folder
from profilers.trt_import.importer import import_variant, new_session
from sessions.documents import storage
clock, times = time.process_time, {}
start = clock(); found = files_of_folder(Path(sys.argv[1]), None); times["classify"] = clock() - start
engine = found.engines[0]
start = clock()
imported = import_variant(engine.files, engine.name, None, None, folder_model=found.model)
times["import"] = clock() - start
session = new_session(imported, ["trt-inspect"])
command._add(session, [imported], False)
if hasattr(storage, "check_encoded"):
    start = clock(); encoded = storage.encode_in_slices(session); times["encode"] = clock() - start
    start = clock(); storage.check_encoded(encoded, "s"); times["save check"] = clock() - start
    data = encoded.data
    del encoded
else:
    start = clock(); data = storage.encode(session); times["encode"] = clock() - start
    start = clock(); getattr(storage, "check_loads", storage.decode)(data, "s"); times["save check"] = clock() - start
start = clock(); storage.write_atomically(Path(sys.argv[2]), data); times["write"] = clock() - start
start = clock(); del session, imported, data; gc.collect(); times["free"] = clock() - start
print("stages (CPU s)\t" + "\t".join(f"{name} {seconds:.2f}" for name, seconds in times.items()))
"""


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--checkout", type=Path, default=ROOT)
    parser.add_argument("--layers", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--stages", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        folder = Path(work) / "engine"
        folder.mkdir()
        write_log(folder / "big.log", args.layers)
        size = (folder / "big.log").stat().st_size
        commit = subprocess.run(["git", "-C", str(args.checkout), "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True, check=False).stdout.strip()
        print(f"# {args.checkout.name} at {commit or 'unknown'}; "
              f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
        # bytecode kept as an installed tool keeps it (this workplace sets PYTHONDONTWRITEBYTECODE, which recompiles
        # every module at every start): written under the run's folder by a first, uncounted import
        env = {**os.environ, "PYTHONPATH": str(args.checkout), "PYTHONPYCACHEPREFIX": f"{work}/bytecode"}
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        subprocess.run([sys.executable, "-m", "inspector", "import", str(folder), "--out", f"{work}/warm-up.json"],
                       cwd=args.checkout, capture_output=True, check=False, env=env)
        for run in range(args.repeat):
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            start = time.perf_counter()
            done = subprocess.run([sys.executable, "-m", "inspector", "import", str(folder), "--out",
                                   f"{work}/s{run}.json"], cwd=args.checkout, capture_output=True, text=True,
                                  check=False, env=env)
            wall = time.perf_counter() - start
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
            print(f"import_dir_{args.layers}_layer_log\twall {wall:.1f} s\tCPU {cpu:.1f} s "
                  f"(user {after.ru_utime - before.ru_utime:.1f}, system {after.ru_stime - before.ru_stime:.1f})\t"
                  f"peak RSS {after.ru_maxrss / 2**10:.0f} MiB\t{size / 2**20:.0f} MiB log\texit {done.returncode}")
            if done.returncode:
                print(f"# {done.stderr.strip().splitlines()[-1] if done.stderr.strip() else 'no message'}")
        if args.stages:
            staged = subprocess.run([sys.executable, "-c", STAGES, str(folder), f"{work}/staged.json"],
                                    cwd=args.checkout, capture_output=True, text=True, check=False, env=env)
            print(staged.stdout.strip() or f"# stages failed: {staged.stderr.strip()[-300:]}")


if __name__ == "__main__":
    main()
