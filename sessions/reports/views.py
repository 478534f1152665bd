"""What every view shows, computed once: plain tables with typed columns, row keys and tones.

`show`, `groups`, `export` (text, Markdown, CSV, JSON) and the TUI render these objects; nothing here
knows Rich or Textual. A tone says what a row means ("good", "bad", "warn", "dim"); each front end
picks its own colour for it.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from sessions.analyses import captions
from sessions.analyses.comparison import Tone, baseline_for, ratio, reference, tone
from sessions.analyses.diff import SessionDiff, align_layers
from sessions.analyses.groups import GroupComparison, Rules, compare_groups, kernels_per_layer, role_of, stage_of
from sessions.analyses.lowering import Flag, diagnose
from sessions.analyses.noise import (
    WITHIN,
    Band,
    Judgement,
    group_band,
    judge,
    latency_band,
    layer_band,
    paces_apart,
)
from sessions.analyses.precision_choice import RolePrecision, precision_by_role
from sessions.analyses.summary import VariantSummary, median_cell, summarize_session
from sessions.documents.model import Layer, Session, Variant
from sessions.documents.vocab import PRECISIONS_AS_RUN
from sessions.reports.tables import format_value

Kind = Literal["text", "count", "ms", "us", "pct", "speedup", "sci", "seconds", "mib", "delta_ms", "delta_count"]


@dataclass(frozen=True)
class Column:
    label: str
    kind: Kind = "text"

    @property
    def numeric(self) -> bool:
        return self.kind != "text"


@dataclass(frozen=True)
class Table:
    columns: tuple[Column, ...]
    rows: list[tuple[Any, ...]]
    keys: list[Any]
    tones: list[Tone]
    notes: tuple[str, ...] = ()
    title: str = ""
    time_column: int | None = None  # the column a filter sums ("Σ ms of the matching rows")

    @property
    def labels(self) -> list[str]:
        return [c.label for c in self.columns]


def _table(columns: Sequence[Column], rows: list[tuple], keys: list, tones: list[Tone] | None = None,
           **extra: Any) -> Table:
    return Table(tuple(columns), rows, keys, tones if tones is not None else [""] * len(rows), **extra)


# -- variants ------------------------------------------------------------------------------------
def variant_table(summaries: Sequence[VariantSummary]) -> Table:
    """A row per variant: what `show`, `export` and the TUI overview (live or saved) print.

    Speed-ups are each against the variant's own baseline (sessions.analyses.comparison); where the rows do not
    share one baseline, a `vs` column names each row's. Kernels and those outside every layer are both per traced
    call (the trace stores the records of every call). Colour only for what the noise rule judged.
    """
    units = {s.unit for s in summaries if s.unit}
    per_call = f"{units.pop()}s / call" if len(units) == 1 else "kernels / call"
    baselines = {s.baseline for s in summaries if s.baseline is not None}
    shared = next(iter(baselines)) if len(baselines) == 1 else None
    columns = [
        Column("variant"), Column("median ms", "ms"), Column("p99 ms", "ms"), Column(captions.SAMPLE_COV, "pct"),
        Column(captions.speedup_label(shared), "speedup"), *([Column("vs")] if len(baselines) > 1 else []),
        Column(per_call, "count"),
        Column("outside layers", "count"), Column("top-1 %", "pct"), Column("mean KL", "sci"),
        Column("max abs err", "sci"), Column(captions.RELATIVE_ERROR, "sci"),
        Column(captions.NONFINITE_VALUES, "count"),
        Column("images/s", "count"), Column("MiB", "mib"),
        Column("peak memory MiB", "mib"),
        Column("FP8 weights MiB", "mib"), Column("build s", "seconds"), Column("backend"), Column("status"),
    ]
    rows: list[tuple[Any, ...]] = []
    tones: list[Tone] = []
    for s in summaries:
        rows.append((
            s.name, s.median_ms, s.p99_ms, _percent(s.cov), s.speedup, *([s.baseline] if len(baselines) > 1 else []),
            s.per_call, s.unattributed_per_call,
            _percent(s.top1_agreement), s.mean_kl, s.max_abs_logit_error, s.relative_error, s.nonfinite,
            s.images_per_s, s.artifact_mib,
            s.peak_memory_mib,
            s.fp8_weight_mib, s.build_s,
            f"{s.backend}, {captions.SIMULATED_TAG}" if s.simulated else s.backend,
            s.status if not s.error else f"failed: {s.error}",
        ))
        tones.append("bad" if s.error else tone(s.judgement))
    return _table(columns, rows, [s.name for s in summaries], tones)


def live_variant_table(finished: Sequence[VariantSummary], running: tuple[str, str] | None) -> Table:
    """A live study's rows: the variants its session file holds, then the one in progress (name, step) marked running.

    The status column comes second, so "running: ..." is on screen however wide the figures are.
    """
    table = variant_table(finished)
    rows = list(table.rows)
    keys, tones = list(table.keys), list(table.tones)
    if running is not None and running[0] not in keys:
        rows.append((running[0], *([None] * (len(table.columns) - 2)), f"running: {running[1]}"))
        keys.append(running[0])
        tones.append("dim")
    columns = (table.columns[0], table.columns[-1], *table.columns[1:-1])
    return Table(columns, [(r[0], r[-1], *r[1:-1]) for r in rows], keys, tones)


def session_variant_table(session: Session) -> Table:
    table = variant_table(summarize_session(session))
    failed = tuple(f"{v.name} failed: {v.error}" for v in session.variants if v.status != "ok")
    layer_sums = tuple(f"{s.name}: no latency measured; {median_cell(s)}" for s in summarize_session(session)
                       if s.median_ms is None and s.layer_sum_ms is not None)
    return Table(table.columns, table.rows, table.keys, table.tones,
                 (*captions.session_caveats(session), *layer_sums, *failed))


def _percent(fraction: float | None) -> float | None:
    return fraction * 100 if fraction is not None else None


def sparkline(samples: Sequence[float], width: int) -> str:
    """Timing samples in launch order as block characters, averaged into `width` buckets."""
    if not samples or width <= 0:
        return ""
    buckets = [samples[i * len(samples) // width:(i + 1) * len(samples) // width] or [samples[-1]]
               for i in range(min(width, len(samples)))]
    means = [sum(b) / len(b) for b in buckets]
    low, high = min(means), max(means)
    blocks = "▁▂▃▄▅▆▇█"
    return "".join(blocks[0 if high == low else round((m - low) / (high - low) * 7)] for m in means)


# -- groups --------------------------------------------------------------------------------------
def group_table(session: Session, rules: Rules, by: str = "role", variants: list[str] | None = None) -> Table:
    """Per group and variant: layers, kernels per call, ms per call, share, speed-up against the baseline."""
    comparisons = compare_groups(session, by, rules, variants)
    names = list(comparisons[0].rows) if comparisons else []
    base_of = _group_baselines(session, names)
    columns = [Column(by)]
    for name in names:
        columns += [Column(f"{name} layers", "count")] if by != "kernel" else []
        columns += [Column(f"{name} k/call", "count"), Column(f"{name} ms", "ms"), Column(f"{name} %", "pct"),
                    Column(f"{name} speed-up (>1 faster)", "speedup")]
    rows = []
    for c in comparisons:
        row: list = [c.group]
        for name in names:
            r = c.rows[name]
            base_name = base_of.get(name)
            base_row = c.rows.get(base_name) if base_name else None
            if by != "kernel":
                row.append(r.layers if r else None)
            speedup = ratio(base_row.time_ms if base_row else None, r.time_ms if r else None)
            row += [r.kernels_per_call if r else None, r.time_ms if r else None, _percent(r.share if r else None),
                    speedup]
        rows.append(tuple(row))
    bases = sorted(set(base_of.values()))
    notes = [captions.GROUP_SPEEDUP.replace("baseline", bases[0] if len(bases) == 1 else "each variant's baseline")]
    notes = notes if bases else []
    notes += [line for name, base in base_of.items() if name != base
              for line in _noise_lines(session, rules, by, base, name, comparisons)]
    untraced = captions.no_kernel_table(session)
    if untraced:
        notes.append(untraced)
    return _table(columns, rows, [c.group for c in comparisons], notes=tuple(notes), time_column=None)


def _noise_lines(session: Session, rules: Rules, by: str, baseline: str, variant: str,
                 comparisons: list[GroupComparison]) -> list[str]:
    """One line naming the groups whose speed-up of `variant` over `baseline` is within noise (their per-call bands
    overlap, `_group_judgement`), with the ratio each shows; none where no group's is."""
    apart = _traces_apart(session, baseline, variant)
    if apart is not None:
        return [apart]
    judged = _group_judgement(session, rules, by, baseline, variant)
    within = [f"{c.group} {speedup:.2f}x" for c in comparisons
              if judged(c.group) == WITHIN and (speedup := _group_speedup(c, baseline, variant)) is not None]
    return [captions.OVERLAPPING_GROUPS.format(variant=variant, groups="; ".join(within))] if within else []


