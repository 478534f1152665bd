"""Group layers and kernels (by role, by stage, by kernel class) and total them per variant.

The rules are data (`group_rules.toml`, extendable with `--groups FILE`), so a new TensorRT naming
or a new model family needs a rule, not code.
"""

from __future__ import annotations

import functools
import re
import tomllib
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from sessions.analyses.comparison import reference
from sessions.analyses.user_regex import UserPattern
from sessions.documents.errors import InputError
from sessions.documents.input_files import read_toml_file
from sessions.documents.model import Layer, Session, Variant
from sessions.documents.vocab import OPS, STRUCTURE_ROLE, STRUCTURE_ROLES

OTHER = "other"
ROLE_MEMO_SIZE = 1_000_000  # layers whose role is remembered (a few sessions of 100,000 layers)
Pattern = re.Pattern[str] | UserPattern  # a user's patterns run with a time bound


@dataclass
class RoleRule:
    name: str
    names: list[Pattern] = field(default_factory=list)
    kinds: list[Pattern] = field(default_factory=list)
    origins: list[str] = field(default_factory=list)
    onnx: list[Pattern] = field(default_factory=list)
    all_parts: list[Pattern] = field(default_factory=list)
    ops: list[str] = field(default_factory=list)
    requires_conv: str | None = None


@dataclass
class NameOp:
    """The op of a layer known only by its name: `whole` matches the name, `patterns` any fused part."""

    op: str
    whole: list[Pattern] = field(default_factory=list)
    patterns: list[Pattern] = field(default_factory=list)


@dataclass
class Rules:
    roles: list[RoleRule]
    kernel_classes: list[tuple[str, list[Pattern]]]
    stage: Pattern | None
    name_ops: list[NameOp] = field(default_factory=list)
    inserted: list[Pattern] = field(default_factory=list)  # name parts TensorRT adds around a node, named after it
    constants: list[Pattern] = field(default_factory=list)  # name parts that are weight tensors, not nodes
    user_roles: int = 0  # the leading `roles` that are the user's (`--groups`): tried before a structural role
    role_memo: dict[int, tuple[Layer, str]] = field(default_factory=dict, repr=False, compare=False)  # `role_of`
    role_by_fields: dict[tuple[object, ...], str] = field(default_factory=dict, repr=False, compare=False)  # `role_of`
    role_plans: dict[tuple[object, ...], RolePlan] = field(default_factory=dict, repr=False, compare=False)  # `role_of`


CONV_CHECKS = ("any", "grouped", "depthwise", "pointwise", "spatial", "unknown")


# ops that name no work: a layer with one of these is what its kind (TensorRT type, module class) says it is; a
# built-in rule's kinds read no other layer (the user's rules, `--groups`, match kinds whatever the op)
UNNAMED_OPS = (None, "other")


def _patterns(patterns, where: str) -> list[str]:
    if not isinstance(patterns, list) or not all(isinstance(p, str) for p in patterns):
        raise InputError(f"{where}: expected a list of regular expressions")
    return patterns


def _builtin(patterns, where: str) -> list[Pattern]:
    """The built-in rules' patterns, with `re`: one alternation (one search instead of one per pattern), or one
    each where they cannot join."""
    try:
        compiled = [re.compile(p) for p in _patterns(patterns, where)]
    except re.error as exc:
        raise InputError(f"{where}: bad regular expression: {exc}") from None
    if len(compiled) < 2:
        return compiled
    try:
        return [re.compile("|".join(f"(?:{p})" for p in patterns))]
    except re.error:  # a global flag such as (?i) may only start a pattern of its own
        return compiled


def _user(patterns, where: str) -> list[Pattern]:
    """A rules file's patterns, each search with a time bound (`sessions.analyses.user_regex`)."""
    return [UserPattern(p, where) for p in _patterns(patterns, where)]


Compile = Callable[[object, str], list[Pattern]]


def _words(value, where: str, allowed: tuple[str, ...] | None = None) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise InputError(f"{where}: expected a list of words")
    bad = [v for v in value if allowed is not None and v not in allowed]
    if bad:
        raise InputError(f"{where}: {bad[0]!r} is not one of {', '.join(allowed or ())}")
    return list(value)


