"""Per-layer profiles (`--exportProfile`, TensorRT 7 `.profile`, IProfiler samples): the `profile` role.

Profiles come with or without the `{"count": N}` header and `medianMs`; an IProfiler written by the
API over many runs (`{layer name: [ms, ...]}`) gives each layer its median and spread (p10 to p90)
instead of one average. Records pair with the build's
layers by position where the names agree there, else by name, and a join that is not a pairing is refused.
"""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from profilers.trt_import import documents
from profilers.trt_import.kinds import (
    PROFILE,
    FileKind,
    Role,
    first_record,
    kind_of,
    register_kind,
    register_role,
    wrong_kind,
)
from profilers.trt_import.layer_info import named_layer, normalize_name, profile_index
from sessions.documents.errors import InputError
from sessions.documents.model import Layer


@dataclass
class ProfileRecord:
    name: str
    total_ms: float
    average_ms: float
    median_ms: float | None
    percentage: float | None
    spread_ms: tuple[float, float] | None = None  # p10 and p90 of a layer's samples
    samples: int | None = None


@dataclass
class Profile:
    count: int | None  # inferences profiled, where the header says
    records: list[ProfileRecord]


Check = Callable[[Any, str], float]


def required_field(record: dict[str, Any], key: str, origin: str, position: int, check: Check) -> float:
    """`record[key]` through `check` (a `documents` bound); InputError where it is absent."""
    value = optional_field(record, key, origin, position, check)
    if value is None:
        raise InputError(f"{origin}: record {position} has no {key!r}")
    return value


def optional_field(record: dict[str, Any], key: str, origin: str, position: int, check: Check) -> float | None:
    value = record.get(key)
    if value is None:
        return None
    if check is documents.time_ms and (plain := documents.plain_time_ms(value)) is not None:
        return plain
    return check(value, f"{origin}: record {position} {key}")


register_role(Role(PROFILE, "per-layer profile (--exportProfile); alone, it names the layers too", order=2))
SAMPLES = register_kind(FileKind(
    "IProfiler per-layer samples (layer name -> its times over many runs): pass it as --profile", PROFILE, rank=40,
    head=r'^\s*\{\s*"(?:[^"\\]|\\.)*"\s*:\s*\[\s*[-+.0-9]',
    recognise=lambda doc: isinstance(doc, dict) and bool(doc) and all(
        isinstance(v, list) and v and all(type(x) in (int, float) for x in v) for v in doc.values())))
EXPORTED = register_kind(FileKind(
    "a trtexec --exportProfile file: pass it as --profile", PROFILE, rank=50, suffixes=(".profile.json", ".profile"),
    head=r'^\s*\[\s*\{[\s\S]*?"(?:timeMs|averageMs)"\s*:',
    recognise=lambda doc: (first := first_record(doc)) is not None and "name" in first and (
        "timeMs" in first or "averageMs" in first)))


def parse_samples(doc: dict[str, Any], origin: str) -> Profile:
    """An IProfiler's samples per layer: each layer's median (its time) and its p10 / p90 spread."""
    records = []
    for name, values in doc.items():
        if profile_index(name):
            continue
        times = [documents.time_ms(v, f"{origin}: {name[:60]!r} sample {i}") for i, v in enumerate(values)]
        deciles = statistics.quantiles(times, n=10, method="inclusive") if len(times) > 1 else [times[0]] * 9
        records.append(ProfileRecord(normalize_name(name), sum(times), statistics.median(times),
                                     statistics.median(times), None, (deciles[0], deciles[-1]), len(times)))
    if not records:
        raise InputError(f"{origin}: the samples hold no layer")
    return Profile(max(r.samples or 0 for r in records), records)


def parse_profile(doc: Any, origin: str) -> Profile:
    """A per-layer profile: trtexec's `--exportProfile` list, or an IProfiler's samples per layer."""
    kind = kind_of(doc)
    if kind is SAMPLES:
        return parse_samples(doc, origin)
    if not isinstance(doc, list) or (kind is not None and kind is not EXPORTED):
        raise wrong_kind(doc, origin, "a trtexec --exportProfile file (a JSON list of per-layer records)")
    count = None
    records: list[ProfileRecord] = []
    stated: list[Stated] = []
    for position, item in enumerate(doc):
        if not isinstance(item, dict):
            raise InputError(f"{origin}: record {position} is not an object")
        if "count" in item and "name" not in item:
            count = documents.count(item["count"], f"{origin}: the header's count", positive=True)
            continue
        if not isinstance(item.get("name"), str):
            raise InputError(f"{origin}: record {position} has no layer name")
        if profile_index(item["name"]):
            continue
        total = required_field(item, "timeMs", origin, position, documents.time_ms)
        average = optional_field(item, "averageMs", origin, position, documents.time_ms)
        share = optional_field(item, "percentage", origin, position, documents.percent)
        stated.append(Stated(position, total, average, share))
        records.append(
            ProfileRecord(
                name=normalize_name(item["name"]),
                total_ms=total,
                average_ms=average if average is not None else total / max(count or 1, 1),
                median_ms=optional_field(item, "medianMs", origin, position, documents.time_ms),
                percentage=share,
            )
        )
    if not records:
        raise InputError(f"{origin}: the profile holds no layer records")
    check_agreement(stated, count, origin)
    return Profile(count, records)


@dataclass
class Stated:
    """What one record of an `--exportProfile` file states: its total over the run, average and share."""

    position: int
    total_ms: float
    average_ms: float | None
    percentage: float | None