def _traces_apart(session: Session, baseline: str, variant: str) -> str | None:
    """The line saying no group change of `variant` over `baseline` is judged, where their traces ran at different
    paces (`sessions.analyses.noise.paces_apart`); None where they did not."""
    apart = paces_apart(session.variant(baseline), session.variant(variant))
    if apart is None:
        return None
    return captions.TRACES_APART.format(variant=variant, baseline=baseline, pace_a=apart[0], pace_b=apart[1])


def _group_speedup(comparison: GroupComparison, baseline: str, variant: str) -> float | None:
    a, b = comparison.rows.get(baseline), comparison.rows.get(variant)
    return ratio(a.time_ms if a else None, b.time_ms if b else None)


def _group_baselines(session: Session, names: list[str]) -> dict[str, str]:
    """Each shown variant's baseline among the shown variants (sessions.analyses.comparison), where it is shown."""
    found = {}
    for name in names:
        base = baseline_for(session, session.variant(name))
        if base is not None and base.name in names:
            found[name] = base.name
    return found


def pair_of(session: Session, variant: str) -> tuple[str, str] | None:
    """(baseline, variant): `variant` beside its own baseline; the baseline itself gives the default pair."""
    default = default_pair(session)
    baseline = baseline_for(session, session.variant(variant))
    base = baseline.name if baseline is not None else (default[0] if default else None)
    if base is not None and base != variant:
        return base, variant
    return default


