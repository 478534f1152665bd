"""Attribute kernels (or CPU ops) to the layer ranges that were open when they were launched.

One algorithm serves every tracer: CUPTI (NVTX markers + driver/runtime launch records), the
torch.profiler trace (record_function annotations + cuda_runtime events) and CPU op traces.

A kernel belongs to the innermost range open on the launching thread at launch time: the launch,
not the kernel's run on the GPU, decides, because kernels run later than the host code that issued
them. Ranges whose name starts with `CALL_RANGE_PREFIX` mark one inference each; they number the
calls and never own kernels.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from sessions.documents.model import KernelTable, Layer, TraceSummary

CALL_RANGE_PREFIX = "trt-inspect/call/"
ROOT = "(model)"  # the layer that owns what the model's own code launches outside every module


@dataclass(frozen=True, slots=True)
class Range:
    name: str
    thread: int
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class Launch:
    """A host-side launch (a runtime or driver API call, or the CPU op itself)."""

    correlation: int
    thread: int
    time: int


@dataclass(frozen=True, slots=True)
class KernelRecord:
    name: str
    start: int
    end: int
    correlation: int
    stream: int = 0
    grid: tuple[int, int, int] = (0, 0, 0)
    block: tuple[int, int, int] = (0, 0, 0)


@dataclass
class Attribution:
    owners: list[str | None]  # per kernel: the innermost layer range, None outside every layer
    calls: list[int]  # per kernel: the call range it was launched in, -1 outside every call
    unmatched_launch: int = 0  # kernels whose correlation id matched no launch record
    call_count: int = 0


def innermost(queries: list[tuple[int, int]], ranges: list[Range]) -> list[tuple[str | None, int]]:
    """For each (thread, time): the innermost open non-call range and the index of the open call range.

    Ranges on one thread are assumed to nest (NVTX push/pop and Python hooks do). One sweep per
    thread over ranges and queries sorted by time.
    """
    call_index: dict[Range, int] = {}
    for r in sorted((r for r in ranges if r.name.startswith(CALL_RANGE_PREFIX)), key=lambda r: r.start):
        call_index[r] = len(call_index)
    by_thread: dict[int, list[Range]] = defaultdict(list)
    for r in ranges:
        by_thread[r.thread].append(r)
    for rs in by_thread.values():
        rs.sort(key=lambda r: (r.start, -r.end))

    result: list[tuple[str | None, int]] = [(None, -1)] * len(queries)
    order = sorted(range(len(queries)), key=lambda i: (queries[i][0], queries[i][1]))
    thread_of = None
    stack: list[Range] = []
    pending: list[Range] = []
    next_range = 0
    for i in order:
        thread, time = queries[i]
        if thread != thread_of:
            thread_of, stack, pending, next_range = thread, [], by_thread.get(thread, []), 0
        while next_range < len(pending) and pending[next_range].start <= time:
            opened = pending[next_range]
            while stack and stack[-1].end < opened.start:
                stack.pop()
            stack.append(opened)
            next_range += 1
        while stack and stack[-1].end < time:
            stack.pop()
        layer: str | None = None
        call = -1
        for r in reversed(stack):
            if r.end < time:
                continue
            if r in call_index:
                call = call_index[r]
                break
            if layer is None:
                layer = r.name
        result[i] = (layer, call)
    return result


def attribute(kernels: list[KernelRecord], launches: list[Launch], ranges: list[Range]) -> Attribution:
    by_correlation = {launch.correlation: launch for launch in launches}
    queries: list[tuple[int, int]] = []
    matched: list[int] = []
    unmatched = 0
    for k, kernel in enumerate(kernels):
        launch = by_correlation.get(kernel.correlation)
        if launch is None:
            unmatched += 1
            continue
        queries.append((launch.thread, launch.time))
        matched.append(k)
    owners: list[str | None] = [None] * len(kernels)
    calls = [-1] * len(kernels)
    for k, (layer, call) in zip(matched, innermost(queries, ranges), strict=False):
        owners[k] = layer
        calls[k] = call
    call_count = sum(1 for r in ranges if r.name.startswith(CALL_RANGE_PREFIX))
    return Attribution(owners=owners, calls=calls, unmatched_launch=unmatched, call_count=call_count)


@dataclass
class LayerIndex:
    """Layers in first-seen order, found by name; new names are appended as they appear."""

    layers: list[Layer] = field(default_factory=list)
    _index: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._index = {layer.name: i for i, layer in enumerate(self.layers)}

    def index(self, name: str, kind: str = "unknown") -> int:
        found = self._index.get(name)
        if found is None:
            found = self._index[name] = len(self.layers)
            self.layers.append(Layer(name=name, kind=kind))
        return found


def kernel_table(kernels: list[KernelRecord], attribution: Attribution, layers: LayerIndex) -> KernelTable:
    """Columns for the session, times relative to the first kernel, layers indexed in `layers`."""
    table = KernelTable()
    if not kernels:
        return table
    origin = min(k.start for k in kernels)
    name_ids: dict[str, int] = {}
    for kernel, owner, call in zip(kernels, attribution.owners, attribution.calls, strict=False):
        name_id = name_ids.get(kernel.name)
        if name_id is None:
            name_id = name_ids[kernel.name] = len(table.names)
            table.names.append(kernel.name)
        table.name.append(name_id)
        table.layer.append(layers.index(owner) if owner is not None else -1)
        table.call.append(call)
        table.start_ns.append(kernel.start - origin)
        table.duration_ns.append(kernel.end - kernel.start)
        table.stream.append(kernel.stream)
        table.grid.append(list(kernel.grid))
        table.block.append(list(kernel.block))
    return table


def assign_layer_times(table: KernelTable, layers: list[Layer], calls: int) -> None:
    """Per-layer time = the layer's own kernels' (or ops') duration per call; with two calls or more, also
    the layer's time in each call (`Layer.call_times_ms`, the spread `sessions.analyses.noise` judges by)."""
    total_ns = [0] * len(layers)
    per_call = calls >= 2
    call_ns = [[0] * calls for _ in layers] if per_call else []
    for layer, call, duration in zip(table.layer, table.call, table.duration_ns, strict=False):
        if layer >= 0:
            total_ns[layer] += duration
            if per_call and 0 <= call < calls:
                call_ns[layer][call] += duration
    for i, (layer, ns) in enumerate(zip(layers, total_ns, strict=False)):
        layer.time_ms = ns / 1e6 / max(calls, 1)
        layer.call_times_ms = [t / 1e6 for t in call_ns[i]] if per_call else []


@dataclass
class TraceRecords:
    """What a tracer saw over `calls` inferences, before attribution."""

    tracer: str  # cupti | torch-profiler | cpu-ops
    unit: str  # kernel | op
    calls: int
    kernels: list[KernelRecord]
    launches: list[Launch]
    ranges: list[Range]
    dropped: int = 0
    note: str = ""


def summarize(records: TraceRecords, layers: LayerIndex) -> tuple[KernelTable, TraceSummary]:
    """Attribute a trace and turn it into the session's kernel table and trace summary. A record that ends before
    it starts (an activity record the tracer never completed) is left out and counted with the dropped ones."""
    kernels = [k for k in records.kernels if k.end >= k.start]
    incomplete = len(records.kernels) - len(kernels)
    attribution = attribute(kernels, records.launches, records.ranges)
    table = kernel_table(kernels, attribution, layers)
    assign_layer_times(table, layers.layers, records.calls)
    notes = [records.note] if records.note else []
    if incomplete:
        notes.append(f"{incomplete} {records.unit} records ended before they started (never completed): left out, "
                     "counted as dropped")
    if attribution.unmatched_launch:
        notes.append(f"{attribution.unmatched_launch} {records.unit}s had no launch record")
    if attribution.call_count != records.calls:
        notes.append(f"expected {records.calls} call ranges, found {attribution.call_count}")
    summary = TraceSummary(
        tracer=records.tracer,
        unit=records.unit,
        calls=records.calls,
        records=len(kernels),
        unattributed=sum(1 for owner in attribution.owners if owner is None),
        dropped=records.dropped + incomplete,
        note="; ".join(notes),
    )
    return table, summary


def prune_unused(layers: list[Layer], table: KernelTable, keep: set[str] = frozenset()) -> list[Layer]:
    """Drop layers that own no record (except `keep`), renumbering the table's layer column."""
    used = set(table.layer)
    kept = [i for i, layer in enumerate(layers) if i in used or layer.name in keep]
    renumber = {old: new for new, old in enumerate(kept)}
    table.layer = [renumber.get(i, -1) for i in table.layer]
    return [layers[i] for i in kept]