AVERAGE_AGREEMENT = 0.01  # a record's averageMs times the header's count against its timeMs, relative
SHARE_AGREEMENT = 0.5  # a record's percentage against its timeMs' share of the run, in points


def check_agreement(stated: list[Stated], count: int | None, origin: str) -> None:
    """Refuse (one InputError line) a profile whose records contradict themselves. trtexec writes each record's
    `averageMs` as its `timeMs` over the header's `count`, and its `percentage` as its `timeMs`' share of the whole
    run (every public file in ../shared agrees to 1e-5 relative and 1e-4 points): a record whose average is off by
    more than AVERAGE_AGREEMENT, or whose percentage is off by more than SHARE_AGREEMENT from the one share of the
    run that the records' percentages and times imply together, was edited, or its file mixes runs, and no figure of
    it can be trusted. Records may be missing (their share is then missing from the sum), never extra: the
    percentages add up to at most 100 (to SHARE_AGREEMENT), and where the records took time they hold some of it.
    The share of the run one ms is, is the records' median one, so an edited record is the one named."""
    for record in stated:
        if count is None or record.average_ms is None:
            continue
        expected = record.total_ms / count
        if abs(record.average_ms - expected) > AVERAGE_AGREEMENT * max(record.average_ms, expected):
            raise InputError(f"{origin}: record {record.position} states averageMs {record.average_ms:g} but timeMs "
                             f"{record.total_ms:g} over the header's {count} inferences is {expected:g}: a record "
                             "edited, or the count of another run")
    shared = [record for record in stated if record.percentage is not None]
    timed, percent = sum(r.total_ms for r in shared), sum(r.percentage or 0.0 for r in shared)
    if not shared or timed <= 0:
        return
    if percent > 100 + SHARE_AGREEMENT or percent <= 0:
        raise InputError(f"{origin}: the records' percentages add up to {percent:g} %, where their times make them "
                         "a share of one run: records edited, or of several runs")
    # the percentage one ms of the run is, as most records state it: one edited record moves no other's expectation
    stated_per_ms = [r.percentage / r.total_ms for r in shared if r.total_ms > 0 and r.percentage]
    if not stated_per_ms:
        raise InputError(f"{origin}: no record that took time states a share of the run: records edited")
    per_ms = statistics.median(stated_per_ms)
    worst = max(shared, key=lambda r: abs((r.percentage or 0.0) - per_ms * r.total_ms))
    expected = per_ms * worst.total_ms
    if abs((worst.percentage or 0.0) - expected) > SHARE_AGREEMENT:
        raise InputError(f"{origin}: record {worst.position} states {worst.percentage:g} % of the run where its "
                         f"timeMs makes {expected:.2f} % (as the other records' do): a record edited, or records "
                         "of another run")


@dataclass
class Pairing:
    by_position: bool
    matched: int
    unmatched_layers: list[str]
    unmatched_records: list[str]


PAIRING_MIN = 0.9  # of the layers and of the records: below this, the files describe different engines


def layers_from_profile(profile: Profile) -> list[Layer]:
    """Layers named by a profile alone (TensorRT 7 `.profile`, or a profile without layer information)."""
    layers = [named_layer(record.name) for record in profile.records]
    for layer, record in zip(layers, profile.records, strict=False):
        _apply(layer, record)
    for before, layer in itertools.pairwise(layers):
        if before.op == "dla" and layer.op == "reformat":  # the first GPU reformat after a DLA block waits for the DLA
            layer.op = "dla"
            layer.attrs["device"] = "dla"
            layer.attrs["note"] = "reformatter after a DLA block: its time includes waiting for the DLA"
    return layers


def pair_profile(layers: list[Layer], profile: Profile, origin: str) -> Pairing:
    """Give each layer its profiled time: by position when names agree there, else by name.

    Refuses (InputError) when fewer than PAIRING_MIN of the layers or of the records pair: one
    engine's layers with another engine's profile (fp32 layers, fp16 profile) still share most names.
    """
    names = [layer.name for layer in layers]
    if names == [r.name for r in profile.records]:
        for layer, record in zip(layers, profile.records, strict=False):
            _apply(layer, record)
        return Pairing(True, len(layers), [], [])
    remaining: dict[str, list[ProfileRecord]] = {}
    for record in profile.records:
        remaining.setdefault(record.name, []).append(record)
    unmatched_layers = []
    matched = 0
    for layer in layers:
        queue = remaining.get(layer.name)
        if queue:
            _apply(layer, queue.pop(0))
            matched += 1
        else:
            unmatched_layers.append(layer.name)
    unmatched_records = [r.name for queue in remaining.values() for r in queue]
    if matched < PAIRING_MIN * len(layers) or matched < PAIRING_MIN * len(profile.records):
        example = unmatched_layers[0] if unmatched_layers else unmatched_records[0] if unmatched_records else "?"
        raise InputError(
            f"{origin} does not pair with the layer information: {matched} of {len(layers)} layers and of "
            f"{len(profile.records)} profile records pair by name, below {PAIRING_MIN:.0%} "
            f"(first unpaired: {example[:80]!r}); "
            "were both files written for the same engine?"
        )
    return Pairing(False, matched, unmatched_layers, unmatched_records)


def _apply(layer: Layer, record: ProfileRecord) -> None:
    layer.time_ms = record.average_ms
    if record.median_ms is not None:
        layer.attrs["median_ms"] = record.median_ms
    if record.percentage is not None:
        layer.attrs["percentage"] = record.percentage
    if record.spread_ms is not None:
        layer.attrs["p10_ms"], layer.attrs["p90_ms"] = record.spread_ms
        layer.attrs["samples"] = record.samples