def group_pair_table(session: Session, rules: Rules, by: str, baseline: str, variant: str) -> Table:
    """Per group: `variant` beside `baseline`, largest added time first (the groups that explain the verdict on top)."""
    comparisons = compare_groups(session, by, rules, [baseline, variant])
    columns = [Column(by), Column(f"{variant} ms", "ms"), Column(f"{baseline} ms", "ms"),
               Column("delta ms", "delta_ms"), Column(captions.speedup_label(baseline), "speedup"),
               Column(f"{variant} k/call", "count"),
               Column(f"{baseline} k/call", "count"), Column(f"{variant} %", "pct")]
    rows: list[tuple[Any, ...]] = []
    for c in comparisons:
        a, b = c.rows.get(baseline), c.rows.get(variant)
        ms_a, ms_b = (a.time_ms if a else None), (b.time_ms if b else None)
        delta = (ms_b or 0.0) - (ms_a or 0.0) if ms_a is not None or ms_b is not None else None
        speedup = ratio(ms_a, ms_b)
        rows.append((c.group, ms_b, ms_a, delta, speedup, b.kernels_per_call if b else None,
                     a.kernels_per_call if a else None, _percent(b.share if b else None)))
    rows.sort(key=lambda r: -(r[3] if r[3] is not None else float("-inf")))
    notes = [captions.GROUP_SPEEDUP.replace("baseline", baseline), "delta = variant ms - baseline ms per call"]
    apart = _traces_apart(session, baseline, variant)
    if apart is not None:
        notes.append(apart)
    untraced = captions.no_kernel_table(session)
    if untraced:
        notes.append(untraced)
    tone_of = _group_tones(session, rules, by, baseline, variant)
    tones = [tone_of(r[0]) if r[3] is not None else "warn" for r in rows]
    return _table(columns, rows, [r[0] for r in rows], tones,
                  notes=tuple(notes), title=f"{variant} against {baseline}, by {by}", time_column=1)


def _group_tones(session: Session, rules: Rules, by: str, a: str, b: str) -> Callable[[str], Tone]:
    """Each group's change coloured by the noise rule on its per-call times (`_group_judgement`): within noise dim,
    not judged plain."""
    judged = _group_judgement(session, rules, by, a, b)
    return lambda group: _judgement_tone(judged(group))


