"""Compare two sessions: latency, kernels, and per group and per layer time and kernels, precisions.

Variants pair by name, by `--pair A=B`, or as the single variants of two one-variant sessions.
When the batches differ, every figure is divided by the batch: the comparison is per image.
A latency, group or layer time counts as a regression only where `sessions.analyses.noise.judge` calls B slower
than A (the two sessions' bands do not overlap; a latency's widened first for another process:
`sessions.analyses.noise.across_processes`) and the change passes `threshold`; per-layer and
per-group times also need an absolute change of `TIME_FLOOR` of the variant's time. Layer and group
times are judged with the variant's common factor (`sessions.analyses.noise.common_factor`: what a change of
machine load did to every layer) removed from B, and on the CPU a change against the rest that the recorded loads
explain (`sessions.analyses.noise.load_moved`) is stated, and not judged; the latency is judged as measured unless
`sessions.analyses.noise.machine_latency` finds the machine's load moved it with every layer, or, on the CPU with no
layer or group a regression, finds it within what the host's load can do (then it is stated, and not judged). A time
without a stored spread on either side is not judged against bands, only against the threshold, which says "faster"
or "slower" either way (`noise.threshold_verdict`), and counted in the notes. Latencies timed by different clocks
(`latencies_alike`: a script's own clock against trtexec's GPU compute time) are not compared: a warning says so and
the summed layer times stand in, as where one side has no latency.
Without a spread on both sides, or where the batches differ, no factor is removed.
A per-group split counts where a paired layer splits in B and not in A; with no layer paired, nothing
per layer is compared, and the notes say so.
The result is plain data (`SessionDiff`); `diff_report` renders it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from sessions.analyses.captions import layer_precision
from sessions.analyses.comparison import batch_of
from sessions.analyses.groups import Rules, group_rows, kernels_per_layer, role_of
from sessions.analyses.layer_match import Alignment, align_layers
from sessions.analyses.lowering import diagnose
from sessions.analyses.noise import (
    FASTER,
    PROCESS_REACH,
    SLOWER,
    WITHIN,
    Band,
    CommonFactor,
    HostLoad,
    across_processes,
    common_factor,
    group_band,
    judge,
    latency_band,
    layer_band,
    load_moved,
    machine_latency,
    threshold_verdict,
    without_factor,
)
from sessions.documents.errors import InputError
from sessions.documents.gc_pause import gc_paused
from sessions.documents.model import Layer, Session, Variant
from sessions.documents.vocab import gpu_state_kind

TIME_FLOOR = 0.01  # a layer or group time change under 1 % of the variant's total time is too small to matter


Timed = tuple[float, float, Band | None, Band | None]  # a layer's time in A and in B at A's level, and their bands


@dataclass
class Change:
    variant: str  # the pair's label: the name, or "a=b" where the names differ
    what: str  # latency | summed layer time | kernels | group time | group kernels | layer time | layer kernels |
    #            precision | new layer | removed layer | fused layer | split layer | split
    item: str  # the variant, group or layer concerned
    a: float | str | None
    b: float | str | None
    regression: bool
    note: str = ""
    # sessions.analyses.noise.judge of B against A, for latency, group and layer times; None: not judged
    verdict: str | None = None

    @property
    def relative(self) -> float | None:
        if isinstance(self.a, (int, float)) and isinstance(self.b, (int, float)) and self.a:
            return (self.b - self.a) / self.a
        return None


@dataclass
class VariantPair:
    a: str
    b: str
    how: str  # name | --pair | single variants

    @property
    def label(self) -> str:
        return self.a if self.a == self.b else f"{self.a}={self.b}"


@dataclass
class SessionDiff:
    a: str
    b: str
    threshold: float
    matched_variants: list[str]  # pair labels
    only_a: list[str]
    only_b: list[str]
    changes: list[Change] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # the sessions differ in what makes figures comparable
    pairs: list[VariantPair] = field(default_factory=list)
    per_image: bool = False  # batches differ: every figure divided by the batch
    batch_a: int | None = 1  # None: per job (a merged session of several batches)
    batch_b: int | None = 1

    @property
    def regressions(self) -> list[Change]:
        return [c for c in self.changes if c.regression]


def pair_variants(a: Session, b: Session, explicit: list[tuple[str, str]] | None = None) -> list[VariantPair]:
    """The variants to compare; InputError when nothing is comparable."""
    names_a = [v.name for v in a.variants if v.status == "ok"]
    names_b = [v.name for v in b.variants if v.status == "ok"]
    if explicit:
        for left, right in explicit:
            a.variant(left)
            b.variant(right)  # unknown names fail here, with the known ones listed
        return [VariantPair(left, right, "--pair") for left, right in explicit]
    in_b = set(names_b)
    pairs = [VariantPair(n, n, "name") for n in names_a if n in in_b]
    if not pairs and len(names_a) == 1 and len(names_b) == 1:
        pairs = [VariantPair(names_a[0], names_b[0], "single variants")]
    if not pairs:
        raise InputError(
            f"nothing to compare: no variant name in both sessions (A: {', '.join(names_a) or 'none'}; "
            f"B: {', '.join(names_b) or 'none'}); pass --pair A=B"
        )
    return pairs


def _gpu(session: Session) -> str | None:
    return session.environment.gpu.name if session.environment.gpu else None


def _tracers(session: Session) -> set[str]:
    return {v.trace.tracer for v in session.variants if v.trace is not None}


def comparability_warnings(a: Session, b: Session) -> list[str]:
    """What differs between the sessions beyond the variants: each makes a figure mean something else."""
    warnings = []
    for what, left, right in (
        ("model", a.study.model, b.study.model),
        ("device", a.study.device, b.study.device),
        ("GPU", _gpu(a) or "unknown", _gpu(b) or "unknown"),
        ("backend", a.study.backend, b.study.backend),
        ("tracer", ", ".join(sorted(_tracers(a))) or "none", ", ".join(sorted(_tracers(b))) or "none"),
        ("CUDA-graph state", gpu_state_kind(a.environment.gpu_state), gpu_state_kind(b.environment.gpu_state)),
    ):
        if left != right:
            warnings.append(f"different {what}: {left} against {right}")
    graphs = a.method.cuda_graph, b.method.cuda_graph  # a CPU study launches no kernels: the device line says it
    if None not in graphs and graphs[0] != graphs[1] and a.study.device == b.study.device == "cuda":
        launch = {True: "replayed CUDA graphs", False: "launched every kernel from the host"}
        warnings.append(f"A {launch[bool(graphs[0])]}, B {launch[bool(graphs[1])]}: the host's launch time is in one "
                        "side's latency only")
    if not latencies_alike(a, b):
        warnings.append(f"latencies timed differently: {_timed_words(a)} against {_timed_words(b)}: not compared "
                        "(the summed layer times stand in)")
    elif _region_words(a) != _region_words(b):
        warnings.append("latencies timed by the same clock, but the sessions describe the timed region differently "
                        "(other timing options, or the tool's timing changed between them): a latency's change may "
                        "be the method's; the method of each says how")
    return warnings


def latencies_alike(a: Session, b: Session) -> bool:
    """Whether the two sessions' latencies were timed by the same kind of clock around the same kind of region
    (`TimingMethod.timer`: CUDA events, trtexec's GPU compute time, a script's own clock, ...): only then do they
    compare."""
    return a.method.timer == b.method.timer


def _region_words(session: Session) -> str:
    """The session's timed region in its words, whitespace aside."""
    return " ".join(session.method.timed_region.split())