def _role(raw, where: str, compile_: Compile) -> RoleRule:
    if not isinstance(raw, dict) or not isinstance(raw.get("name"), str):
        raise InputError(f"{where}: every role needs a name")
    unknown = set(raw) - {"name", "names", "kinds", "origins", "onnx", "all_parts", "ops", "requires_conv"}
    if unknown:
        raise InputError(f"{where}: unknown keys {sorted(unknown)}")
    conv = raw.get("requires_conv")
    if conv is not None and conv not in CONV_CHECKS:
        raise InputError(f"{where}: requires_conv must be one of {', '.join(CONV_CHECKS)}")
    return RoleRule(
        name=raw["name"],
        names=compile_(raw.get("names", []), f"{where}.names"),
        kinds=compile_(raw.get("kinds", []), f"{where}.kinds"),
        origins=_words(raw.get("origins", []), f"{where}.origins"),
        onnx=compile_(raw.get("onnx", []), f"{where}.onnx"),
        all_parts=compile_(raw.get("all_parts", []), f"{where}.all_parts"),
        ops=_words(raw.get("ops", []), f"{where}.ops", OPS),
        requires_conv=conv,
    )


def _name_op(raw, where: str, compile_: Compile) -> NameOp:
    if not isinstance(raw, dict) or raw.get("op") not in OPS:
        raise InputError(f"{where}: every name_ops entry needs an op, one of {', '.join(OPS)}")
    unknown = set(raw) - {"op", "whole", "patterns"}
    if unknown:
        raise InputError(f"{where}: unknown keys {sorted(unknown)}")
    return NameOp(raw["op"], compile_(raw.get("whole", []), f"{where}.whole"),
                  compile_(raw.get("patterns", []), f"{where}.patterns"))


def _tables(doc: dict, key: str, origin: str) -> list:
    tables = doc.get(key, [])
    if not isinstance(tables, list):
        raise InputError(f"{origin}: {key} must be an array of tables ([[{key}]])")
    return tables


def _parse(doc: dict, origin: str, compile_: Compile) -> Rules:
    roles = [_role(raw, f"{origin}: roles[{i}]", compile_) for i, raw in enumerate(_tables(doc, "roles", origin))]
    name_ops = [_name_op(raw, f"{origin}: name_ops[{i}]", compile_)
                for i, raw in enumerate(_tables(doc, "name_ops", origin))]
    classes = []
    for i, raw in enumerate(_tables(doc, "kernel_classes", origin)):
        where = f"{origin}: kernel_classes[{i}]"
        if not isinstance(raw, dict) or not isinstance(raw.get("name"), str):
            raise InputError(f"{where}: every kernel class needs a name")
        classes.append((raw["name"], compile_(raw.get("patterns", []), f"{where}.patterns")))
    unknown = set(doc) - {"roles", "name_ops", "kernel_classes", "stages", "name_parts"}
    if unknown:
        raise InputError(f"{origin}: unknown keys {sorted(unknown)}; a rules file has [[roles]], [[kernel_classes]], "
                         "[[name_ops]], [name_parts] and [stages]")
    parts = doc.get("name_parts", {})
    if not isinstance(parts, dict) or set(parts) - {"inserted", "constants"}:
        raise InputError(f"{origin}: name_parts must be a table with inserted = [...] and constants = [...]")
    stages = doc.get("stages", {})
    if not isinstance(stages, dict):
        raise InputError(f"{origin}: stages must be a table ([stages] with pattern = '...')")
    stage = stages.get("pattern")
    if stage is not None and not isinstance(stage, str):
        raise InputError(f"{origin}: stages.pattern must be a regular expression")
    return Rules(roles, classes, compile_([stage], f"{origin}: stages.pattern")[0] if stage else None, name_ops,
                 compile_(parts.get("inserted", []), f"{origin}: name_parts.inserted"),
                 compile_(parts.get("constants", []), f"{origin}: name_parts.constants"))


@functools.cache
def builtin_rules() -> Rules:
    return _parse(tomllib.loads(resources.files("sessions.analyses").joinpath("group_rules.toml").read_text()),
                  "built-in rules", _builtin)