def _group_judgement(session: Session, rules: Rules, by: str, a: str, b: str) -> Callable[[str], Judgement | None]:
    """Each group's change from variant `a` to `b` by the noise rule on its per-call times, widened by each variant's
    drift (`_drift`); None (not judged) where either side stores no spread, for kernel classes, and where the two
    variants' traces ran at different paces (`sessions.analyses.noise.paces_apart`).

    The layers of every group are gathered in one pass over each variant (not one pass per group)."""
    va, vb = session.variant(a), session.variant(b)
    if by not in ("role", "stage") or paces_apart(va, vb) is not None:
        return lambda group: None
    key = (lambda layer: role_of(layer, rules)) if by == "role" else (lambda layer: stage_of(layer, rules))
    members_a, members_b = _members(va.layers, key), _members(vb.layers, key)
    drift_a, drift_b = _drift(va), _drift(vb)

    def judged(group: str) -> Judgement | None:
        band_a = group_band(members_a.get(group, []), drift_a)
        band_b = group_band(members_b.get(group, []), drift_b)
        return judge(band_a, band_b) if band_a is not None and band_b is not None else None

    return judged


def _members(layers: list[Layer], key: Callable[[Layer], str]) -> dict[str, list[Layer]]:
    """The layers of each group, in engine order."""
    found: dict[str, list[Layer]] = {}
    for layer in layers:
        found.setdefault(key(layer), []).append(layer)
    return found


def group_speedups(session: Session, rules: Rules, by: str = "role") -> dict[str, dict[str, float | None]]:
    """{group: {variant: speed-up}}, for JSON: the same definition as every speed-up column."""
    table = group_table(session, rules, by)
    out: dict[str, dict[str, float | None]] = {}
    for key, row in zip(table.keys, table.rows, strict=False):
        out[key] = {c.label.split(" speed-up")[0]: v
                    for c, v in zip(table.columns, row, strict=False) if c.kind == "speedup"}
    return out


# -- layers and kernels --------------------------------------------------------------------------
def _flag_status(session: Session, only: Variant | None = None) -> dict[tuple[str, str], tuple[Flag, bool]]:
    """(variant, layer) -> (flag, whether the variant's own baseline has the same flag on the same layer); of
    `only`'s layers where it is given."""
    found = {}
    for variant in session.variants if only is None else [only]:
        if variant.status != "ok":
            continue
        baseline = baseline_for(session, variant)
        in_baseline = {(f.layer, f.reason) for f in diagnose(baseline)} if baseline is not None else set()
        for f in diagnose(variant, baseline):
            found[(f.variant, f.layer)] = (f, variant is not baseline and (f.layer, f.reason) in in_baseline)
    return found


def _flag_words(session: Session, flag: Flag, already: bool) -> str:
    baseline = baseline_for(session, session.variant(flag.variant))
    if baseline is not None and flag.variant == baseline.name:
        return "baseline"
    if already and baseline is not None:
        return captions.FLAG_IN_BASELINE.format(baseline=baseline.name)
    return captions.FLAG_NEW.format(variant=flag.variant)


def layer_table(session: Session, variant: Variant, rules: Rules, group: str | None, by: str = "role") -> Table:
    """The layers of one group in one variant; keys are layer names, so another variant finds the same layer."""
    per_layer = kernels_per_layer(variant)
    flags = {layer: status for (name, layer), status in _flag_status(session, variant).items() if name == variant.name}
    key_of = (lambda layer: role_of(layer, rules)) if by == "role" else (lambda layer: stage_of(layer, rules))
    rows: list[tuple[Any, ...]] = []
    keys: list[Any] = []
    tones: list[Tone] = []
    for i, layer in enumerate(variant.layers):
        if group is not None and key_of(layer) != group:
            continue
        flag, already = flags.get(layer.name, (None, False))
        words = f"{flag.reason}, {_flag_words(session, flag, already)}" if flag else ""
        rows.append((layer.name, layer.kind, layer.groups, per_layer[i] if per_layer else None, layer.time_ms,
                     captions.layer_precision(layer, variant), words))
        keys.append(layer.name)
        tones.append(("warn" if already else "bad") if flag else "")
    columns = [Column("layer"), Column("kind"), Column("groups", "count"), Column("k/call", "count"),
               Column("ms", "ms"), Column("precision"), Column("flag")]
    return _table(columns, rows, keys, tones, time_column=4, title=f"{group or 'all layers'} in {variant.name}")