def _timed_words(session: Session) -> str:
    region = _region_words(session)
    return f"{session.method.timer} ({region[:120]}{'...' if len(region) > 120 else ''})"


def _folding_warnings(pairs: list[VariantPair], a: dict[str, Variant], b: dict[str, Variant]) -> list[str]:
    """Pairs whose graphs differ by construction: BatchNorm folded into the convolutions on one side only."""
    found = []
    for pair in pairs:
        fold_a, fold_b = a[pair.a].batchnorm_folded, b[pair.b].batchnorm_folded
        if fold_a != fold_b:
            words = {None: "unknown", 0: "none"}
            found.append(f"{pair.label}: BatchNorm layers folded into convolutions {words.get(fold_a, fold_a)} in A, "
                         f"{words.get(fold_b, fold_b)} in B: "
                         "convolution kernels and layer counts differ by construction")
    return found


def _sample_warnings(pairs: list[VariantPair], a: dict[str, Variant], b: dict[str, Variant]) -> list[str]:
    """Pairs whose samples mean different things: one inference each on one side, the mean of several back-to-back
    on the other (`LatencyStats.inferences_per_sample`): their medians compare, their bands and percentiles not."""
    found = []
    for pair in pairs:
        latency_a, latency_b = a[pair.a].latency, b[pair.b].latency
        if latency_a is None or latency_b is None:
            continue
        count_a, count_b = latency_a.inferences_per_sample, latency_b.inferences_per_sample
        if count_a != count_b:
            found.append(f"{pair.label}: a sample is the mean of {count_a} inference(s) in A, {count_b} in B: the "
                         "medians compare, the latency bands and percentiles do not (a mean of more is narrower)")
    return found