def load_rules(user_file: Path | None = None) -> Rules:
    rules = builtin_rules()
    if user_file is None:
        return rules
    user = _parse(read_toml_file(Path(user_file), "rules file"), str(user_file), _user)
    return Rules(
        roles=user.roles + rules.roles,
        user_roles=len(user.roles),
        kernel_classes=user.kernel_classes + rules.kernel_classes,
        stage=user.stage or rules.stage,
        name_ops=user.name_ops + rules.name_ops,
        inserted=user.inserted + rules.inserted,
        constants=user.constants + rules.constants,
    )


def name_parts(name: str) -> list[str]:
    """The ONNX / framework nodes a TensorRT layer name joins with ' + ' (one part if unfused)."""
    return [part.strip() for part in name.split(" + ") if part.strip()]


def op_from_name(name: str, rules: Rules) -> str | None:
    """The dominant op of a fused layer known only by its name, by the `name_ops` order.

    Parts TensorRT inserted around a node (`reshape_before_<node>`) are shuffles named after that
    node, not the node: they never give the layer the node's op. A layer of inserted parts only is a
    shuffle; one of weight tensors (and inserted parts) only is a constant (`noop`). A node whose
    name says nothing, fused with an activation, is the convolution TensorRT fused it into.
    """
    parts = name_parts(name)
    kept = [part for part in parts if not any(p.search(part) for p in rules.inserted)]
    if parts and not kept:
        return "shuffle"
    if kept and rules.constants and all(any(p.search(part) for p in rules.constants) for part in kept):
        return "noop"
    for rule in rules.name_ops:
        if any(p.search(name) for p in rule.whole):
            return rule.op
    ops = [_part_op(part, rules) for part in kept]
    found = next((rule.op for rule in rules.name_ops if rule.op in ops), None)
    if found == "activation" and None in ops:
        return "conv"  # TensorRT fuses an activation into the convolution (or GEMM, run as one) that produces its input
    return found


def _part_op(part: str, rules: Rules) -> str | None:
    return next((rule.op for rule in rules.name_ops if any(p.search(part) for p in rule.patterns)), None)


def in_channels(layer: Layer) -> int | None:
    if layer.in_channels is not None and layer.in_channels > 0:
        return layer.in_channels
    shape = layer.inputs[0].shape if layer.inputs else None
    if shape and len(shape) >= 2 and shape[1] > 0:
        return shape[1]
    return None


def is_conv(layer: Layer) -> bool:
    return layer.op == "conv" or (layer.op is None and bool(re.search(r"Conv", layer.kind)))


def conv_shape(layer: Layer) -> str | None:
    """grouped | depthwise | pointwise | spatial, for convolutions; unknown for one whose files state neither its
    kernel nor more than one group (a names-only listing, a build log's layer lines): it may be any of the four;
    None for other layers."""
    if not is_conv(layer):
        return None
    groups = layer.groups or 1
    channels = in_channels(layer)
    if "Depthwise" in layer.kind or (groups > 1 and channels is not None and groups == channels):
        return "depthwise"
    if groups > 1:
        return "grouped"
    if not layer.kernel_shape:
        return "unknown"
    if all(k == 1 for k in layer.kernel_shape):
        return "pointwise"
    return "spatial"


@dataclass
class RolePlan:
    """The role rules for layers of one kind, op, origin and convolution shape: `by_name`, the rules ahead of the
    first that those alone satisfy, left to try by name, ONNX nodes and name parts; `otherwise`, the role where
    none of them hits (that first rule's, else `other`)."""

    by_name: list[RoleRule]
    otherwise: str


def _conv_allows(rule: RoleRule, shape: str | None) -> bool:
    """Whether a layer of convolution shape `shape` (`conv_shape`) meets the rule's `requires_conv`."""
    if rule.requires_conv is None:
        return True
    return shape is not None and (rule.requires_conv == "any" or shape == rule.requires_conv)


def _hits(patterns: list[Pattern], text: str) -> bool:
    for pattern in patterns:
        if pattern.search(text):
            return True
    return False


