"""Which layer of one engine is which layer of another, across different fusions and exports.

TensorRT names a fused layer by joining the names of its ONNX nodes with ' + ' (detailed files also
list them as `[ONNX Layer: ...]` metadata). Two engines of one model share those nodes even when a
residual add or an activation fused into a different convolution, so layers are matched by the
nodes they contain, weighted towards the convolution / GEMM that dominates each layer; then by
name; then by signature (kind, shape parameters, tensor sizes); then, for convolutions and GEMMs
only, by their shape parameters in engine order (a stem renamed and fed a padded input); last,
copies by the layer they copy for. Copies never pair by signature: a 0 ms copy has the signature of many others.
A layer left over whose nodes all sit in one layer of the other engine was fused into it: it is
reported as fused, not removed or new. Each layer is a candidate only for the few holders of a
node nearest its position, so engines whose layers share node names match in n log n.

Node names are compared in a canonical form: quantization nodes and weight names are left out (a
QAT export has them, the float one does not), TF's `quant_` prefixes are dropped, and ONNX's
numbered names (`Conv_9`) become the op and its rank among that op's nodes (the first Conv), since
inserted Q/DQ nodes shift every number.
"""

from __future__ import annotations

import bisect
import functools
import re
from collections import defaultdict, deque
from dataclasses import dataclass, field

from sessions.analyses.groups import builtin_rules, name_parts, op_from_name
from sessions.documents.model import Layer

QUANT_NODE = re.compile(r"[Qq]uantize|QuantLinearNode|DequantLinearNode|_quantizer|\.weight$"
                        r"|ReadVariableOp|^\(Unnamed Layer")
QUANT_PREFIX = re.compile(r"(^|/)quant_")
NUMBERED = re.compile(r"^([A-Za-z][A-Za-z0-9]*)_(\d+)$")
DOMINANT_WEIGHT = 10  # a shared convolution / GEMM node outweighs any number of shared activations
DOMINANT_OPS = ("conv", "linear", "matmul")
COPY_NODE = re.compile(r"^Reformatting CopyNode for (Input|Output) Tensor (\d+) to (.*)$")
NEAREST_HOLDERS = 4  # of the layers holding a node, only this many nearest (by relative position) are candidates


def _is_copy(layer: Layer) -> bool:
    """Reformats and copies are named after the layer they feed: their names say nothing about themselves."""
    return layer.op == "reformat" or layer.origin is not None or layer.name.startswith("Reformatting CopyNode")


NodeFacts = tuple[str, str | None, int, int]  # the node, its numbered op (or None) and number, its weight


@functools.lru_cache(maxsize=1 << 18)  # the two engines of a diff share their nodes
def _node_facts(node: str) -> NodeFacts | None:
    """None for a quantization node or a weight name; else the node without TF's `quant_` prefixes, the op and
    number of an ONNX numbered name (`Conv_9`: Conv, 9), and its weight (DOMINANT_WEIGHT for a convolution / GEMM)."""
    if QUANT_NODE.search(node):
        return None
    if "quant_" in node:
        node = QUANT_PREFIX.sub(r"\1", node)
    match = NUMBERED.match(node)
    weight = DOMINANT_WEIGHT if op_from_name(node, builtin_rules()) in DOMINANT_OPS else 1
    return (node, match.group(1), int(match.group(2)), weight) if match else (node, None, 0, weight)


def _node_list(layer: Layer) -> list[NodeFacts]:
    if _is_copy(layer):
        return []
    facts = (_node_facts(node) for node in layer.onnx_nodes or name_parts(layer.name))
    return [fact for fact in facts if fact is not None]


def canonical_nodes(layers: list[Layer]) -> list[dict[str, int]]:
    """For each layer, its canonical node names with their weights (empty for copies and Q/DQ-only layers)."""
    raw = [_node_list(layer) for layer in layers]
    numbers: defaultdict[str, set[int]] = defaultdict(set)
    for nodes in raw:
        for _, op, number, _ in nodes:
            if op is not None:
                numbers[op].add(number)
    rank = {op: {n: i for i, n in enumerate(sorted(found))} for op, found in numbers.items()}
    keyed = []
    for nodes in raw:
        keys: dict[str, int] = {}
        for node, op, number, weight in nodes:
            keys[node if op is None else f"{op}#{rank[op][number]}"] = weight
        keyed.append(keys)
    return keyed


def signature(layer: Layer) -> tuple | None:
    """What identifies a layer whose name changed: its kind, shape parameters and tensor sizes (None if no sizes)."""
    dims = tuple(tuple(t.shape or ()) for t in layer.inputs + layer.outputs)
    if not any(dims):
        return None  # names-only layers: nothing but the name to go by
    return (layer.kind, layer.groups, tuple(layer.kernel_shape or ()), layer.out_channels, dims)


