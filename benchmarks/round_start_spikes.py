"""Where in its round does a slow sample fall? For every timed variant of the sessions given, each sample more than
`--over` above its variant's median, with its position in its round (0: the round's first sample after the discard
at the switch of variant). Prints one line per such sample and a count of those within `--near` samples of a round's
start.

    python benchmarks/round_start_spikes.py SESSION.json ... [--over 0.03] [--near 8]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's session reader

from session_rounds import timed_rounds

from sessions.analyses.noise import median


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sessions", nargs="+", type=Path)
    parser.add_argument("--over", type=float, default=0.03, help="a slow sample's excess over its median")
    parser.add_argument("--near", type=int, default=8, help="samples from a round's start counted as near it")
    args = parser.parse_args()
    slow = near = first = 0
    for timed in timed_rounds(args.sessions):
        samples = [sample for round_samples in timed.rounds for sample in round_samples]
        per_round, middle = len(timed.rounds[0]), median(samples)
        for index, sample in enumerate(samples):
            if sample > middle * (1 + args.over):
                slow, position = slow + 1, index % per_round
                near, first = near + (position < args.near), first + (position == 0)
                print(f"{timed.session.name}  {timed.variant}  sample {index} (round {index // per_round + 1}, "
                      f"position {position})  {sample / middle:.3f}x the median")
    print(f"{len(args.sessions)} sessions: {slow} samples over {args.over:.0%} above their median; {near} within "
          f"{args.near} samples of a round's start, {first} the first of their round")


if __name__ == "__main__":
    main()
