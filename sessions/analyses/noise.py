"""The one noise rule: where a repeat of a measurement would land, and whether two measurements differ.

Every verdict ("faster", "slower", "within noise") in `show`, `groups`, `diff`, export and the TUI is
`judge` on two `Band`s; no other module holds a noise figure.

A band is a range of milliseconds around the statistic compared (the median), built from what the
session stores, never from a fixed percentage (only between two processes is a fixed share added: `across_processes`):

- **Latency** (`latency_band`): the wider, at each end, of (a) the range of the round medians, the
  run-to-run drift of the interleaved rounds (clocks, load), and (b) the distribution-free 95 %
  interval of the median of all samples (order statistics: the ranks k and n + 1 - k whose binomial
  tail is at most 2.5 %; below 6 samples the whole range). (a) holds what moves slowly, (b) what a
  skewed, heavy-tailed sample does to a median. The per-sample CoV is not used as a band: a CoV of
  136 % on the CPU says the samples are skewed, and mean ± CoV would reach below zero.
- **A layer or a group** (`calls_band`, `layer_band`, `group_band`): the same interval of the median
  over its per-call times (`Layer.call_times_ms`, one value per traced or profiled call; a group's call
  time is the sum of its layers' in that call), widened by the relative drift of its variant's latency
  band, because calls traced back to back cannot see the drift that the timed rounds saw.

Between two sessions (`diff`), a layer's or group's time is judged against the rest of its variant: a
lowering regression moves one layer, a change of machine load, clocks or threads moves them all.
`common_factor` estimates that variant-wide factor B / A as the median of the paired layers' time
ratios (its distribution-free 95 % interval is stated, not added: the median of n ratios moves about
1/sqrt(n) as much as one layer's time, which its own band already holds); `without_factor` divides B's
band by it. It needs the ratios of at least `FACTOR_MIN_LAYERS` layers, the fewest whose interval
leaves out the most extreme ratio at each end, so that no one layer can carry the factor.

The load rule (`load_reach`), for times taken on the CPU, where the study's threads share the cores with the load:
a time that moved by a ratio B / A is the load's where both studies recorded their host's load (`HostLoad`), ran the
same threads on the same cores, where the loads differ materially (`HostLoad.differs_from`: the spans of their 1, 5
and 15-minute averages per core lie `LOAD_CHANGE_PER_CORE` apart) the busier study is the slower one (a load that came
within a minute of a study's start, or during it, is not in its start record, so where the averages spread which study
ran busier is not known), and the change is within what the load can do to a thread's share of the cores
(`contention_bound`: nothing on a host whose load leaves the study its cores). It is asked of:

- a group's or layer's time (`load_moved`), judged slower or faster with the common factor removed: each operation
  loses its own share of the cores (quantizers, light on arithmetic and heavy on memory, more than convolutions), and
  a short call the other work preempts waits out its turn, so on a loaded host the times do not all move by the
  factor. The ratios asked are against the rest (B / factor / A), of the medians and of the least calls (the call the
  load delayed least); either within the bound is the load's. Work that grew moves every call, the least too: a layer
  slowed tenfold stays past the bound unless the host carried a peak load of 13 on 2 cores at one thread.
- the end-to-end latency (`machine_latency`), judged as measured, except where the machine explains its change:
  `judge` calls it faster or slower, both loads are recorded, and either (a) the loads differ materially, the busier
  study is the slower one, the common factor's 95 % interval lies on the latency's side of 1 (the layers moved too),
  and B's latency band divided by some factor inside that interval meets A's band (the whole variant moved as its
  layers did); or (b), on the CPU, no layer or group is a regression once the common factor and the load rule have
  had their say (the model is unchanged), and the load rule holds for the latency's ratio: layers are traced at
  another moment than the timed rounds, so on a loaded host their factor need not follow the latency.

Then the change is stated with the factor and the loads, and not judged. A layer slowed alone is judged a regression
itself (the factor, a median, stays where it was, and the layer's ratio against it is past the bound), so neither (a)
nor (b) holds and the latency is judged as measured. On a GPU, where the host's load moves launch gaps more than
kernels, the load rule does not hold: a time that moved against the rest, or a latency without its layers, is judged.

`judge` calls a difference only where the two bands do not overlap: where the samples vary little, as on the H200,
the bands are narrow and a small change is called (how narrow there: docs/evidence.md ("Why the timing defaults are
what they are")); on a loaded CPU the bands widen with the noise and the same rule says "within noise".

A latency band holds a repeat in the same process. Between two sessions (`diff`: two studies, two processes) each
latency band is widened by `PROCESS_REACH` of its median at each end before `judge` (`across_processes`): a process
times its variants at a level of its own that no band of one process can see, so with nothing changed two processes'
medians lie further apart than their bands (what was seen: docs/method.md, "Noise"). Only the verdict takes the
widened bands: whether the machine's load moved the latency with its layers (`machine_latency`) is asked of the
session's own bands, since the layers' common factor already holds what the process moved.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

from sessions.documents.model import Environment, LatencyStats, Layer, Variant

Judgement = Literal["faster", "slower", "within noise"]
FASTER: Judgement = "faster"
SLOWER: Judgement = "slower"
WITHIN: Judgement = "within noise"
COVERAGE = 0.95  # of each band: two 95 % intervals that do not overlap differ at far below 5 %
EXACT_RANKS_UP_TO = 1000  # samples; above, the ranks come from the normal approximation of the binomial
LOAD_CHANGE_PER_CORE = 0.5  # runnable tasks per core between two studies: what `HostLoad.differs_from` calls material
# The other work takes memory bandwidth and cache as well as turns on the cores, and the load average lags: a time may
# grow past what the cores' shares alone give, so the growth past 1 they give is widened by this (the rerun it was set
# from: docs/evidence.md ("Why the timing defaults are what they are"))
SHARED_MEMORY_MARGIN = 1.5
# Of a latency's median, at each end of each of two sessions' bands: what `across_processes` adds, so that the bands
# of two processes meet across a gap of about twice this. Over the committed GPU reruns of unchanged code (senet154's
# variants of 1.5-3.8 ms at batch 1, H100s and H200s) the least share that calls none of them apart is 0.33 %, between
# a cold run and a warm one (docs/method.md, "Noise"); rounded up for GPUs and models not seen. Unmeasured on the CPU,
# whose bands are far wider.
PROCESS_REACH = 0.005


@dataclass(frozen=True)
class Band:
    """Where a repeat of this measurement would land, in ms."""

    center_ms: float  # the statistic compared (the median)
    low_ms: float
    high_ms: float
    statistic: str  # in words, e.g. "median of 4 rounds x 25; band: ..."
    least_ms: float | None = None  # the least of the per-call times it was built from (`calls_band`); None: a latency

    def scaled(self, divisor: float) -> Band:
        """The same band per image (or per any unit): every figure divided by `divisor`."""
        least = self.least_ms / divisor if self.least_ms is not None else None
        return Band(self.center_ms / divisor, self.low_ms / divisor, self.high_ms / divisor, self.statistic, least)


def judge(baseline: Band, variant: Band) -> Judgement:
    """The variant against the baseline: "faster" or "slower" only where the two bands do not overlap."""
    if variant.high_ms < baseline.low_ms:
        return FASTER
    if variant.low_ms > baseline.high_ms:
        return SLOWER
    return WITHIN


def threshold_verdict(baseline_ms: float, variant_ms: float, threshold: float) -> Judgement | None:
    """Where neither side stores a spread (an imported profile's averages, trtexec's summary, a sum of layer times):
    "slower" where the variant exceeds the baseline by more than `threshold` of it (a time that was 0 and is not:
    slower), "faster" where it falls short by more than that; None (not judged) between, where no band can tell."""
    if variant_ms > baseline_ms * (1 + threshold) and variant_ms > baseline_ms:
        return SLOWER
    if variant_ms < baseline_ms * (1 - threshold):
        return FASTER
    return None


def median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


@functools.cache  # one rank per sample count: a diff of many variants asks for the same few
def median_rank(n: int) -> int:
    """The 1-based rank k such that [x_(k), x_(n+1-k)] holds the median with at least `COVERAGE`.

    The largest k with P(Binomial(n, 1/2) <= k - 1) <= (1 - COVERAGE) / 2; 1 (the whole range) where no
    rank is that safe (n below 6).
    """
    tail = (1 - COVERAGE) / 2
    if n > EXACT_RANKS_UP_TO:
        z = 1.959963984540054  # the normal quantile of 1 - tail
        return max(1, math.floor(n / 2 - z * math.sqrt(n) / 2))
    k, term = 1, 0.5**n  # P(X = 0); 2^-1000 is still a normal double
    cumulative = term
    for j in range(n):
        if cumulative > tail:
            break
        k = j + 1  # P(X <= k - 1) <= tail: rank k is still safe
        term *= (n - j) / (j + 1)  # P(X = j + 1)
        cumulative += term
    return k


def median_interval(values: Sequence[float]) -> tuple[float, float]:
    """The distribution-free `COVERAGE` interval of the median of `values` (at least two)."""
    ordered = sorted(values)
    k = median_rank(len(ordered))
    return ordered[k - 1], ordered[len(ordered) - k]


def latency_band(latency: LatencyStats) -> Band | None:
    """The band of a variant's median latency; None where fewer than two samples are stored."""
    samples = latency.samples_ms
    rounds = latency.round_medians_ms
    if len(samples) < 2 and len(rounds) < 2:
        return None
    low, high = median_interval(samples) if len(samples) >= 2 else (latency.median_ms, latency.median_ms)
    parts = [f"the 95 % interval of the median of {len(samples)} samples"] if len(samples) >= 2 else []
    if len(rounds) >= 2:
        low, high = min(low, *rounds), max(high, *rounds)
        parts.insert(0, f"the {len(rounds)} round medians' range")
    center = min(max(latency.median_ms, low), high)
    per_round = f"{len(rounds)} rounds x {len(samples) // len(rounds)}" if rounds else f"{len(samples)} samples"
    band = f"the wider, at each end, of {' and '.join(parts)}" if len(parts) == 2 else parts[0]
    return Band(center, low, high, f"median of {per_round}; band: {band}")