def _role_plan(rules: Rules, kind: str, op: str | None, origin: str | None, shape: str | None,
               structural: str | None) -> RolePlan:
    """The plan of `role_of` for layers of these fields (a session has a few dozen of them). `structural`: the role
    the model's structure gives the layer (`STRUCTURE_ROLE`), met right after the user's rules; "" where it gives
    none of `STRUCTURE_ROLES`, whose rules then never apply; None where no structure was read."""
    by_name: list[RoleRule] = []
    for index, rule in enumerate(rules.roles):
        if structural and index == rules.user_roles:
            return RolePlan(by_name, structural)
        if not _conv_allows(rule, shape) or (structural is not None and rule.name in STRUCTURE_ROLES):
            continue
        with_names = bool(rule.names or rule.onnx or rule.all_parts)
        if not (with_names or rule.ops or rule.origins or rule.kinds):
            return RolePlan(by_name, rule.name)  # a rule of requirements alone: met
        if ((rule.ops and op in rule.ops) or (rule.origins and origin in rule.origins)
                or (rule.kinds and (index < rules.user_roles or op in UNNAMED_OPS) and _hits(rule.kinds, kind))):
            return RolePlan(by_name, rule.name)
        if with_names:
            by_name.append(rule)
    return RolePlan(by_name, structural or OTHER)


def _hits_by_name(rule: RoleRule, layer: Layer) -> bool:
    """Whether the rule's name, ONNX node or name-part patterns hit the layer."""
    if rule.names and _hits(rule.names, layer.name):
        return True
    if rule.onnx:
        for node in layer.onnx_nodes:
            if _hits(rule.onnx, node):
                return True
    if rule.all_parts:
        parts = layer.name.split(" + ")
        return len(parts) > 1 and all(_hits(rule.all_parts, part) for part in parts)
    return False


def role_of(layer: Layer, rules: Rules) -> str:
    """The first role whose rule matches `layer`, else `other`: a rule matches where the layer meets its
    `requires_conv` and one of its pattern lists hits (a rule without lists matches on its requirements). The role
    the model's structure gave the layer (`attrs[STRUCTURE_ROLE]`, squeeze-excitation) is met right after the user's
    rules (`--groups`), before the built-in ones; where the structure knows the layer and gives it none of
    `STRUCTURE_ROLES`, no rule gives it one of them; they come from rules only without a structure (files).

    Remembered per layer object in `rules.role_memo` (the overview, the groups and every drill of a 50,000-layer
    session ask for the same layers; a layer's fields are not changed once it is in a session), per the fields
    the rules read in `rules.role_by_fields` (the two engines a diff compares share most of their layers), and
    what kind, op, origin and convolution shape decide in `rules.role_plans`.
    """
    held = rules.role_memo.get(id(layer))
    if held is not None and held[0] is layer:
        return held[1]
    held_role = layer.attrs.get(STRUCTURE_ROLE)
    structural = held_role if isinstance(held_role, str) else None
    shape = conv_shape(layer)
    fields = (layer.name, layer.kind, layer.op, layer.origin, tuple(layer.onnx_nodes), shape, structural)
    role = rules.role_by_fields.get(fields)
    if role is None:
        plan_key = (layer.kind, layer.op, layer.origin, shape, structural)
        plan = rules.role_plans.get(plan_key)
        if plan is None:
            plan = rules.role_plans[plan_key] = _role_plan(rules, *plan_key)
        role = next((rule.name for rule in plan.by_name if _hits_by_name(rule, layer)), plan.otherwise)
    if len(rules.role_memo) >= ROLE_MEMO_SIZE:
        rules.role_memo.clear()
        rules.role_by_fields.clear()
        rules.role_plans.clear()
    rules.role_memo[id(layer)] = (layer, role)  # the layer is held, so its id is not reused
    rules.role_by_fields[fields] = role
    return role


def stage_of(layer: Layer, rules: Rules) -> str:
    """The stage the model's structure gave the layer (stem, stage N, head: `builders.models.trunk`, stored in
    `attrs["stage"]`), else the stage its node path names (`layer2`, `conv3`, `features.4`), else `other`."""
    stage = layer.attrs.get("stage")
    if isinstance(stage, str) and stage:
        return stage
    if rules.stage is None:
        return OTHER
    for text in [*layer.onnx_nodes, layer.name]:
        match = rules.stage.search(text)
        if match:
            return match.group(1).replace("/", ".")
    return OTHER


