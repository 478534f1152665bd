"""A verdict from summed per-layer times, for sessions that hold no end-to-end time (imported profiles).

The comparison itself stays `sessions.analyses.verdict.verdicts`: this module only stands each variant's sum of
layer times in for its median, on a copy of the session, and says so in `LAYER_SUM_BASIS`.
"""

from __future__ import annotations

from dataclasses import replace

from sessions.analyses.groups import Rules
from sessions.analyses.summary import layer_sum_ms
from sessions.analyses.verdict import Verdict, verdicts
from sessions.documents.model import LatencyStats, Session, Variant

LAYER_SUM_BASIS = ("from summed per-layer times: no end-to-end time recorded, "
                   "and a sum leaves out launch gaps and overlap")


def layer_time_session(session: Session) -> Session | None:
    """A copy of `session` whose variants' medians are their summed layer times.

    None unless no variant has a latency and at least two finished variants have layer times: sums
    are never set against end-to-end medians.
    """
    if any(v.latency is not None for v in session.variants):
        return None
    variants = [_with_layer_sum(v) for v in session.variants]
    if sum(v.latency is not None and v.status == "ok" for v in variants) < 2:
        return None
    return replace(session, variants=variants)


def _with_layer_sum(variant: Variant) -> Variant:
    total = layer_sum_ms(variant)
    if total is None or total <= 0:
        return variant
    stats = LatencyStats(samples_ms=[total], min_ms=total, median_ms=total, mean_ms=total, p90_ms=total,
                         p99_ms=total, max_ms=total, std_ms=0.0, cov=0.0)
    return replace(variant, latency=stats)


def layer_time_verdicts(session: Session, rules: Rules) -> list[Verdict]:
    """`verdicts` on the summed layer times; empty where the session has end-to-end times (or too few sums)."""
    stand_in = layer_time_session(session)
    return verdicts(stand_in, rules) if stand_in is not None else []


def layer_time_lines(session: Session, rules: Rules) -> list[str]:
    """The layer-time verdicts as lines that say what they stand on (what `show` prints after the table)."""
    return [f"{v.text} ({LAYER_SUM_BASIS})" for v in layer_time_verdicts(session, rules)]