def _by_name(session: Session) -> dict[str, Variant]:
    """Each name's first variant, as Session.variant finds it."""
    found: dict[str, Variant] = {}
    for variant in session.variants:
        found.setdefault(variant.name, variant)
    return found


@gc_paused()
def diff_sessions(a: Session, b: Session, rules: Rules, threshold: float = 0.05, a_name: str = "A", b_name: str = "B",
                  pairs: list[tuple[str, str]] | None = None) -> SessionDiff:
    chosen = pair_variants(a, b, pairs)
    names_a = [v.name for v in a.variants if v.status == "ok"]
    names_b = [v.name for v in b.variants if v.status == "ok"]
    paired_a, paired_b = {p.a for p in chosen}, {p.b for p in chosen}
    by_name_a, by_name_b = _by_name(a), _by_name(b)  # one table each: linear in the variants, not a lookup per pair
    batches = [(batch_of(a, by_name_a[p.a]) or 1, batch_of(b, by_name_b[p.b]) or 1) for p in chosen]
    result = SessionDiff(
        a_name, b_name, threshold, [p.label for p in chosen],
        [n for n in names_a if n not in paired_a], [n for n in names_b if n not in paired_b],
        warnings=comparability_warnings(a, b), pairs=chosen, per_image=any(x != y for x, y in batches),
        batch_a=a.study.batch, batch_b=b.study.batch,
    )
    for x, y in dict.fromkeys(pair for pair in batches if pair[0] != pair[1]):
        result.notes.append(f"batch {x} against {y}: compared per image (latency, layer and "
                            "group times and kernels divided by the batch)")
    result.notes.extend(f"paired {p.a} (A) with {p.b} (B): {p.how}" for p in chosen if p.how != "name")
    result.warnings.extend(_folding_warnings(chosen, by_name_a, by_name_b))
    result.warnings.extend(_sample_warnings(chosen, by_name_a, by_name_b))
    if threshold < 2 * PROCESS_REACH:
        result.warnings.append(
            f"threshold {threshold * 100:g}% is under the {2 * PROCESS_REACH * 100:g}% two processes' latencies may "
            "lie apart before diff calls them apart: a latency change that small is within noise, whatever the "
            "threshold")
    result.notes.extend(_load_notes(a, b))
    loads = HostLoad.of(a.environment), HostLoad.of(b.environment)
    for pair, (batch_a, batch_b) in zip(chosen, batches, strict=False):
        scale_a, scale_b = (batch_a, batch_b) if result.per_image else (1, 1)
        compared = VariantComparison(pair.label, by_name_a[pair.a], by_name_b[pair.b], scale_a, scale_b, rules,
                                     threshold, loads, latencies_alike(a, b))
        result.changes.extend(compared.changes())
        result.notes.extend(compared.notes)
    return result


def _load_notes(a: Session, b: Session) -> list[str]:
    """The load average and threads each study recorded when it started: what moves every layer's time at once."""
    def conditions(session: Session) -> str:
        env = session.environment
        load = f"load average {env.load_average[0]:.2f}" if env.load_average else "load average not recorded"
        return f"{load}, {env.torch_threads} threads" if env.torch_threads is not None else load
    left, right = conditions(a), conditions(b)
    if not (a.environment.load_average or b.environment.load_average):
        return []
    return [f"when each study started: A {left}; B {right}"]


