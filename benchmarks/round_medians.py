"""Each timed variant's round medians, as per cent off its median, from sessions or tar archives of sessions.

    python benchmarks/round_medians.py [LABEL=]SOURCE ...

A SOURCE is a session file or a `.tar.gz` holding session files (as the device's result folders keep them); one line
per variant: the source's label, the session's name, the variant, then its rounds in order. A round
that runs slow or fast against the variant's others shows as a column off zero (the first round after a change of
warm-up, the rounds where a variant follows another neighbour).
"""

from __future__ import annotations

import argparse
import json
import tarfile
from collections.abc import Iterator
from pathlib import Path


def sessions(source: Path) -> Iterator[tuple[str, dict]]:
    """(name, session) for a session file, or for every `.json` member of a tar archive, in name order."""
    if source.suffix != ".gz":
        yield source.stem, json.loads(source.read_text())
        return
    with tarfile.open(source) as archive:
        for member in sorted(archive.getmembers(), key=lambda m: m.name):
            handle = archive.extractfile(member) if member.name.endswith(".json") else None
            if handle is not None:
                yield Path(member.name).stem, json.load(handle)


def lines(label: str, name: str, session: dict) -> Iterator[str]:
    for variant in session["variants"]:
        latency = variant.get("latency")
        if not latency or not latency.get("round_medians_ms"):
            continue
        median = latency["median_ms"]
        rounds = " ".join(f"{100 * (r / median - 1):+.2f}" for r in latency["round_medians_ms"])
        yield f"{label:11} {name:22} {variant['name']:16} {rounds}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sources", nargs="+", metavar="[LABEL=]SOURCE",
                        help="a session file or a .tar.gz archive of them, with a label for its lines")
    for item in parser.parse_args().sources:
        label, _, source = item.rpartition("=")
        for name, session in sessions(Path(source)):
            for line in lines(label, name, session):
                print(line)


if __name__ == "__main__":
    main()