def across_processes(band: Band) -> Band:
    """`band` as a repeat in another process would land: `PROCESS_REACH` of its median added at each end (the rest
    kept; the statistic says so). For a latency compared between two sessions, never within one study."""
    reach = PROCESS_REACH * band.center_ms
    return Band(band.center_ms, band.low_ms - reach, band.high_ms + reach,
                f"{band.statistic}, widened by {PROCESS_REACH * 100:g} % of the median at each end for another process",
                band.least_ms)


def calls_band(call_times_ms: Sequence[float], drift: Band | None = None, what: str = "calls") -> Band | None:
    """The band of the median of per-call times, widened by `drift`'s relative width; None below two calls."""
    if len(call_times_ms) < 2:
        return None
    center = median(call_times_ms)
    low, high = median_interval(call_times_ms)
    statistic = f"median of {len(call_times_ms)} {what}; band: the 95 % interval of that median"
    if drift is not None and drift.center_ms > 0:
        low *= max(0.0, drift.low_ms / drift.center_ms)
        high *= max(1.0, drift.high_ms / drift.center_ms)
        statistic += ", widened by the relative width of the variant's latency band"
    return Band(center, low, high, statistic, min(call_times_ms))


@dataclass(frozen=True)
class CommonFactor:
    """What every layer's time of a variant was multiplied by between session A and session B."""

    ratio: float  # the median of the paired layers' time ratios B / A
    low: float  # the distribution-free 95 % interval of that median
    high: float
    layers: int  # the ratios it was estimated from

    @property
    def statistic(self) -> str:
        return (f"common factor B/A x{self.ratio:.4g} (median of {self.layers} paired layers' time ratios; "
                f"95 % interval x{self.low:.4g}-x{self.high:.4g})")


