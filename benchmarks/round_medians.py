"""Each timed variant's round medians, as per cent off its median, from sessions or tar archives of sessions.

    python benchmarks/round_medians.py [LABEL=]SOURCE ...

A SOURCE is a session file or a `.tar.gz` holding session files (as the device's result folders keep them); one line
per variant: the source's label, the session's name, the variant, then its rounds in order. A round that runs slow or
fast against the variant's others shows as a column off zero (the first round after a change of warm-up, the rounds
where a variant follows another neighbour).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from session_rounds import sessions_at


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sources", nargs="+", metavar="[LABEL=]SOURCE",
                        help="a session file or a .tar.gz archive of them, with a label for its lines")
    for item in parser.parse_args().sources:
        label, _, source = item.rpartition("=")
        for path, session in sessions_at(Path(source)):
            for variant in session.variants:
                latency = variant.latency
                if latency is None or not latency.round_medians_ms:
                    continue
                rounds = " ".join(f"{100 * (r / latency.median_ms - 1):+.2f}" for r in latency.round_medians_ms)
                print(f"{label:11} {path.stem:22} {variant.name:16} {rounds}")


if __name__ == "__main__":
    main()