def layer_index(variant: Variant, name: str) -> int | None:
    return next((i for i, layer in enumerate(variant.layers) if layer.name == name), None)


KERNEL_COLUMNS = (Column("kernel"), Column("count/call", "count"), Column("us/call", "us"), Column("mean us", "us"),
                  Column("grid"), Column("block"))


def kernel_table(session: Session, variant: Variant, layer: str | None) -> Table:
    """Kernels of one layer (or all) aggregated by name: launches and time per call, launch shape."""
    title = f"{layer or 'all layers'} in {variant.name}"
    table = variant.kernels
    index = layer_index(variant, layer) if layer is not None else None
    notes: tuple[str, ...] = ()
    if table is None or (layer is not None and index is None):
        missing = (captions.no_variant_kernel_table(session, variant) if table is None
                   else f"{variant.name} has no layer {layer}")
        notes = (missing,)
        return _table(KERNEL_COLUMNS, [], [], notes=notes, title=title, time_column=2)
    calls = max(variant.trace.calls if variant.trace else 1, 1)
    count: Counter[int] = Counter()
    total: defaultdict[int, int] = defaultdict(int)
    shape: dict[int, tuple] = {}
    for i, (name, owner, duration) in enumerate(zip(table.name, table.layer, table.duration_ns, strict=False)):
        if index is not None and owner != index:
            continue
        count[name] += 1
        total[name] += duration
        shape.setdefault(name, (table.grid[i], table.block[i]))
    rows = [(table.names[n], c / calls, total[n] / 1e3 / calls, total[n] / 1e3 / c, _dim3(shape[n][0]),
             _dim3(shape[n][1]))
            for n, c in count.most_common()]
    return _table(KERNEL_COLUMNS, rows, [r[0] for r in rows], title=title, time_column=2)


def absent_layer(variant: str, layer: str) -> Table:
    return _table(KERNEL_COLUMNS, [], [], notes=(f"{layer} is not in {variant}",), title=f"{layer} in {variant}")


def _dim3(value: Sequence[int]) -> str:
    return "x".join(map(str, value))


def all_kernels_table(session: Session, variant: Variant) -> Table:
    """Every kernel record in launch order: the large table."""
    columns = (Column("#", "count"), Column("call", "count"), Column("layer"), Column("kernel"), Column("us", "us"),
               Column("stream", "count"), Column("grid"), Column("block"))
    table = variant.kernels
    if table is None:
        return _table(columns, [], [], notes=(captions.no_variant_kernel_table(session, variant),),
                      title=f"all kernels of {variant.name}")
    names = [layer.name for layer in variant.layers]
    rows = [
        (i, table.call[i], names[table.layer[i]] if table.layer[i] >= 0 else "(outside layers)",
         table.names[table.name[i]], table.duration_ns[i] / 1e3, table.stream[i], _dim3(table.grid[i]),
         _dim3(table.block[i]))
        for i in range(len(table))
    ]
    return _table(columns, rows, list(range(len(rows))), title=f"all kernels of {variant.name}", time_column=4)


# -- what the layers asked for in FP8 ran -------------------------------------------------------------
def precision_table(session: Session, rules: Rules, variants: list[str] | None = None) -> Table:
    """Per variant and role, the layers its recipe asked for in FP8: how many ran FP8, how many fp16 by timing and
    how many fp16 because FP8 was refused, and the libraries whose tactics ran them; no rows where no variant's layers
    record what they were asked (`sessions.analyses.precision_choice`)."""
    columns = (Column("variant"), Column("role"), Column("asked", "count"),
               *(Column(word, "count") for word in PRECISIONS_AS_RUN), Column("libraries"))
    rows: list[tuple[Any, ...]] = []
    keys: list[Any] = []
    for name, row in precision_rows(session, rules, variants):
        libraries = ", ".join(f"{library} {count}" for library, count in row.libraries.items()) or None
        rows.append((name, row.role, row.asked, *(row.ran[word] for word in PRECISIONS_AS_RUN), libraries))
        keys.append((name, row.role))
    return _table(columns, rows, keys, title=captions.PRECISION_BY_ROLE)