def factor_min_layers() -> int:
    """The fewest ratios whose median interval leaves out the smallest and the largest ratio."""
    n = 2
    while median_rank(n) < 2:
        n += 1
    return n


FACTOR_MIN_LAYERS = factor_min_layers()  # 9


def common_factor(times: Sequence[tuple[float, float]]) -> CommonFactor | None:
    """The variant-wide factor between paired times (A's, B's) of the same layers; None below `FACTOR_MIN_LAYERS`.

    Pairs where either time is not positive carry no ratio and are left out.
    """
    ratios = [b / a for a, b in times if a > 0 and b > 0]
    if len(ratios) < FACTOR_MIN_LAYERS:
        return None
    low, high = median_interval(ratios)
    return CommonFactor(median(ratios), low, high, len(ratios))


def without_factor(band: Band, factor: CommonFactor | None) -> Band:
    """B's band at A's common level: every figure divided by the factor's median ratio."""
    if factor is None:
        return band
    return replace(band.scaled(factor.ratio), statistic=f"{band.statistic}; divided by the {factor.statistic}")


def layer_band(layer: Layer, drift: Band | None = None) -> Band | None:
    """The band of one layer's time per call; None (not judged) where no per-call times are stored."""
    return calls_band(layer.call_times_ms, drift, "traced calls")