STEM = "stem"


def stages_of(layers: list[Layer], rules: Rules) -> list[str]:
    """Each layer's stage, in engine order: the layers before the first one in a named stage are the stem.

    A stem is where the network starts, not a word in a name: a neck's `conv1` is not the stem.
    Constants and synchronisation layers (which TensorRT hoists to the start) neither start a stage nor join the stem.
    A layer the model's structure gave no stage, inside a module that has one (a quantizer ModelOpt put into a
    convolution: `layer1.0.conv1.input_quantizer`), is in that module's stage (`structural_stages`), never in a
    stage read from its name beside the structure's.
    """
    inherited = structural_stages(layers)
    stages = [inherited[i] if i in inherited else stage_of(layer, rules) for i, layer in enumerate(layers)]
    first = next((i for i, stage in enumerate(stages) if stage not in (OTHER, STEM) and not _is_sync(layers[i])), None)
    if first is None:
        return stages
    return [STEM if i < first and stage == OTHER and not _is_sync(layer) else stage
            for i, (layer, stage) in enumerate(zip(layers, stages, strict=False))]


def structural_stages(layers: list[Layer]) -> dict[int, str]:
    """Index -> stage of each layer whose stage the model's structure gave (`attrs["stage"]`), or, where it gave
    none, of the nearest enclosing module path (`a.b` encloses `a.b.c`) whose layers with a stage all have one:
    a module's stage is its unit's (`builders.models.trunk`), so what runs inside it, a quantizer or an activation
    a variant added (`blocks.0.0.bn1.1` where the folded BatchNorm was), is in that stage. A path enclosing layers
    of several stages (the root) gives none."""
    given = {layer.name: layer.attrs["stage"] for layer in layers
             if isinstance(layer.attrs.get("stage"), str) and layer.attrs["stage"]}
    found: dict[int, str] = {}
    if not given:
        return found
    inside: dict[str, set[str]] = {}  # module path -> the stages of the given layers at or under it
    for name, stage in given.items():
        parts = name.split(".")
        for end in range(1, len(parts) + 1):
            inside.setdefault(".".join(parts[:end]), set()).add(stage)
    for i, layer in enumerate(layers):
        if layer.name in given:
            found[i] = given[layer.name]
            continue
        path = layer.name
        while path and path not in inside:
            path = path.rpartition(".")[0]
        if path and len(inside[path]) == 1:
            found[i] = next(iter(inside[path]))
    return found


def _is_sync(layer: Layer) -> bool:
    return layer.op == "noop"


def kernel_class(name: str, rules: Rules) -> str:
    for class_name, patterns in rules.kernel_classes:
        if any(p.search(name) for p in patterns):
            return class_name
    return OTHER


@dataclass
class GroupRow:
    group: str
    layers: int
    kernels_per_call: float | None  # None where the session has no kernel table
    time_ms: float | None  # per call
    share: float | None  # of the variant's total layer time
    layer_names: list[str] = field(default_factory=list)


def kernels_per_layer(variant: Variant) -> list[float] | None:
    """Kernels (or ops) per call owned by each layer; None for variants without a trace."""
    if variant.kernels is None or variant.trace is None:
        return None
    counts = Counter(variant.kernels.layer)
    calls = max(variant.trace.calls, 1)
    return [counts.get(i, 0) / calls for i in range(len(variant.layers))]


def group_rows(variant: Variant, key) -> list[GroupRow]:
    """Totals per group, `key(layer) -> group`, largest time (or kernel count) first."""
    per_layer = kernels_per_layer(variant)
    total_time = sum(layer.time_ms or 0.0 for layer in variant.layers)
    rows: dict[str, GroupRow] = {}
    for i, layer in enumerate(variant.layers):
        group = key(layer)
        row = rows.get(group)
        if row is None:
            row = rows[group] = GroupRow(group, 0, 0.0 if per_layer is not None else None, None, None)
        row.layers += 1
        row.layer_names.append(layer.name)
        if per_layer is not None:
            row.kernels_per_call += per_layer[i]
        if layer.time_ms is not None:
            row.time_ms = (row.time_ms or 0.0) + layer.time_ms
    for row in rows.values():
        if row.time_ms is not None and total_time > 0:
            row.share = row.time_ms / total_time
    return sorted(rows.values(), key=lambda r: (-(r.time_ms or 0.0), -(r.kernels_per_call or 0.0), r.group))


