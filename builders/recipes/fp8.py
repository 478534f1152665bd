"""FP8 recipes as data (fp8.toml): op kinds quantized, structural roles kept out, weight scales.

`RECIPE-per-tensor` / `RECIPE-per-channel` name a recipe with its weight scales changed, so a study
can run both side by side (`--fp8-recipe all --fp8-recipe all-per-tensor`).

`select` applies a recipe and the user's `--fp8-exclude` patterns to a model's structure
(builders.models.structure); `check_selections` refuses recipes that select nothing or what another
one selects, and `check_exclusions` patterns that match no layer, before any work starts.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import tomllib
from collections.abc import Collection
from dataclasses import dataclass, field
from functools import cache, lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from sessions.documents.errors import InputError
from sessions.documents.plan import VariantPlan

if TYPE_CHECKING:
    from builders.models.structure import ModelStructure

RECIPES_FILE = Path(__file__).with_name("fp8.toml")
# builders.models.structure finds them
ROLES = ("stem", "first-stage", "squeeze-excitation", "attention-output", "head")
WeightScales = Literal["per-channel", "per-tensor"]
WEIGHT_SCALES: tuple[WeightScales, ...] = ("per-channel", "per-tensor")
OPS = ("conv", "linear")


@dataclass(frozen=True)
class FP8Recipe:
    name: str
    description: str
    ops: tuple[str, ...]
    exclude_roles: tuple[str, ...]
    requires_roles: tuple[str, ...] = ()
    weights: WeightScales = "per-channel"
    share_input_scale: bool = False
    aliases: tuple[str, ...] = ()
    kernels: tuple[str, ...] = ()  # convolution kernel sizes quantized ("1x1"); empty: any


@dataclass
class Selection:
    recipe: FP8Recipe
    quantized: list[str]
    excluded: list[str]  # every other layer of the recipe's op kinds
    by_role: dict[str, list[str]] = field(default_factory=dict)  # role -> excluded layers
    by_pattern: list[str] = field(default_factory=list)  # excluded by --fp8-exclude only

    @property
    def total(self) -> int:
        return len(self.quantized) + len(self.excluded)


@cache
def recipes() -> dict[str, FP8Recipe]:
    """Every recipe by name and by alias."""
    data = tomllib.loads(RECIPES_FILE.read_text())
    table: dict[str, FP8Recipe] = {}
    for name, spec in data["recipes"].items():
        recipe = FP8Recipe(name=name, **{k: tuple(v) if isinstance(v, list) else v for k, v in spec.items()})
        unknown = set(recipe.exclude_roles + recipe.requires_roles) - set(ROLES) or set(recipe.ops) - set(OPS)
        if unknown or recipe.weights not in WEIGHT_SCALES:
            raise ValueError(f"{RECIPES_FILE}: recipe {name}: unknown {sorted(unknown) or recipe.weights}")
        for key in (name, *recipe.aliases):
            table[key] = recipe
    return table


def recipe_names() -> list[str]:
    """Canonical names, in the file's order."""
    return list(dict.fromkeys(r.name for r in recipes().values()))


def get_recipe(name: str) -> FP8Recipe:
    """A recipe by name or alias, or `RECIPE-per-tensor` / `RECIPE-per-channel`: that recipe with those weight
    scales."""
    table = recipes()
    if name in table:
        return table[name]
    for weights in WEIGHT_SCALES:
        base = name.removesuffix(f"-{weights}")
        if base != name and base in table:
            recipe = table[base]
            return dataclasses.replace(recipe, name=f"{recipe.name}-{weights}", weights=weights, aliases=())
    raise InputError(f"unknown FP8 recipe {name!r}; known: {', '.join(table)} (each also as NAME-per-tensor or "
                     "NAME-per-channel)")


def select(structure: ModelStructure, name: str, exclude_patterns: list[str] | tuple[str, ...]) -> Selection:
    recipe = get_recipe(name)
    selection = Selection(recipe, [], [])
    for node in structure.layers:
        if node.op not in recipe.ops:
            continue
        if recipe.kernels and "x".join(map(str, node.kernel)) not in recipe.kernels:
            selection.excluded.append(node.path)  # by structure: another kernel size
            continue
        roles = [role for role in recipe.exclude_roles if role in node.roles]
        for role in roles:
            selection.by_role.setdefault(role, []).append(node.path)
        matched = any(fnmatch.fnmatchcase(node.path, pattern) for pattern in exclude_patterns)
        if matched and not roles:
            selection.by_pattern.append(node.path)
        (selection.excluded if roles or matched else selection.quantized).append(node.path)
    return selection


def variant_selection(structure: ModelStructure, variant: VariantPlan) -> Selection:
    """What `variant`'s recipe (`all` where it names none) and exclusions select in `structure`."""
    return select(structure, variant.recipe or "all", variant.exclude)