def group_band(layers: Sequence[Layer], drift: Band | None = None) -> Band | None:
    """The band of a group's time per call (the sum of its layers' in each call).

    None (not judged) where a timed layer of the group has no per-call times, or the layers' calls differ.
    Untimed layers add nothing.
    """
    timed = [layer for layer in layers if layer.time_ms is not None]
    counts = {len(layer.call_times_ms) for layer in timed}
    if not timed or len(counts) != 1:
        return None
    sums = [sum(values) for values in zip(*(layer.call_times_ms for layer in timed), strict=False)]
    return calls_band(sums, drift, "traced calls, summed over the group's layers")


PACE_SPREAD = 1.5  # one variant's trace pace over another's (`trace_pace`): beyond it, their traces are not compared


def trace_pace(variant: Variant) -> float | None:
    """How fast the variant's trace ran against its timing: its layers' summed time per call over its timed median.
    None where it has no trace (imported files: their layer times are a profiler's, which adds its overhead to
    every layer, 0.56x to 2.55x the latency across the public sets), no timed median or no layer time. On a GPU a
    study's variants' paces lie within 1.22x of each other (every session under benchmarks/results); on a CPU
    under a changing load a trace can run seconds after the timing at another speed (4.5x one variant's median,
    0.8x another's in the same study: the load, not the variant), and its group times then say what the load
    did."""
    if variant.trace is None or variant.latency is None or variant.latency.median_ms <= 0:
        return None
    summed = sum(layer.time_ms for layer in variant.layers if layer.time_ms is not None)
    return summed / variant.latency.median_ms if summed > 0 else None


def paces_apart(a: Variant, b: Variant) -> tuple[float, float] | None:
    """The two variants' trace paces where one is more than PACE_SPREAD times the other: their traces ran at
    different speeds, so the group times between them are not judged (`sessions.reports.views`) and no group is
    named in the verdict (`sessions.analyses.verdict`); None where they agree or either is unknown."""
    pace_a, pace_b = trace_pace(a), trace_pace(b)
    if pace_a is None or pace_b is None or max(pace_a, pace_b) <= PACE_SPREAD * min(pace_a, pace_b):
        return None
    return pace_a, pace_b


@dataclass(frozen=True)
class HostLoad:
    """What a study recorded of its host's load when it started, as the session holds it: the load averages over 1, 5
    and 15 minutes (`averages`), the cores they were counted on and the study's threads (None: not recorded). What
    follows from them (`peak`, `per_core`, `span`) is derived, never held beside them."""

    averages: tuple[float, ...]
    cores: int
    threads: int | None = None

    @classmethod
    def of(cls, environment: Environment) -> HostLoad | None:
        """What the session recorded; None where it recorded no load or no core count (older or imported sessions)."""
        if not environment.load_average or environment.cpu_count < 1:
            return None
        return cls(tuple(environment.load_average), environment.cpu_count, environment.torch_threads)

    @property
    def peak(self) -> float:
        """The highest of the averages: what the host carried around the study."""
        return max(self.averages)

    @property
    def per_core(self) -> float:
        """Runnable (and uninterruptible) tasks per core at the 1-minute average: at 1 or above, every core is taken
        and tasks queue."""
        return self.averages[0] / self.cores

    @property
    def span(self) -> tuple[float, float]:
        """Where the load per core stood around the study, as far as the record tells: from the lowest to the highest
        of the 1, 5 and 15-minute averages. The three differ where the load was moving, and a study's start record
        holds nothing of a load that came within a minute or so before it (the 1-minute average rises by 1 - e^(-t/60)
        of a new task in t seconds), nor of one that came during it."""
        return min(self.averages) / self.cores, self.peak / self.cores

    def differs_from(self, other: HostLoad) -> bool:
        """Whether the two loads differ materially: their spans (`span`) lie at least `LOAD_CHANGE_PER_CORE` tasks
        per core apart.

        Half a task per core is half of the cores gaining (or losing) one runnable task each: on 2 cores, one
        busy process, the smallest change that can take a whole core from a study's thread. The 1-minute
        average of a task that ran for part of the minute moves by a fraction of one, so smaller changes are
        of the order of the average's own swing; and where either host's load was moving (its averages spread),
        which of the two studies ran busier is known only where their spans stay apart. Per core, so that hosts
        of different sizes compare; a gate, not a verdict: `machine_latency` also needs every layer to have moved
        as the latency did.
        """
        (low, high), (other_low, other_high) = self.span, other.span
        return max(low - other_high, other_low - high) >= LOAD_CHANGE_PER_CORE