def _nearest(holders: list[int], position: float, count: int = NEAREST_HOLDERS) -> list[int]:
    """Of the sorted `holders`, the `count` nearest to `position` (both sides)."""
    at = bisect.bisect_left(holders, position)
    return holders[max(0, at - count // 2): at + (count + 1) // 2]


def _holders(nodes: list[dict[str, int]]) -> dict[str, list[int]]:
    holders: defaultdict[str, list[int]] = defaultdict(list)
    for j, keys in enumerate(nodes):
        for key in keys:
            holders[key].append(j)
    return holders


def _by_nodes(nodes_a: list[dict[str, int]], nodes_b: list[dict[str, int]], free_a: set[int],
              free_b: set[int]) -> list[tuple[int, int]]:
    holders = _holders(nodes_b)
    size_a, size_b = max(len(nodes_a), 1), max(len(nodes_b), 1)
    scale = len(nodes_b) / size_a
    before, after = NEAREST_HOLDERS // 2, (NEAREST_HOLDERS + 1) // 2  # `_nearest`, inlined: it runs once per node
    candidates = []
    for i, keys in enumerate(nodes_a):
        scores: dict[int, int] = {}
        for key, weight in keys.items():
            held = holders.get(key)
            if held is None:
                continue
            at = bisect.bisect_left(held, i * scale)
            for j in held[max(0, at - before): at + after]:
                other = nodes_b[j][key]
                scores[j] = scores.get(j, 0) + min(weight, other)
        position = i / size_a
        for j, score in scores.items():
            candidates.append((-score, abs(position - j / size_b), i, j))
    pairs = []
    for _, _, i, j in sorted(candidates):
        if i in free_a and j in free_b:
            pairs.append((i, j))
            free_a.discard(i)
            free_b.discard(j)
    return pairs


def _fused(left: list[int], nodes_left: list[dict[str, int]], nodes_right: list[dict[str, int]]) -> dict[int, int]:
    """Unpaired layers whose nodes all sit in one layer of the other engine: index -> that layer's index."""
    holders = _holders(nodes_right)
    scale = len(nodes_right) / max(len(nodes_left), 1)
    found = {}
    for i in left:
        keys = nodes_left[i]
        if not keys:
            continue
        first = next(iter(keys))
        for j in _nearest(holders.get(first, []), i * scale):
            if all(key in nodes_right[j] for key in keys):
                found[i] = j
                break
    return found


def shape_signature(layer: Layer) -> tuple | None:
    """A convolution's or GEMM's shape parameters, without tensor sizes (a padded input changes those)."""
    if layer.op not in DOMINANT_OPS or not (layer.kernel_shape or layer.out_channels):
        return None
    return (layer.op, layer.groups, tuple(layer.kernel_shape or ()), layer.out_channels, tuple(layer.stride or ()))


def _by_key(a: list[Layer], b: list[Layer], free_a: set[int], free_b: set[int], key) -> list[tuple[int, int]]:
    index: dict = {}
    for j in sorted(free_b):
        index.setdefault(key(b[j]), deque()).append(j)
    pairs = []
    for i in sorted(free_a):
        k = key(a[i])
        queue = index.get(k) if k is not None else None
        if queue:
            j = queue.popleft()
            pairs.append((i, j))
            free_a.discard(i)
            free_b.discard(j)
    return pairs


def _by_copied(a: list[Layer], b: list[Layer], paired: dict[int, int], free_a: set[int],
               free_b: set[int]) -> list[tuple[int, int]]:
    """Copies into (or out of) the same tensor of two paired layers are a pair: a copy is known by what it feeds."""
    index_a = {layer.name: i for i, layer in enumerate(a)}
    index_b = {layer.name: j for j, layer in enumerate(b)}
    copies_b = {}
    for j in sorted(free_b):
        match = COPY_NODE.match(b[j].name)
        if match and match.group(3) in index_b:
            copies_b.setdefault((match.group(1), match.group(2), index_b[match.group(3)]), j)
    pairs = []
    for i in sorted(free_a):
        match = COPY_NODE.match(a[i].name)
        target = paired.get(index_a.get(match.group(3), -1)) if match else None
        j = copies_b.pop((match.group(1), match.group(2), target), None) if match and target is not None else None
        if j is not None:
            pairs.append((i, j))
    return pairs


@dataclass
class Alignment:
    pairs: list[tuple[int, int]]  # (index in a, index in b), in a's order
    # pair -> "nodes" | "name" | "signature" | "shape and order" | "copy of a paired layer"
    how: dict[tuple[int, int], str]
    only_a: list[int]  # neither paired nor fused
    only_b: list[int]
    fused_a: dict[int, int] = field(default_factory=dict)  # a layer of A fused into this layer of B
    fused_b: dict[int, int] = field(default_factory=dict)  # a layer of B fused (split out) from this layer of A


def align_layers(a: list[Layer], b: list[Layer]) -> Alignment:
    """Pair the layers of two engines (see the module docstring for the order of the methods)."""
    if not a or not b:
        return Alignment([], {}, list(range(len(a))), list(range(len(b))))
    free_a, free_b = set(range(len(a))), set(range(len(b)))
    nodes_a, nodes_b = canonical_nodes(a), canonical_nodes(b)
    not_copy = ({i for i, layer in enumerate(a) if not _is_copy(layer)},
                {j for j, layer in enumerate(b) if not _is_copy(layer)})
    how: dict[tuple[int, int], str] = {}
    for method, found in (
        ("nodes", lambda: _by_nodes(nodes_a, nodes_b, free_a, free_b)),
        ("name", lambda: _by_key(a, b, free_a, free_b, lambda layer: layer.name)),
        ("signature", lambda: _by_key(a, b, free_a & not_copy[0], free_b & not_copy[1], signature)),
        ("shape and order", lambda: _by_key(a, b, free_a & not_copy[0], free_b & not_copy[1], shape_signature)),
        ("copy of a paired layer", lambda: _by_copied(a, b, dict(how), free_a, free_b)),
    ):
        for pair in found():
            how[pair] = method
            free_a.discard(pair[0])
            free_b.discard(pair[1])
    fused_a = _fused(sorted(free_a), nodes_a, nodes_b)
    fused_b = _fused(sorted(free_b), nodes_b, nodes_a)
    return Alignment(sorted(how), how, sorted(free_a - set(fused_a)), sorted(free_b - set(fused_b)), fused_a, fused_b)
