"""Every caveat and explanatory line the views print, each written once.

CLI text, Markdown export, JSON and the TUI take these words from here; `session_caveats` decides
which apply to a session.
"""

from __future__ import annotations

from sessions.model import Session

SIMULATED_FP8 = (
    "simulated FP8 (ModelOpt fake quantization): quality reflects the FP8 recipe, time is not FP8 kernel speed"
)
SIMULATED_TAG = "simulated"
SPEEDUP = "x = baseline median / variant median (above 1 is faster)"
UNSTABLE = (
    "CoV of round medians (one round: of samples) above 2.5 % for {names}: "
    "lock clocks or time longer before trusting small differences"
)
NO_KERNEL_TABLE = "no kernel table: these files hold layers and times, not kernel launches"
COV_WARN = 0.025  # trtexec warns above 2.5 %: clocks or other load make the figures unstable


def unstable_variants(session: Session) -> list[str]:
    noisy = []
    for variant in session.variants:
        stats = variant.latency
        if stats is not None and (stats.round_cov if stats.round_cov is not None else stats.cov) > COV_WARN:
            noisy.append(variant.name)
    return noisy


def session_caveats(session: Session) -> list[str]:
    """The caveats that apply to `session`, in the order views print them."""
    lines = []
    baseline = session.baseline()
    if baseline is not None:
        lines.append(SPEEDUP.replace("baseline", baseline.name))
    if any(v.simulated for v in session.variants):
        lines.append(SIMULATED_FP8)
    unstable = unstable_variants(session)
    if unstable:
        lines.append(UNSTABLE.format(names=", ".join(unstable)))
    if session.variants and all(v.kernels is None for v in session.variants):
        lines.append(NO_KERNEL_TABLE)
    return lines