def latency_moved_with_layers(band_a: Band, band_b: Band, factor: CommonFactor) -> bool:
    """Whether B's latency band, divided by some factor inside the common factor's 95 % interval, meets A's band.

    That is, the ratio's range [B low / A high, B high / A low] (the factor's interval widened by the two
    latency bands) meets [factor low, factor high].
    """
    if band_a.low_ms <= 0:
        return False
    return band_b.low_ms / band_a.high_ms <= factor.high and band_b.high_ms / band_a.low_ms >= factor.low


def contention_bound(load_a: HostLoad, load_b: HostLoad) -> float:
    """The most the load can stretch a study's time between A and B: with `peak` other runnable tasks on `cores`
    (the busier study's), each of the study's threads may get as little as cores / (peak + threads) of a core, so a
    time may grow by up to (peak + threads) / cores over an idle host's, its growth past 1 widened by
    `SHARED_MEMORY_MARGIN`; 1 (nothing) where the load leaves the study its cores. One thread where the threads are
    not recorded."""
    threads = max(load_a.threads or 1, load_b.threads or 1)
    worst = max((load.peak + threads) / load.cores for load in (load_a, load_b))
    return 1.0 + max(0.0, worst - 1.0) * SHARED_MEMORY_MARGIN


def load_reach(ratio: float, load_a: HostLoad | None, load_b: HostLoad | None) -> float | None:
    """The load rule, for a time of a CPU study that moved by `ratio` (B / A): the most the recorded loads can
    stretch a time (`contention_bound`) where they explain the change; None where they do not.

    They explain it where both loads are recorded, both studies ran the same threads on the same cores, where the
    loads differ materially (`HostLoad.differs_from`) the busier study is the slower one, and max(ratio, 1 / ratio)
    is within the bound (on a host whose load leaves the study its cores, no change is).
    """
    if load_a is None or load_b is None or ratio <= 0:
        return None
    if (load_a.threads, load_a.cores) != (load_b.threads, load_b.cores):
        return None
    if load_b.differs_from(load_a) and (load_b.per_core > load_a.per_core) != (ratio > 1):
        return None
    bound = contention_bound(load_a, load_b)
    return bound if max(ratio, 1 / ratio) <= bound else None


def _load_words(load_a: HostLoad, load_b: HostLoad, bound: float) -> str:
    """The loads behind `load_reach`'s bound, in words."""
    return (f"load average up to {max(load_a.peak, load_b.peak):.2f} on {load_a.cores} cores, "
            f"{load_a.threads or 1} thread(s), which can stretch a time up to x{bound:.3g}")


def _load_explains(verdict: Judgement, ratio: float, factor: CommonFactor | None, load_a: HostLoad,
                   load_b: HostLoad) -> str | None:
    """Why a latency change, with every layer steady against the rest (no layer or group judged a regression with
    the common factor removed), is the loaded host's (`load_reach`); None where it is not.

    Layers are traced at another moment than the timed rounds, so on a loaded host their common factor need not move
    with the latency.
    """
    bound = load_reach(ratio, load_a, load_b)
    if bound is None:
        return None
    layers = f"common factor x{factor.ratio:.4g}" if factor is not None else "no common factor"
    return (f"{verdict} by x{ratio:.3g} with no layer or group moved against the rest ({layers}), on a loaded host: "
            f"{_load_words(load_a, load_b, bound)}: the load's, not judged")