def check_selections(model: str, structure: ModelStructure, named: dict[str, Selection]) -> None:
    """One line and InputError where a variant selects nothing, lacks a role it needs, or repeats another."""
    seen: dict[tuple, str] = {}
    for variant, selection in named.items():
        missing = [role for role in selection.recipe.requires_roles if not structure.paths(role=role)]
        if missing:
            raise InputError(f"{variant}: {model} has no {' or '.join(missing)} layers, so this recipe would "
                             "quantize what a recipe without that exclusion does; leave it out")
        if not selection.quantized:
            raise InputError(f"{variant} quantizes no layer of {model}: its recipe takes "
                             f"{' and '.join(selection.recipe.ops)} layers outside "
                             f"{', '.join(selection.recipe.exclude_roles)}, and the exclusions leave none")
        recipe = selection.recipe
        key = (tuple(selection.quantized), recipe.weights, recipe.share_input_scale)
        if key in seen:
            raise InputError(f"{variant} quantizes the same {len(selection.quantized)} layers of {model} "
                             f"as {seen[key]}, "
                             "with the same scales; leave one out")
        seen[key] = variant


def check_exclusions(model: str, structure: ModelStructure, patterns: list[str] | tuple[str, ...]) -> None:
    """One line and InputError where an `--fp8-exclude` pattern matches the path of none of the model's convolutions
    and linears (the layers `select` matches patterns against): it would keep nothing out, silently."""
    paths = [node.path for node in structure.layers]
    for pattern in patterns:
        if not any(fnmatch.fnmatchcase(path, pattern) for path in paths):
            example = f", such as {paths[0]!r}" if paths else ""
            raise InputError(f"--fp8-exclude {pattern!r} matches no layer of {model}: patterns match the module paths "
                             f"of its convolutions and linears{example}")


@lru_cache(maxsize=16)
def _structure_of(model_name: str, checkpoint: str | None) -> ModelStructure:
    """The model's structure without its weights: built on the meta device (instant, no memory; that build is offered
    to the study, which gives it its weights: builders.models.seeded_weights), or, where a model cannot be built
    there, loaded as the study will load it.

    Built once per model and checkpoint in a process (a sweep plans many combinations of one model); callers
    must not change what it returns."""
    import torch

    from builders.models.catalog import load_model
    from builders.models.meta_build import meta_device
    from builders.models.seeded_weights import offer_meta_model
    from builders.models.structure import model_structure

    try:
        model = load_model(model_name, construct=meta_device)
        with meta_device():
            structure = model_structure(model.module, torch.zeros(1, *model.input_size))
        if checkpoint is None:  # the study gives this very module its seeded weights: its structure is found once
            offer_meta_model(model_name, model)
        return structure
    except InputError:
        raise
    except Exception:  # noqa: BLE001  (an op without a meta kernel, a model that reads its weights while building)
        model = load_model(model_name, Path(checkpoint) if checkpoint else None)
        return model_structure(model.module, torch.zeros(1, *model.input_size))


def quantized_paths(model_name: str, checkpoint: str | None, variant: VariantPlan) -> list[str]:
    """The module paths `variant` quantizes in `model_name`: its recipe and exclusions applied to the structure that
    `preflight` checks them on (found once per model and checkpoint in a process)."""
    return variant_selection(_structure_of(model_name, checkpoint), variant).quantized


def preflight(model_name: str, checkpoint: str | None, variants: tuple[VariantPlan, ...],
              named: Collection[str]) -> tuple[tuple[VariantPlan, ...], list[str]]:
    """The FP8 variants checked against the model's structure before any work starts.

    Variants the user named (`named`: their names; `sessions.documents.plan.named_variants`) fail with one line;
    those a default recipe brought in that select nothing new are left out, with a note. An `--fp8-exclude` pattern
    that matches no layer fails with one line either way (`check_exclusions`). Returns the variants to run and the
    notes.
    """
    fp8 = [v for v in variants if v.precision == "fp8"]
    if not fp8 or model_name.endswith(".onnx"):
        return variants, []
    structure = _structure_of(model_name, checkpoint)
    check_exclusions(model_name, structure, list(dict.fromkeys(p for v in fp8 for p in v.exclude)))
    kept: list[VariantPlan] = []
    notes: list[str] = []
    # per backend: the real engine beside the simulation is no repeat
    chosen: dict[str | None, dict[str, Selection]] = {}
    for variant in variants:
        if variant.precision != "fp8":
            kept.append(variant)
            continue
        selection = variant_selection(structure, variant)
        try:
            check_selections(model_name, structure, {**chosen.get(variant.backend, {}), variant.name: selection})
        except InputError as exc:
            if variant.name in named:
                raise
            notes.append(f"left out: {exc.message}")
            continue
        chosen.setdefault(variant.backend, {})[variant.name] = selection
        kept.append(variant)
    if not kept:
        raise InputError(f"no variant of {model_name} is left to run")
    return tuple(kept), notes
