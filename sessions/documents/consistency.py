"""Figures of a session that must agree with each other: what a file that lies about them fails.

The codec checks each value alone (a type, a duration in range); these checks tie values together, so a view never
prints a median above its own p99, a share above 100 %, or a kernel counted in no layer. Each raises ValueError
naming the variant and the field; `storage` turns it into the one line that refuses the file.
"""

from __future__ import annotations

from sessions.documents.model import KernelTable, LatencyStats, Quality, Session
from sessions.documents.options import option

LAST_BITS = 1e-9  # relative slack: a mean of equal samples may differ from them in its last bit


def check_figures(session: Session, layer_counts: list[int] | None = None) -> None:
    """Raise ValueError where the session's figures contradict each other or their meaning: its batch; each variant's
    sizes, latency (`check_latency`), quality (`check_quality`) and kernel table (`check_kernels`). `layer_counts`:
    each variant's number of layers where the variants' layers were left out of `session` (the save check); else
    their own."""
    least = option("batch").low
    if session.study.batch is not None and least is not None and session.study.batch < least:
        raise ValueError(f"study.batch is {session.study.batch}; a batch holds at least {least:g} input")
    for index, variant in enumerate(session.variants):
        where = f"variant {variant.name!r}"
        recipe = variant.recipe
        sizes = {"artifact_bytes": variant.artifact_bytes, "peak_memory_bytes": variant.peak_memory_bytes,
                 "recipe.weight_bytes_base": recipe and recipe.weight_bytes_base,
                 "recipe.weight_bytes_fp8": recipe and recipe.weight_bytes_fp8}
        for name, size in sizes.items():
            if size is not None and size < 0:
                raise ValueError(f"{where}: {name} is {size}; a size cannot be negative")
        if variant.latency is not None:
            check_latency(variant.latency, where)
        if variant.quality is not None:
            check_quality(variant.quality, where)
        if variant.kernels is not None:
            layers = len(variant.layers) if layer_counts is None else layer_counts[index]
            check_kernels(variant.kernels, layers, where)


def _within(value: float, low: float, high: float) -> bool:
    slack = LAST_BITS * max(abs(low), abs(high))
    return low - slack <= value <= high + slack


def check_latency(latency: LatencyStats, where: str) -> None:
    """The median above zero; the median, mean and percentiles between the least and the greatest; every stored sample
    between them too; a sample spans one inference or more."""
    low, high = latency.min_ms, latency.max_ms
    if not latency.median_ms > 0:
        raise ValueError(f"{where}: latency.median_ms is {latency.median_ms!r}; a measured inference takes time")
    if latency.inferences_per_sample < 1:
        raise ValueError(f"{where}: latency.inferences_per_sample is {latency.inferences_per_sample}; "
                         "a sample spans at least one inference")
    figures = {"median_ms": latency.median_ms, "mean_ms": latency.mean_ms, "p90_ms": latency.p90_ms,
               "p99_ms": latency.p99_ms}
    for name, value in figures.items():
        if value is not None and not _within(value, low, high):
            raise ValueError(f"{where}: latency.{name} {value!r} lies outside min_ms {low!r} .. max_ms {high!r}")
    if latency.samples_ms and not (_within(min(latency.samples_ms), low, high)
                                   and _within(max(latency.samples_ms), low, high)):
        raise ValueError(f"{where}: latency.samples_ms reach outside min_ms {low!r} .. max_ms {high!r}")


FRACTIONS = ("top1_agreement", "agreement_baseline", "miou")  # Quality's figures that are shares of images or pixels


def check_quality(quality: Quality, where: str) -> None:
    """Shares between 0 and 1; counts and errors not negative; no more failing inputs than inputs."""
    for name in FRACTIONS:
        value = getattr(quality, name)
        if value is not None and not 0 <= value <= 1:
            raise ValueError(f"{where}: quality.{name} is {value!r}; a share lies between 0 and 1")
    # (mean_kl is left: sessions written before the quality step clamped it hold rounding's -1e-8)
    for name in ("images", "nonfinite", "stress_inputs", "stress_nonfinite", "labelled_images", "max_abs_logit_error"):
        if getattr(quality, name) < 0:
            raise ValueError(f"{where}: quality.{name} is {getattr(quality, name)!r}; it cannot be negative")
    if quality.stress_nonfinite > quality.stress_inputs:
        raise ValueError(f"{where}: quality.stress_nonfinite {quality.stress_nonfinite} exceeds the "
                         f"{quality.stress_inputs} stress inputs run")


def check_kernels(kernels: KernelTable, layers: int, where: str) -> None:
    """Columns of one length; each name in the table of names; each record in one of the variant's `layers` layers or
    outside all (-1); each in a traced call or outside every one (-1); starts and durations not negative."""
    try:
        kernels.validate()
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from None
    if not kernels.layer:
        return
    if min(kernels.layer) < -1 or max(kernels.layer) >= layers:
        raise ValueError(f"{where}: kernels.layer points outside the variant's {layers} layers (-1: outside all)")
    if min(kernels.call) < -1:
        raise ValueError(f"{where}: kernels.call holds a call below -1 (-1: outside every traced call)")
    for column in ("start_ns", "duration_ns"):
        if min(getattr(kernels, column)) < 0:
            raise ValueError(f"{where}: kernels.{column} holds a negative value")