@dataclass
class VariantComparison:
    """One pair of variants; `scale_*` divide every figure (the batch, when comparing per image)."""

    label: str
    va: Variant
    vb: Variant
    scale_a: int
    scale_b: int
    rules: Rules
    threshold: float
    loads: tuple[HostLoad | None, HostLoad | None] = (None, None)  # A's and B's host load; None: not recorded
    latency_alike: bool = True  # the latencies were timed alike (`latencies_alike`): else not compared
    notes: list[str] = field(default_factory=list)
    judged: dict[str, int] = field(default_factory=dict)  # per kind of time change: pairs judged against their bands
    unjudged: dict[str, int] = field(default_factory=dict)  # ... and pairs without a spread on one side or both
    load_excused: dict[str, int] = field(default_factory=dict)  # ... judged pairs whose change the load explains
    moved: int = 0  # layer times that gained what a neighbour lost (`moved_time`): stated, not regressions
    _spent: dict[str, float] = field(default_factory=dict)  # of each neighbour's loss, what `moved_time` gave away

    def __post_init__(self) -> None:
        # each variant's latency band: judged itself, and the drift that widens its layers' and groups' bands
        self._drift_a = latency_band(self.va.latency) if self.va.latency else None
        self._drift_b = latency_band(self.vb.latency) if self.vb.latency else None
        self._alignment: Alignment = align_layers(self.va.layers, self.vb.layers)
        self._factor = self._common_factor()
        # the load rule holds where the study's threads shared the CPU with the load
        self._shared_cpu = self.va.device == self.vb.device == "cpu"

    def _common_factor(self) -> CommonFactor | None:
        """The variant-wide factor B / A over the paired layers judged against bands (a per-call spread on both sides).

        None where the batches differ: a batch changes each layer's cost per image by its own factor, by design.
        """
        judged = [(self.va.layers[i], self.vb.layers[j]) for i, j in self._alignment.pairs
                  if len(self.va.layers[i].call_times_ms) >= 2 and len(self.vb.layers[j].call_times_ms) >= 2]
        times = [(la.time_ms, lb.time_ms) for la, lb in judged if la.time_ms is not None and lb.time_ms is not None]
        if times and self.scale_a != self.scale_b:
            self.notes.append(f"{self.label}: no common factor removed: the batches differ, and a batch changes each "
                              "layer's time per image by its own factor")
            return None
        factor = common_factor(times)
        if factor is not None:
            self.notes.append(f"{self.label}: layer and group times judged with B divided by the {factor.statistic}; "
                              "latency judged as measured unless a change of load explains it")
        elif times:
            self.notes.append(f"{self.label}: no common factor removed: {len(times)} paired layers with a time, "
                              "too few to tell a change of the whole variant from one layer's")
        return factor

    def changes(self) -> list[Change]:
        groups, layers = self._groups(), self._layers()
        # the load explains a latency with the layers steady only where the study's threads shared the CPU with it
        steady = self._shared_cpu and self._factor is not None and not any(
            c is not None and c.what in ("group time", "layer time") and c.regression for c in groups + layers)
        found = [self._latency(steady), self._layer_total(), self._count("kernels", self.label, *self._per_call())]
        found += groups
        found += layers
        found += self._splits()
        if not self._alignment.pairs and self.va.layers and self.vb.layers:
            self.notes.append(f"{self.label}: no layer paired: layer times, kernels, precisions and per-group splits "
                              "not compared")
        self.notes.extend(self._judged_notes())
        return [c for c in found if c is not None]

    def _judged_notes(self) -> list[str]:
        notes = []
        for what in ("group time", "layer time"):
            judged, unjudged = self.judged.get(what, 0), self.unjudged.get(what, 0)
            if judged + unjudged:
                load = self.load_excused.get(what, 0)
                loads = f", {load} of them slower against the rest within the load's reach (stated)" if load else ""
                moved = (f", {self.moved} gaining what a neighbour lost (stated)" if what == "layer time" and self.moved
                         else "")
                notes.append(f"{self.label}: {what}s outside both sessions' bands flagged; {judged} judged{loads}"
                             f"{moved}, {unjudged} not judged (no per-call spread stored)")
        return notes

    def _band_a(self, band: Band | None) -> Band | None:
        return band.scaled(self.scale_a) if band is not None else None

    def _band_b(self, band: Band | None) -> Band | None:
        return band.scaled(self.scale_b) if band is not None else None

    def _per_call(self) -> tuple[float | None, float | None]:
        a = self.va.trace.per_call / self.scale_a if self.va.trace else None
        b = self.vb.trace.per_call / self.scale_b if self.vb.trace else None
        return a, b

    def _latency(self, layers_steady: bool) -> Change | None:
        """The latency change; `layers_steady`: no layer or group time is a regression with the common factor removed
        (`sessions.analyses.noise.machine_latency` may then find the loaded host's hand in it)."""
        if not (self.va.latency and self.vb.latency and self.latency_alike):
            return None
        a, b = self.va.latency.median_ms / self.scale_a, self.vb.latency.median_ms / self.scale_b
        band_a, band_b = self._drift_a, self._drift_b
        per = " per image" if self.scale_a != self.scale_b else ""
        if band_a is None or band_b is None:
            # no spread stored (trtexec's performance summary of an import): the threshold alone decides, and says so
            verdict = threshold_verdict(a, b, self.threshold)
            return Change(self.label, "latency", self.label, a, b, verdict == SLOWER,
                          f"threshold only: no spread stored{per}", verdict)
        own_a, own_b = band_a.scaled(self.scale_a), band_b.scaled(self.scale_b)
        band_a, band_b = across_processes(own_a), across_processes(own_b)
        bands = f"bands {_span(band_a)} and {_span(band_b)} ms{per}; {band_b.statistic}"
        verdict = judge(band_a, band_b)
        # the load's part is asked of each session's own bands: the layers' factor holds what the process moved
        machine = (machine_latency(own_a, own_b, self._factor, *self.loads, layers_steady=layers_steady)
                   if verdict != WITHIN else None)
        if machine is not None:
            return Change(self.label, "latency", self.label, a, b, False, f"{machine}; {bands}")
        rel = (b - a) / a if a else 0.0
        note = f"{verdict}; {bands}"
        return Change(self.label, "latency", self.label, a, b, verdict == SLOWER and rel > self.threshold, note,
                      verdict)

    def _layer_total(self) -> Change | None:
        """Without latencies on both sides timed alike, the summed layer time is the only whole-engine figure:
        compared as one, by the threshold alone (no spread is stored for a sum)."""
        if (self.va.latency and self.vb.latency and self.latency_alike) or not (_timed(self.va) and _timed(self.vb)):
            return None
        a = self._total_a()
        b = sum(layer.time_ms or 0.0 for layer in self.vb.layers) / self.scale_b
        missing = _untimed(self.va.layers), _untimed(self.vb.layers)
        if missing[0] != missing[1]:
            return Change(self.label, "summed layer time", self.label, a, b, False,
                          f"not compared: {_missing_words(missing[0], missing[1])}, which a sum leaves out")
        verdict = threshold_verdict(a, b, self.threshold)
        why = ("the latencies were timed differently" if self.va.latency and self.vb.latency
               else "no per-inference times in one of the sessions")
        return Change(self.label, "summed layer time", self.label, a, b, verdict == SLOWER,
                      f"{why}: the sum of per-layer times stands in for latency (threshold only)", verdict)

    def _count(self, what: str, item: str, a: float | None, b: float | None) -> Change | None:
        if a is None or b is None or abs(b - a) < 0.5 / max(self.scale_a, self.scale_b):
            return None
        regression = b > a * (1 + self.threshold) and b - a >= 1 / max(self.scale_a, self.scale_b)
        return Change(self.label, what, item, a, b, regression)

    def _time(self, what: str, item: str, a: float | None, b: float | None, total: float,
              bands: tuple[Band | None, Band | None]) -> Change | None:
        """A group or layer time per call; `bands` are A's and B's (None: not judged), already per image."""
        if a is None or b is None:
            return None
        a, b_level, band_a, band_b = self._at_level(a, b, bands)
        factor = self._factor if band_a is not None else None
        verdict = judge(band_a, band_b) if band_a is not None and band_b is not None else None
        self.judged[what] = self.judged.get(what, 0) + (verdict is not None)
        self.unjudged[what] = self.unjudged.get(what, 0) + (verdict is None)
        if a == b:
            return None
        # no spread stored (an imported profile's averages, an older session): the threshold alone decides, and says so
        slower = verdict == SLOWER if verdict is not None else True
        # a new group's time counts
        regression = slower and b_level > a * (1 + self.threshold) and b_level - a >= TIME_FLOOR * total
        if not regression and abs(b_level - a) < TIME_FLOOR * total:
            return None  # small and not a regression: not worth a row
        note = (f"bands {_span(band_a)} and {_span(band_b)} ms" if verdict is not None
                else "threshold only: no per-call spread stored")
        if verdict is None:
            verdict = threshold_verdict(a, b_level, self.threshold)
        load = self._load_moved(band_a, band_b, factor) if regression else None
        if load is not None:
            self.load_excused[what] = self.load_excused.get(what, 0) + 1
            regression, verdict, note = False, None, f"{load}; {note}"
        if factor is not None:
            relative = f"{(b_level - a) / a * 100:+.1f}%" if a else "new"
            note = f"B / x{factor.ratio:.4g} = {b_level:.4g} ms ({relative}); {note}"
        return Change(self.label, what, item, a, b, regression, note, verdict)

    def _at_level(self, a: float, b: float, bands: tuple[Band | None, Band | None]) -> Timed:
        """A time per call in A and B with their bands, B at A's common level (the common factor divided out of B and
        its band) where both have a band; raw and without bands where either has none (no spread stored: nothing says
        what the machine did between the sessions, the threshold decides on raw times)."""
        band_a, band_b = bands
        if band_a is None or band_b is None:
            return a, b, None, None
        ratio = self._factor.ratio if self._factor is not None else 1.0
        return a, b / ratio, band_a, without_factor(band_b, self._factor)

    def _load_moved(self, band_a: Band | None, band_b: Band | None, factor: CommonFactor | None) -> str | None:
        """Why a time judged against the rest (`band_b`: B's band divided by `factor`) moved by the load's hand, on the
        CPU (`sessions.analyses.noise.load_moved`); None where it did not, or nothing was judged."""
        if not self._shared_cpu or band_a is None or band_b is None:
            return None
        return load_moved(band_a, band_b, factor, *self.loads)

    def _total_a(self) -> float:
        return sum(layer.time_ms or 0.0 for layer in self.va.layers) / self.scale_a

    def _groups(self) -> list[Change | None]:
        rows_a = {r.group: r for r in group_rows(self.va, lambda layer: role_of(layer, self.rules))}
        rows_b = {r.group: r for r in group_rows(self.vb, lambda layer: role_of(layer, self.rules))}
        members_a, members_b = self._members(self.va), self._members(self.vb)
        changes: list[Change | None] = []
        total = self._total_a()
        for group in dict.fromkeys([*rows_a, *rows_b]):
            ra, rb = rows_a.get(group), rows_b.get(group)
            ka = (ra.kernels_per_call / self.scale_a if ra and ra.kernels_per_call is not None
                  else (0.0 if self.va.kernels is not None else None))
            kb = (rb.kernels_per_call / self.scale_b if rb and rb.kernels_per_call is not None
                  else (0.0 if self.vb.kernels is not None else None))
            changes.append(self._count("group kernels", group, ka, kb))
            if _timed(self.va) and _timed(self.vb):
                ta = (ra.time_ms or 0.0) / self.scale_a if ra else 0.0
                tb = (rb.time_ms or 0.0) / self.scale_b if rb else 0.0
                missing = _untimed(members_a.get(group, [])), _untimed(members_b.get(group, []))
                if missing[0] != missing[1]:
                    changes.append(Change(self.label, "group time", group, ta, tb, False,
                                          f"not compared: {_missing_words(missing[0], missing[1])}")
                                   if ta != tb else None)
                    continue
                bands = (self._band_a(group_band(members_a.get(group, []), self._drift_a)),
                         self._band_b(group_band(members_b.get(group, []), self._drift_b)))
                changes.append(self._time("group time", group, ta, tb, total, bands))
        return changes

    def _members(self, variant: Variant) -> dict[str, list[Layer]]:
        members: dict[str, list[Layer]] = {}
        for layer in variant.layers:
            members.setdefault(role_of(layer, self.rules), []).append(layer)
        return members

    def _layers(self) -> list[Change | None]:
        va, vb = self.va, self.vb
        alignment = self._alignment
        ka, kb = kernels_per_layer(va), kernels_per_layer(vb)
        changes: list[Change | None] = []
        total = self._total_a()
        regressions: list[tuple[int, Change]] = []
        levels: dict[str, Timed] = {}  # each paired layer timed on both sides, by B's name (`_at_level`)
        for i, j in alignment.pairs:
            la, lb = va.layers[i], vb.layers[j]
            item = lb.name if la.name == lb.name else f"{la.name} -> {lb.name}"
            pa, pb = layer_precision(la), layer_precision(lb)
            if pa != pb and pa and pb:
                changes.append(Change(self.label, "precision", item, pa, pb, False))
            if ka is not None and kb is not None:
                changes.append(self._count("layer kernels", item, ka[i] / self.scale_a, kb[j] / self.scale_b))
            if la.time_ms is not None and lb.time_ms is not None:
                bands = self._band_a(layer_band(la, self._drift_a)), self._band_b(layer_band(lb, self._drift_b))
                a, b = la.time_ms / self.scale_a, lb.time_ms / self.scale_b
                levels[lb.name] = self._at_level(a, b, bands)
                change = self._time("layer time", item, a, b, total, bands)
                changes.append(change)
                if change is not None and change.regression:
                    regressions.append((j, change))
        if regressions:
            family = Family.of(levels)
            for j, change in regressions:
                self._moved_between(j, change, levels, family)
        for i, j in alignment.fused_a.items():
            layer = va.layers[i]
            changes.append(Change(self.label, "fused layer", layer.name, _ms(layer.time_ms, self.scale_a), None, False,
                                  f"fused into {vb.layers[j].name}"))
        for j, i in alignment.fused_b.items():
            layer = vb.layers[j]
            changes.append(Change(self.label, "split layer", layer.name, None, _ms(layer.time_ms, self.scale_b), False,
                                  f"fused in A into {va.layers[i].name}"))
        for i in alignment.only_a:
            layer = va.layers[i]
            changes.append(Change(self.label, "removed layer", layer.name, _ms(layer.time_ms, self.scale_a), None,
                                  False, role_of(layer, self.rules)))
        for j in alignment.only_b:
            layer = vb.layers[j]
            changes.append(Change(self.label, "new layer", layer.name, None, _ms(layer.time_ms, self.scale_b), False,
                                  role_of(layer, self.rules)))
        methods = Counter(alignment.how.values())
        self.notes.append(
            f"{self.label}: {len(alignment.pairs)} layers paired "
            f"({', '.join(f'{n} by {m}' for m, n in methods.items()) or 'none'}), "
            f"{len(alignment.fused_a)} of A fused into B's layers, {len(alignment.fused_b)} of B fused in A; "
            f"could not match {len(alignment.only_a)} only in A, {len(alignment.only_b)} only in B"
        )
        return changes

    def _moved_between(self, j: int, change: Change, levels: dict[str, Timed], family: Family) -> None:
        """A layer time judged a regression that a neighbour's loss matches (`moved_time`: the layer that runs just
        before or after it in B, or the module holding it or held by it) is stated as time moved between the two, not
        a regression: the profiler gave one of them what the other ran (an example: docs/evidence.md ("Grounds of
        rules in the code")). `levels`: the paired layers' times, as `_time` judged them."""
        found = moved_time(self.vb.layers, j, levels, self.threshold, self._spent, family)
        if found is not None:
            self.moved += 1
            change.regression, change.verdict = False, None
            change.note = f"{found}; {change.note}"

    def _splits(self) -> list[Change]:
        """Paired layers that split per group in B and not in A; a layer without a partner in A is not compared."""
        split_a = {flag.layer for flag in diagnose(self.va) if flag.reason == "per-group split"}
        partners: dict[str, set[str]] = {}  # a layer of B -> the layers of A paired with it
        for i, j in self._alignment.pairs:
            partners.setdefault(self.vb.layers[j].name, set()).add(self.va.layers[i].name)
        return [
            Change(self.label, "split", flag.layer, None, flag.kernels_per_call, True,
                   f"kernels per call reached {flag.groups} groups")
            for flag in diagnose(self.vb)
            if flag.reason == "per-group split" and any(name not in split_a for name in partners.get(flag.layer, ()))
        ]


