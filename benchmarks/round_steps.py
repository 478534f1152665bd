"""Do a variant's samples step within a round? For every timed variant of the sessions given, each round's per-sample
CoV and its largest step: over every split of the round's samples into a first part and the rest (each at least
`--least` samples), the largest difference of the two parts' means, in per cent of the round's mean, signed (+: the
rest slower), with the split's position (the first sample after the split, 0 being the round's first) and how far
into the round's samples it falls in milliseconds (the samples before it, each its inferences' mean times their
count). A level that moves within a round and holds to its end shows as a step much larger than the round's CoV;
noise alone gives steps of about the CoV.

    python benchmarks/round_steps.py SESSION.json ... [--least 2]
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from session_rounds import timed_rounds


def largest_step(samples: list[float], least: int) -> tuple[float, int]:
    """The largest mean(after) - mean(before) in magnitude over the splits leaving at least `least` samples on each
    side, in per cent of the mean of all, signed, and the index of the first sample after that split; (0.0, 0) where
    no split does."""
    whole = statistics.fmean(samples)
    steps = [((statistics.fmean(samples[cut:]) - statistics.fmean(samples[:cut])) / whole * 100, cut)
             for cut in range(least, len(samples) - least + 1)]
    return max(steps, key=lambda step: abs(step[0]), default=(0.0, 0))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sessions", nargs="+", type=Path)
    parser.add_argument("--least", type=int, default=2, help="samples at least on each side of a step")
    args = parser.parse_args()
    print("session  variant  per round: CoV % | largest step % @ position, ms into the round's samples")
    for timed in timed_rounds(args.sessions):
        cells = []
        for samples in timed.rounds:
            cov = statistics.pstdev(samples) / statistics.fmean(samples) * 100
            step, position = largest_step(samples, args.least)
            into_ms = sum(samples[:position]) * timed.inferences_per_sample
            cells.append(f"{cov:.2f} | {step:+.2f} @ {position}, {into_ms:.0f}")
        print(f"{timed.session.name}  {timed.variant}  " + "   ".join(cells))


if __name__ == "__main__":
    main()