NO_TACTIC = "no tactic named"


def tactic_class_rows(variant: Variant, rules: Rules) -> list[GroupRow]:
    """Layer time per kernel class of each layer's tactic, for variants without a kernel trace (imported engines)."""
    if not any(layer.tactic for layer in variant.layers):
        return []
    return group_rows(variant, lambda layer: kernel_class(layer.tactic, rules) if layer.tactic else NO_TACTIC)


def kernel_class_rows(variant: Variant, rules: Rules) -> list[GroupRow]:
    """Kernels per call and kernel time per kernel class (from kernel names, whatever layer owns them).

    Without a kernel trace, the class of each layer's tactic name (what TensorRT's files hold).
    """
    table = variant.kernels
    if table is None or variant.trace is None:
        return tactic_class_rows(variant, rules)
    calls = max(variant.trace.calls, 1)
    class_of_name = [kernel_class(name, rules) for name in table.names]
    counts: Counter[str] = Counter()
    time_ns: defaultdict[str, int] = defaultdict(int)
    for name_id, duration in zip(table.name, table.duration_ns, strict=False):
        cls = class_of_name[name_id]
        counts[cls] += 1
        time_ns[cls] += duration
    total = sum(time_ns.values()) or 1
    rows = [GroupRow(cls, 0, counts[cls] / calls, time_ns[cls] / 1e6 / calls, time_ns[cls] / total) for cls in counts]
    return sorted(rows, key=lambda r: -(r.time_ms or 0.0))


@dataclass
class GroupComparison:
    group: str
    rows: dict[str, GroupRow | None]  # variant name -> row
    time_ratio: dict[str, float | None]  # variant time / baseline time
    kernel_ratio: dict[str, float | None]


def compare_groups(session: Session, by: str, rules: Rules, variants: list[str] | None = None) -> list[GroupComparison]:
    """One line per group across variants, with ratios against the session's baseline (fp16)."""
    chosen = [v for v in session.variants if v.status == "ok" and (variants is None or v.name in variants)]
    if by == "role":
        tables = {v.name: group_rows(v, lambda layer: role_of(layer, rules)) for v in chosen}
    elif by == "stage":
        tables = {v.name: _stage_rows(v, rules) for v in chosen}
    elif by == "kernel":
        tables = {v.name: kernel_class_rows(v, rules) for v in chosen}
    else:
        raise InputError(f"unknown grouping {by!r}; use role, stage or kernel")
    baseline = reference(session)
    base_name = (baseline.name if baseline is not None and baseline.name in tables
                 else (chosen[0].name if chosen else None))
    order: list[str] = []
    for rows in tables.values():
        order.extend(r.group for r in rows if r.group not in order)
    comparisons = []
    for group in order:
        rows = {name: next((r for r in table if r.group == group), None) for name, table in tables.items()}
        base = rows.get(base_name) if base_name else None
        comparisons.append(
            GroupComparison(
                group=group,
                rows=rows,
                time_ratio={n: _ratio(r.time_ms if r else None, base.time_ms if base else None)
                            for n, r in rows.items()},
                kernel_ratio={n: _ratio(r.kernels_per_call if r else None, base.kernels_per_call if base else None)
                              for n, r in rows.items()},
            )
        )
    return comparisons


def _stage_rows(variant: Variant, rules: Rules) -> list[GroupRow]:
    stage = dict(zip(map(id, variant.layers), stages_of(variant.layers, rules), strict=False))
    return group_rows(variant, lambda layer: stage[id(layer)])


def _ratio(value: float | None, base: float | None) -> float | None:
    if value is None or base is None or base == 0:
        return None
    return value / base
