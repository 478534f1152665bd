"""The one rule for a time taken on subnormal values, and its words: where a CPU variant's sampled values
(`Variant.subnormal_values`, counted by `profilers.subnormal`) hold a large share below their dtype's smallest
normal, its time is the CPU's slow path for such values, not the model's: every speed-up against it says little.

A trained network's activations essentially never fall below fp32's 1.18e-38; random weights can shrink them there
layer after layer (an example: docs/evidence.md ("Grounds of rules in the code")). GPUs compute subnormals at full
speed, so the rule holds for CPU variants only. Views print the line `subnormal_line` makes: the variant table's notes
(`captions.session_caveats`) and the verdicts (`sessions.analyses.verdict`).
"""

from __future__ import annotations

from sessions.documents.model import Session, Variant

SHARE = 0.01  # subnormal share of the nonzero values sampled from which a CPU variant's time is said to be theirs
SUBNORMAL = (
    "{name} timed on subnormal values: {share:.1f} % of the nonzero values sampled from its activations lie below "
    "{dtype}'s smallest normal ({tiny:.3g}), which a CPU computes many times slower, so its time and the speed-ups "
    "against it say little{why}"
)
WHY_RANDOM = "; random weights shrink the activations; --checkpoint gives trained weights"
WHY_TRAINED = "; its weights shrink the activations there"


def timed_on_subnormals(variant: Variant) -> bool:
    """Whether `variant` ran on a CPU with at least SHARE of its sampled nonzero values subnormal."""
    counts = variant.subnormal_values
    return variant.device == "cpu" and counts is not None and counts.values > 0 and \
        counts.subnormal >= SHARE * counts.values


def subnormal_line(session: Session, variant: Variant) -> str | None:
    """The line every view prints for `variant` where `timed_on_subnormals`, naming the cause; else None."""
    counts = variant.subnormal_values
    if counts is None or not timed_on_subnormals(variant):
        return None
    why = WHY_RANDOM if session.study.weights.startswith("random") else WHY_TRAINED
    return SUBNORMAL.format(name=variant.name, share=counts.subnormal / counts.values * 100, dtype=counts.dtype,
                            tiny=counts.smallest_normal, why=why)


def subnormal_lines(session: Session) -> list[str]:
    """`subnormal_line` of each variant of `session` it applies to, in session order."""
    return [line for v in session.variants if (line := subnormal_line(session, v)) is not None]