def precision_rows(session: Session, rules: Rules, variants: list[str] | None = None
                   ) -> list[tuple[str, RolePrecision]]:
    """Each variant's roles of layers asked for in FP8 (`precision_by_role`), named by variant (`variants`: only
    these)."""
    return [(variant.name, row) for variant in session.variants if variants is None or variant.name in variants
            for row in precision_by_role(variant, rules)]


# -- flagged layers ------------------------------------------------------------------------------
def flag_table(session: Session, variants: list[str] | None = None) -> Table:
    """Flagged layers, each saying whether the baseline has the same flag (then it is not the variant's doing)."""
    baseline = reference(session)
    base = baseline.name if baseline else "baseline"
    columns = (Column("variant"), Column("layer"), Column("reason"), Column("since"), Column("k/call", "count"),
               Column("groups", "count"), Column(f"{base} k/call", "count"), Column("top kernel"))
    rows: list[tuple[Any, ...]] = []
    keys: list[Any] = []
    tones: list[Tone] = []
    for (name, layer), (f, already) in _flag_status(session).items():
        if variants is not None and name not in variants:
            continue
        top = f"{f.evidence[0][1]}x {f.evidence[0][0]}" if f.evidence else None
        rows.append((name, layer, f.reason, _flag_words(session, f, already), f.kernels_per_call, f.groups,
                     f.baseline_kernels_per_call, top))
        keys.append((name, layer))
        tones.append("warn" if already else "bad")
    return _table(columns, rows, keys, tones, title="flagged layers")


def flags_of(session: Session, variants: list[str] | None = None) -> list[tuple[Flag, bool]]:
    return [status for (name, _), status in _flag_status(session).items() if variants is None or name in variants]


# -- two variants side by side -------------------------------------------------------------------
@dataclass(frozen=True)
class LayerPair:
    a: str | None  # layer name in variant A (None: only in B)
    b: str | None


def comparison_table(session: Session, a: str, b: str, rules: Rules) -> Table:
    """Per layer of two variants: time and kernels per call, and the deltas; largest cost first."""
    va, vb = session.variant(a), session.variant(b)
    alignment = align_layers(va.layers, vb.layers)
    pairs, only_a, only_b = alignment.pairs, alignment.only_a, alignment.only_b
    ka, kb = kernels_per_layer(va), kernels_per_layer(vb)
    matched: list[tuple[int | None, int | None]] = [*pairs, *((i, None) for i in only_a), *((None, j) for j in only_b)]
    rows, keys = [], []
    for i, j in matched:
        la = va.layers[i] if i is not None else None
        lb = vb.layers[j] if j is not None else None
        layer = lb or la
        assert layer is not None
        ms_a, ms_b = (la.time_ms if la else None), (lb.time_ms if lb else None)
        k_a = ka[i] if ka is not None and i is not None else None
        k_b = kb[j] if kb is not None and j is not None else None
        rows.append((layer.name, role_of(layer, rules), ms_a, ms_b, _delta(ms_a, ms_b, la, lb), k_a, k_b,
                     _delta(k_a, k_b, la, lb)))
        keys.append(LayerPair(la.name if la else None, lb.name if lb else None))
    order = sorted(range(len(rows)), key=lambda r: -(rows[r][4] or 0.0))
    rows, keys = [rows[r] for r in order], [keys[r] for r in order]
    columns = (Column("layer"), Column("role"), Column(f"{a} ms", "ms"), Column(f"{b} ms", "ms"),
               Column("delta ms", "delta_ms"), Column(f"{a} k/call", "count"), Column(f"{b} k/call", "count"),
               Column("delta kernels", "delta_count"))
    total_a, total_b = sum(r[2] or 0.0 for r in rows), sum(r[3] or 0.0 for r in rows)
    notes = ((f"per-layer kernel time per call: {a} {total_a:.3f} ms, {b} {total_b:.3f} ms "
              f"(delta {total_b - total_a:+.3f} ms)"),)
    layer_a, layer_b = {layer.name: layer for layer in va.layers}, {layer.name: layer for layer in vb.layers}
    drift_a, drift_b = _drift(va), _drift(vb)
    tones: list[Tone] = []
    for row, key in zip(rows, keys, strict=False):
        la, lb = layer_a.get(key.a) if key.a else None, layer_b.get(key.b) if key.b else None
        if row[4] is None:
            tones.append("warn")
        elif la is None or lb is None:
            tones.append("bad" if lb is not None else "good")  # a layer of its own: all its time is new or gone
        else:
            band_a, band_b = layer_band(la, drift_a), layer_band(lb, drift_b)
            tones.append(_judgement_tone(judge(band_a, band_b) if band_a is not None and band_b is not None else None))
    return _table(columns, rows, keys, tones, notes=notes, title=f"{b} against {a}, per layer", time_column=4)