def load_moved(band_a: Band, band_b: Band, factor: CommonFactor | None, load_a: HostLoad | None,
               load_b: HostLoad | None) -> str | None:
    """Why a group's or layer's time of a CPU study, which `judge` calls slower or faster than A's once B is divided
    by the common factor (`band_b`: B's band so divided, `without_factor`), is the loaded host's, in words; None
    where it is not, and the time is judged.

    The study's threads share the cores with the load, which stretches a call in two ways: each operation loses its
    own share of the cores and of memory bandwidth (quantizers, light on arithmetic and heavy on memory, more than
    convolutions), so the layers' times do not all move by the common factor; and a call the other work preempts
    waits out its turn, which can make a call of a fraction of a millisecond ten times longer, where a longer call
    only loses its share. The change against the rest is the load's where `load_reach` holds for either of two
    ratios of B's over A's: the medians (the typical call), or the least calls (`Band.least_ms`: the call the load
    delayed least, which no preemption inflates unless every call was preempted). Work that grew moves every call,
    the least too: a layer slowed tenfold is past the reach by both unless `contention_bound` reaches 10 (at
    `SHARED_MEMORY_MARGIN` 1.5, a peak load of 13 on 2 cores at one thread). Without a common factor there is no
    rest to judge against, and nothing is the load's.
    """
    verdict = judge(band_a, band_b)
    if factor is None or verdict == WITHIN or band_a.center_ms <= 0 or load_a is None or load_b is None:
        return None
    ratios = {"median": band_b.center_ms / band_a.center_ms}
    if band_a.least_ms and band_b.least_ms:
        ratios["least call"] = band_b.least_ms / band_a.least_ms
    for which, ratio in ratios.items():
        bound = load_reach(ratio, load_a, load_b)
        if bound is not None:
            return (f"{verdict} against the rest (common factor x{factor.ratio:.4g}), its {which} by x{ratio:.3g}, "
                    f"on a loaded host: {_load_words(load_a, load_b, bound)}: the load's, not judged")
    return None


def machine_latency(band_a: Band, band_b: Band, factor: CommonFactor | None, load_a: HostLoad | None,
                    load_b: HostLoad | None, layers_steady: bool = False) -> str | None:
    """Why B's latency change is the machine's, in words; None where it is not, and the latency is judged.

    `judge` must call the latency faster or slower (within noise, there is nothing to attribute), and both loads
    must be recorded. Then it is the machine's where the whole variant moved: the loads differ materially
    (`HostLoad.differs_from`); the busier study is the slower one; the layers moved the same way (the common
    factor's 95 % interval lies wholly on the latency's side of 1); and the latency moved with them
    (`latency_moved_with_layers`). Or where the load explains it with the model unchanged: `layers_steady` (the
    caller timed both on the CPU, found the common factor and no layer or group a regression once it is removed and
    `load_moved` asked) and `_load_explains`.
    """
    verdict = judge(band_a, band_b)
    if verdict == WITHIN or load_a is None or load_b is None or band_a.center_ms <= 0:
        return None
    moved = _moved_with_layers(verdict, band_a, band_b, factor, load_a, load_b)
    if moved is not None or not layers_steady:
        return moved
    return _load_explains(verdict, band_b.center_ms / band_a.center_ms, factor, load_a, load_b)


def _moved_with_layers(verdict: Judgement, band_a: Band, band_b: Band, factor: CommonFactor | None, load_a: HostLoad,
                       load_b: HostLoad) -> str | None:
    """Why the latency moved with every layer on a busier (or less busy) host, in words; None where it did not."""
    if factor is None:
        return None
    slower = verdict == SLOWER
    busier = load_b.per_core > load_a.per_core
    layers_moved = factor.low > 1 if slower else factor.high < 1
    if not load_b.differs_from(load_a) or busier != slower or not layers_moved:
        return None
    if not latency_moved_with_layers(band_a, band_b, factor):
        return None
    cores = f"{load_a.cores}" if load_a.cores == load_b.cores else f"{load_a.cores} -> {load_b.cores}"
    return (f"{verdict} by x{band_b.center_ms / band_a.center_ms:.3g}, the factor every layer moved by "
            f"(x{factor.ratio:.4g}, 95 % interval x{factor.low:.4g}-x{factor.high:.4g}), with the machine "
            f"{'busier' if busier else 'less busy'}: load average per core {load_a.per_core:.2f} -> "
            f"{load_b.per_core:.2f} ({cores} cores): not judged")
