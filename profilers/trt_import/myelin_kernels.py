"""A profile's Myelin kernel records summed into the Myelin layer they ran for.

TensorRT's profiler (10.x `--dumpProfile` tables and `--exportProfile`) writes one record for each kernel
a Myelin layer runs, named `<kernel>_myl<i>_<k>` (`sessions.documents.trt_names.MYELIN_KERNEL`): i is the Myelin
layer's index in the engine's layer list. Layer information that lists the Myelin layer once (a verbose
build's `Layer(Myelin): {ForeignNode[...]}` line, names-only files) has no layer of those names; a record
is summed into layer i only where layer i is a Myelin layer no record names, so nothing is joined by a
name's words and a record pointing anywhere else is left for the pairing to list.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from profilers.trt_import.profile import Profile, ProfileRecord
from sessions.documents.model import Layer
from sessions.documents.trt_names import MYELIN_KERNEL

KERNEL = re.compile(MYELIN_KERNEL)


@dataclass
class Folded:
    profile: Profile
    kernels: dict[str, list[str]]  # Myelin layer name -> the kernel records summed into it, in the profile's order


def _layer_index(record: ProfileRecord, layers: list[Layer], named: set[str], recorded: set[str]) -> int | None:
    """The index of the Myelin layer a kernel record ran for; None for any other record."""
    match = KERNEL.search(record.name)
    if match is None or record.name in named:
        return None
    index = int(match.group(1))
    if index >= len(layers) or layers[index].op != "myelin" or layers[index].name in recorded:
        return None
    return index


def _summed(name: str, records: list[ProfileRecord]) -> ProfileRecord:
    """One record of a layer's kernels: times and shares add up; a median of the sum is not the sum of medians."""
    shares = [r.percentage for r in records]
    return ProfileRecord(name, sum(r.total_ms for r in records), sum(r.average_ms for r in records), None,
                         sum(s for s in shares if s is not None) if all(s is not None for s in shares) else None)


def fold_myelin_kernels(profile: Profile, layers: list[Layer]) -> Folded:
    """The profile with each Myelin layer's kernel records replaced by one record of the layer's name, where the
    first of them stood; the profile as it is where no record is a kernel of a Myelin layer listed once."""
    named = {layer.name for layer in layers}
    recorded = {record.name for record in profile.records}
    groups: dict[int, list[ProfileRecord]] = {}
    for record in profile.records:
        index = _layer_index(record, layers, named, recorded)
        if index is not None:
            groups.setdefault(index, []).append(record)
    if not groups:
        return Folded(profile, {})
    first = {id(records[0]): index for index, records in groups.items()}
    folded = {id(r) for records in groups.values() for r in records}
    merged = []
    for record in profile.records:
        if id(record) in first:
            index = first[id(record)]
            merged.append(_summed(layers[index].name, groups[index]))
        elif id(record) not in folded:
            merged.append(record)
    kernels = {layers[index].name: [r.name for r in records] for index, records in sorted(groups.items())}
    return Folded(Profile(profile.count, merged), kernels)