def _delta(a: float | None, b: float | None, layer_a: object, layer_b: object) -> float | None:
    """B - A; a layer that exists on one side only counts as zero on the other (its whole cost is new)."""
    if layer_a is None:
        a = 0.0
    if layer_b is None:
        b = 0.0
    return b - a if a is not None and b is not None else None


def _drift(variant: Variant) -> Band | None:
    """The variant's latency band: how far its timed rounds drifted, which per-call bands widen by."""
    return latency_band(variant.latency) if variant.latency is not None else None


def _judgement_tone(judgement: Judgement | None) -> Tone:
    """A judgement's colour: within noise dim, not judged (None: no spread stored) plain."""
    if judgement is None:
        return ""
    return "dim" if judgement == WITHIN else tone(judgement)


def default_pair(session: Session) -> tuple[str, str] | None:
    """The first FP8 variant against its own baseline; else the next variant against the reference."""
    ok = [v for v in session.variants if v.status == "ok"]
    fp8 = [v for v in ok if v.precision.startswith("fp8")]
    for variant in fp8:
        baseline = baseline_for(session, variant)
        if baseline is not None and baseline is not variant:
            return baseline.name, variant.name
    first = reference(session) or (ok[0] if ok else None)
    others = [v for v in ok if first is not None and v.name != first.name]
    return (first.name, others[0].name) if first is not None and others else None


# -- a session diff ------------------------------------------------------------------------------
def diff_table(diff: SessionDiff) -> Table:
    """The changes of `sessions.analyses.diff.diff_sessions`, regressions first, then by size."""
    columns = (Column("variant"), Column("change"), Column("item"), Column("A"), Column("B"), Column("delta %", "pct"),
               Column("status"))
    ordered = sorted(diff.changes, key=lambda c: (not c.regression, -abs(c.relative or 0)))
    rows: list[tuple[Any, ...]] = []
    tones: list[Tone] = []
    for c in ordered:
        rel = c.relative
        rows.append((c.variant, c.what, c.item, _plain(c.a), _plain(c.b), _percent(rel),
                     "REGRESSION" if c.regression else c.note))
        if c.regression:
            tones.append("bad")
        elif rel is not None and rel < -diff.threshold:
            tones.append("good")
        else:
            tones.append("dim" if rel is not None and abs(rel) <= diff.threshold else "")
    notes = (f"A: {diff.a}", f"B: {diff.b}", *diff.notes)
    return _table(columns, rows, list(range(len(rows))), tones, notes=notes, title="diff")


def _plain(value: float | str | None) -> str | None:
    """A and B hold latencies, counts or words: each written as itself."""
    if value is None or isinstance(value, str):
        return value
    return str(round(value)) if float(value).is_integer() else f"{value:.3f}"


# -- detail of one row ---------------------------------------------------------------------------
def row_detail(table: Table, row: tuple) -> list[tuple[str, str]]:
    """Every cell of a row in full (no column width cut): what a detail pane shows."""
    return [(c.label, format_value(v, c.kind)) for c, v in zip(table.columns, row, strict=False)]


@dataclass
class Matches:
    rows: list[int] = field(default_factory=list)
    total: float | None = None


def filter_rows(table: Table, pattern: str | None) -> Matches:
    """Rows whose text cells match `pattern` (case-insensitive), and their summed time where the table has one."""
    if not pattern:
        return Matches(list(range(len(table.rows))))
    regex = re.compile(pattern, re.IGNORECASE)
    kept = [i for i, row in enumerate(table.rows) if any(isinstance(c, str) and regex.search(c) for c in row)]
    total = None
    if table.time_column is not None:
        total = sum(table.rows[i][table.time_column] or 0.0 for i in kept)
    return Matches(kept, total)
