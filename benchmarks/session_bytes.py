"""The bytes a checkout saves, recorded so that two checkouts compare byte for byte: a change to the session's
encode, its save check or the importers' parsing must leave every saved session as it was.

    python benchmarks/session_bytes.py record /tmp/bytes/before --checkout DIR  # another checkout's code
    python benchmarks/session_bytes.py record /tmp/bytes/after                  # this checkout's code
    python benchmarks/session_bytes.py compare /tmp/bytes/before /tmp/bytes/after

Recorded, each with the checkout's own code run in a child process:

- `resaved/`: every committed session under `benchmarks/results/` (of this checkout, so both records read the
  same files), loaded and saved again (`storage.load`, `storage.save`);
- `imports/`: `import FOLDER --out NAME.json` of every folder of real TensorRT files under `shared/fixtures/trt/`
  and of a folder holding the generated trtexec log of `trt_import_large_log` (`--layers`, 100,000 by default):
  the saved session (its `created` time and `tool_commit` masked: they differ from run to run), and the exit
  status, stdout and stderr of the import and of `show` on it.

`compare` lists each file that differs or is in one record only, and exits 1 if any does.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from output_identity import compare
from trt_import_large_log import write_log

FIXTURES = ROOT.parent / "shared" / "fixtures" / "trt"
RESULTS = ROOT / "benchmarks" / "results"
RUN_STAMPS = re.compile(rb'"(created|tool_commit)":(?:"[^"]*"|null)')  # what differs between two runs of one import
RESAVE = """
import sys
from pathlib import Path
from sessions.documents.errors import InputError
from sessions.documents.storage import load, save
for source, target in zip(sys.argv[1::2], sys.argv[2::2], strict=True):
    try:
        save(load(source), Path(target))
    except InputError as exc:
        Path(target + ".error").write_text(exc.message + "\\n")
"""


def session_files() -> list[Path]:
    """The committed session files under benchmarks/results/ (JSON files whose top level has `study` and
    `variants`), sorted."""
    import orjson

    found = []
    for path in sorted(RESULTS.rglob("*.json")):
        try:
            document = orjson.loads(path.read_bytes())
        except orjson.JSONDecodeError:
            continue
        if isinstance(document, dict) and "study" in document and "variants" in document:
            found.append(path)
    return found


def _child(checkout: Path, args: list[str], cwd: Path) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, *args], cwd=cwd, capture_output=True, check=False,
                          env={**os.environ, "PYTHONPATH": str(checkout), "COLUMNS": "100", "NO_COLOR": "1",
                               "PYTHONHASHSEED": "0"})


def _outcome(done: subprocess.CompletedProcess[bytes]) -> bytes:
    return b"exit %d\n--- stdout\n%s--- stderr\n%s" % (done.returncode, done.stdout, done.stderr)


def record(out: Path, checkout: Path, layers: int) -> None:
    """Write the resaved sessions and the imports of `checkout`'s code into `out` (which must not exist yet)."""
    resaved, imports = out / "resaved", out / "imports"
    resaved.mkdir(parents=True)
    imports.mkdir()
    pairs = [(str(path), str(resaved / path.relative_to(RESULTS).as_posix().replace("/", "__")))
             for path in session_files()]
    done = _child(checkout, ["-c", RESAVE, *(each for pair in pairs for each in pair)], out)
    if done.returncode:
        raise SystemExit(done.stderr.decode(errors="replace"))
    large = imports / "large"
    large.mkdir()
    write_log(large / "big.log", layers)
    folders = {"large": "large"} | {path.name: str(path) for path in sorted(FIXTURES.iterdir()) if path.is_dir()}
    for name, folder in folders.items():  # relative names: the command each session keeps is the same in both
        outcome = _outcome(_child(checkout, ["-m", "inspector", "import", folder, "--out", f"{name}.json"], imports))
        saved = imports / f"{name}.json"
        if saved.exists():
            saved.write_bytes(RUN_STAMPS.sub(rb'"\1":"masked"', saved.read_bytes()))
            outcome += _outcome(_child(checkout, ["-m", "inspector", "show", saved.name], imports))
        (imports / f"{name}.outcome.txt").write_bytes(outcome)
    (large / "big.log").unlink()
    large.rmdir()
    print(f"{len(pairs)} sessions resaved, {len(folders)} folders imported into {out}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="action", required=True)
    rec = sub.add_parser("record")
    rec.add_argument("out", type=Path)
    rec.add_argument("--checkout", type=Path, default=ROOT, help="the checkout whose code runs")
    rec.add_argument("--layers", type=int, default=100_000)
    cmp = sub.add_parser("compare")
    cmp.add_argument("before", type=Path)
    cmp.add_argument("after", type=Path)
    args = parser.parse_args()
    if args.action == "record":
        record(args.out.resolve(), args.checkout.resolve(), args.layers)
        return 0
    return compare(args.before, args.after)


if __name__ == "__main__":
    sys.exit(main())
