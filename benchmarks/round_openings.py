"""Which turns of a study's rounds run slow: each timed variant's round medians against the median of its round
medians, counted by what came before the turn, over sessions or tar archives of sessions.

    python benchmarks/round_openings.py [LABEL=]SOURCE ...

A SOURCE is a session file or a `.tar.gz` holding session files (as the device's result folders keep them). A turn is
the study's first (the first variant of the first round: it follows the warm-ups and, before them, the GPU idle while
graphs were made and traced), a later round's opening (the variant the round before closed on, after the pause in
which that round was reported: the rounds alternate their order, `profilers.timing.round_order`), or a turn after a
switch of variant. Per label and kind of turn: how many round medians lie more than `OFF` above or below their
variant's median of round medians, variants shorter than `MIN_MEDIAN_MS` left out (as the spread targets leave them).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

from session_rounds import sessions_at
from small_model_spread import MIN_MEDIAN_MS

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's timing rules

from profilers.timing import round_order

OFF = 0.002  # a round median this far off its variant's median of round medians counts
KINDS = ("first turn", "a later round's opening", "after a switch")


def kind_of(round_index: int, position: int) -> str:
    """What came before the turn at `position` of round `round_index` (both from 0)."""
    if position == 0:
        return KINDS[0] if round_index == 0 else KINDS[1]
    return KINDS[2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sources", nargs="+", metavar="[LABEL=]SOURCE",
                        help="a session file or a .tar.gz archive of them, with a label for its lines")
    print(f"| label | turn | round medians | more than {100 * OFF:g} % slow | more than {100 * OFF:g} % fast | "
          "slow ones (session variant round: per cent) |")
    print("|---|---|---:|---:|---:|---|")
    counts: dict[tuple[str, str], list[int]] = {}
    slow: dict[tuple[str, str], list[str]] = {}
    labels: list[str] = []
    for item in parser.parse_args().sources:
        label, _, source = item.rpartition("=")
        label = label or source
        labels += [] if label in labels else [label]
        for path, session in sessions_at(Path(source)):
            names = [v.name for v in session.variants if v.latency is not None and v.latency.round_medians_ms]
            for variant in session.variants:
                latency = variant.latency
                if variant.name not in names or latency is None or latency.median_ms < MIN_MEDIAN_MS:
                    continue
                middle = statistics.median(latency.round_medians_ms)
                for index, value in enumerate(latency.round_medians_ms):
                    kind = kind_of(index, round_order(names, index).index(variant.name))
                    off = value / middle - 1
                    tally = counts.setdefault((label, kind), [0, 0, 0])
                    tally[0] += 1
                    tally[1] += off > OFF
                    tally[2] += off < -OFF
                    if off > OFF:
                        slow.setdefault((label, kind), []).append(f"{path.stem} {variant.name} {index + 1}: "
                                                                   f"{100 * off:+.2f}")
    for label in labels:
        for kind in KINDS:
            total, above, below = counts.get((label, kind), [0, 0, 0])
            print(f"| {label} | {kind} | {total} | {above} | {below} | {'; '.join(slow.get((label, kind), []))} |")


if __name__ == "__main__":
    main()