@dataclass(frozen=True)
class Family:
    """Each timed layer's nearest timed parent module (`_nearest_parent`) and, inverted, the timed modules each one is
    the nearest timed parent of: made once for a variant pair's `timed` layers, read for each regression."""

    parent: dict[str, str | None]
    children: dict[str, list[str]]

    @classmethod
    def of(cls, timed: dict[str, Timed]) -> Family:
        parent = {name: _nearest_parent(name, timed) for name in timed}
        children: dict[str, list[str]] = {}
        for name, holder in parent.items():
            if holder is not None:
                children.setdefault(holder, []).append(name)
        return cls(parent, children)


def moved_time(layers: list[Layer], index: int, timed: dict[str, Timed], threshold: float,
               spent: dict[str, float], family: Family) -> str | None:
    """Why the time layer `index` of `layers` (B's) gained is another layer's it took over, or None: a neighbour (the
    layer before or after it, or its nearest timed parent module or a module whose nearest timed parent it is) lost a
    real amount of its own (faster by its own bands and by at least `threshold` of its time) and, of what is left of
    that loss (`spent`: what earlier rows were given of it, added back to its time in B), at least half of this gain,
    and the two together are not slower (`noise.judge` of their summed bands). Only layers timed with a per-call
    spread on both sides (a profile's averages say nothing of how far a time wanders). `timed`: each paired layer's
    times and bands, B's at A's level (the common factor divided out), by B's name. A layer slowed alone (tenfold)
    finds no such neighbour; one loss excuses no more than itself. `family`: `Family.of(timed)` (made once by a caller
    judging many layers of one pair)."""
    name = layers[index].name
    a, b, band_a, band_b = timed[name]
    if b <= a or band_a is None or band_b is None:
        return None
    for other in _neighbours(layers, index, timed, family):
        other_a, other_b, other_band_a, other_band_b = timed[other]
        if other_band_a is None or other_band_b is None:
            continue
        given = spent.get(other, 0.0)
        lost = other_a - other_b - given
        if judge(other_band_a, other_band_b) != FASTER or other_a - other_b < threshold * other_a or lost < (b - a) / 2:
            continue
        after = Band(other_band_b.center_ms + given, other_band_b.low_ms + given, other_band_b.high_ms + given, "")
        if judge(_summed(band_a, other_band_a), _summed(band_b, after)) != SLOWER:
            spent[other] = given + min(b - a, lost)
            return (f"time moved from {other} ({other_a:.4g} -> {other_b:.4g} ms): the two together "
                    f"{a + other_a:.4g} -> {b + other_b + given:.4g} ms, not slower")
    return None


def _neighbours(layers: list[Layer], index: int, timed: dict[str, Timed], family: Family) -> list[str]:
    """The layers run just before and after layer `index`, its nearest timed parent module and the timed modules whose
    nearest timed parent it is (`family`), timed ones only, in that order."""
    name = layers[index].name
    near = [layers[k].name for k in (index - 1, index + 1) if 0 <= k < len(layers)]
    parent = family.parent.get(name)
    near += [parent] if parent is not None else []
    near += family.children.get(name, [])
    return [n for n in dict.fromkeys(near) if n in timed and n != name]


def _nearest_parent(name: str, timed: dict[str, Timed]) -> str | None:
    """The longest module path holding `name` that has a timed row, or None."""
    parts = name.split(".")
    return next((".".join(parts[:k]) for k in range(len(parts) - 1, 0, -1) if ".".join(parts[:k]) in timed), None)


def _summed(*bands: Band) -> Band:
    """The band of a sum of times: each end the sum of the bands' ends (wider than the sum's own: a cautious band)."""
    return Band(sum(b.center_ms for b in bands), sum(b.low_ms for b in bands), sum(b.high_ms for b in bands), "a sum")


def _timed(variant: Variant) -> bool:
    return any(layer.time_ms is not None for layer in variant.layers)


def _untimed(layers: list[Layer]) -> Counter[str]:
    """The names of `layers` that have no time (a profile that lacks their records), each as often as it occurs: a
    time summed over layers leaves those out, so two sums are compared only where both sides lack the same ones (else
    B would be called faster for what it lacks)."""
    return Counter(layer.name for layer in layers if layer.time_ms is None)


def _missing_words(in_a: Counter[str], in_b: Counter[str]) -> str:
    """'layers without a time: 2 in A, 1 in B' (what each side lacks that the other does not)."""
    only = ((sum((in_a - in_b).values()), "A"), (sum((in_b - in_a).values()), "B"))
    return "layers without a time: " + ", ".join(f"{n} in {side}" for n, side in only if n)


def _ms(value: float | None, scale: int) -> float | None:
    return value / scale if value is not None else None


def _span(band: Band | None) -> str:
    return f"{band.low_ms:.4g}-{band.high_ms:.4g}" if band is not None else "none"

