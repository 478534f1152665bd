"""The sweep matrix (TOML): options every job shares, axes whose product makes the jobs, exclusions.

```toml
[sweep]                       # optional
name = "senet-fp8"            # the default output folder's name (else the file's stem)
imports = ["my_backend"]      # modules each job imports first (plug-in backends and tracers)
[base]                        # `run` options, by their long names (`calib-count` or `calib_count`, once each)
device = "cuda"
[axes]                        # each a list; a value may itself be a list (fp8-recipe = [["all", "no-se"]])
model = ["senet154", "resnet50"]
batch = [1, 32]
[[exclude]]                   # a combination is left out when every key here equals its value
model = "resnet50"
batch = 32
```
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from inspector.options import check_choice
from inspector.request import StudyRequest, check_name
from sessions.documents.errors import InputError
from sessions.documents.input_files import read_toml_file
from sessions.documents.options import BY_KEY, Option


@dataclass(frozen=True)
class Matrix:
    name: str
    base: dict[str, Any]  # StudyRequest field -> value
    axes: dict[str, list[Any]]  # option name as written -> values
    exclude: list[dict[str, Any]]
    imports: tuple[str, ...] = ()


@dataclass(frozen=True)
class Combination:
    axes: dict[str, str]  # option name -> the value as text (the job's label in listings)
    request: StudyRequest


def load_matrix(path: Path) -> Matrix:
    return parse_matrix(read_toml_file(path, "matrix file"), path.stem, str(path))


def parse_matrix(doc: dict[str, Any], default_name: str, origin: str) -> Matrix:
    """The matrix of a TOML document, every key and value checked against the study options' spec
    (ranges included: a job never fails on what the file says); InputError (one line) otherwise."""
    unknown = set(doc) - {"sweep", "base", "axes", "exclude"}
    if unknown:
        raise InputError(f"{origin}: unknown table {min(unknown)!r}; use [sweep], [base], [axes], [[exclude]]")
    sweep, base, axes = (_table(doc, key, origin) for key in ("sweep", "base", "axes"))
    if set(sweep) - {"name", "imports"}:
        raise InputError(f"{origin}: [sweep] takes name and imports only")
    _one_spelling_each([*base, *axes], origin)
    for key, values in axes.items():
        if not isinstance(values, list) or not values:
            raise InputError(f"{origin}: axes.{key} must be a non-empty list")
        for value in values:
            _checked(_option(key, origin), value, f"{origin}: axes.{key}")
    exclude = _exclusions(doc.get("exclude", []), axes, origin)
    if "model" not in base and "model" not in axes:
        raise InputError(f"{origin}: no model: give [base] model or an axes.model list")
    imports = sweep.get("imports", [])
    if not isinstance(imports, list) or not all(isinstance(i, str) for i in imports):
        raise InputError(f"{origin}: sweep.imports must be a list of module names")
    name = _folder_name(sweep.get("name", default_name), origin)
    base_values = {_option(k, origin).field: _checked(_option(k, origin), v, f"{origin}: base.{k}")
                   for k, v in base.items()}
    return Matrix(name, base_values, axes, exclude, tuple(imports))


def _table(doc: dict[str, Any], key: str, origin: str) -> dict[str, Any]:
    table = doc.get(key, {})
    if not isinstance(table, dict):
        raise InputError(f"{origin}: {key} must be a table ([{key}])")
    return table


def _option(key: str, origin: str) -> Option:
    spec = BY_KEY.get(key)
    if spec is None:
        known = ", ".join(sorted({s.keys[0] for s in BY_KEY.values()}))
        raise InputError(f"{origin}: unknown option {key!r}; known: {known}")
    return spec


def _one_spelling_each(keys: list[str], origin: str) -> None:
    """One option under two keys (`calib-count` and `calib_count`, `fp8-recipe` and `fp8-layout`), in [base] or
    [axes] or across them, would label a job with one value and run it with the other: refused."""
    seen: dict[str, str] = {}
    for key in keys:
        spec = _option(key, origin)
        if spec.field in seen and seen[spec.field] == key:
            raise InputError(f"{origin}: {key} is both in [base] and in [axes]")
        if spec.field in seen:
            raise InputError(f"{origin}: {seen[spec.field]!r} and {key!r} are one option ({spec.flag}); give it once")
        seen[spec.field] = key


def _checked(spec: Option, value: Any, where: str) -> Any:
    """A matrix value as the request holds it, checked by the spec (type, range, choices)."""
    try:
        checked = spec.check(value)
        check_choice(spec, checked)
    except InputError as exc:
        raise InputError(f"{where}: {exc.message}") from None
    return checked


def _exclusions(exclude: Any, axes: dict[str, list[Any]], origin: str) -> list[dict[str, Any]]:
    """Each [[exclude]] table: non-empty, naming axes only, with values those axes take (of the same type)."""
    if not isinstance(exclude, list) or not all(isinstance(e, dict) for e in exclude):
        raise InputError(f"{origin}: exclude must be an array of tables ([[exclude]])")
    for index, rule in enumerate(exclude, 1):
        if not rule:
            raise InputError(f"{origin}: [[exclude]] number {index} is empty (it would exclude every combination)")
        for key, value in rule.items():
            if key not in axes:
                raise InputError(f"{origin}: exclude names {key!r}, which is not an axis")
            if not any(_same(value, v) for v in axes[key]):
                raise InputError(f"{origin}: exclude {key} = {value!r} is not one of axes.{key} {axes[key]!r}")
    return list(exclude)


def _same(a: Any, b: Any) -> bool:
    """Equal and of one type: TOML's 2 is not "2", and true is not 1."""
    return type(a) is type(b) and a == b


def _folder_name(name: Any, origin: str) -> str:
    """[sweep] name: a plain folder name (the default output folder is named after it)."""
    if not isinstance(name, str):
        raise InputError(f"{origin}: [sweep] name must be a string, not {name!r}")
    try:
        check_name(name)
    except InputError as exc:
        raise InputError(f"{origin}: [sweep] name: {exc.message}") from None
    if name.strip() in (".", ".."):
        raise InputError(f"{origin}: [sweep] name {name!r} is not a folder name")
    return name


MAX_COMBINATIONS = 10_000  # a sweep of a day of one-minute jobs on seven GPUs; a bigger one is split


def check_imports(matrix: Matrix, origin: str, allowed: bool) -> None:
    """`[sweep] imports` runs code in every job: only with `--allow-imports` on the command line."""
    if matrix.imports and not allowed:
        raise InputError(f"{origin}: [sweep] imports {', '.join(matrix.imports)} would run that code in every job; "
                         "pass --allow-imports to allow it")


def combinations(matrix: Matrix, origin: str) -> list[Combination]:
    """The product of the axes, exclusions left out, each as a request ready to resolve; a product of more than
    MAX_COMBINATIONS is refused before it is enumerated."""
    names = list(matrix.axes)
    total = math.prod(len(values) for values in matrix.axes.values())
    if total > MAX_COMBINATIONS:
        raise InputError(f"{origin}: the axes make {total:,} combinations, over the {MAX_COMBINATIONS:,} a sweep "
                         "plans; split the matrix")
    found = []
    for values in itertools.product(*(matrix.axes[n] for n in names)):
        chosen = dict(zip(names, values, strict=False))
        if any(all(chosen[k] == v for k, v in rule.items()) for rule in matrix.exclude):
            continue
        settings = dict(matrix.base)
        for name, value in chosen.items():
            spec = _option(name, origin)
            settings[spec.field] = _checked(spec, value, f"{origin}: axes.{name}")
        request = StudyRequest(**settings)
        try:
            request.validate()
        except InputError as exc:
            raise InputError(f"{origin}: {label_of(chosen)}: {exc.message}") from None
        found.append(Combination({n: _text(v) for n, v in chosen.items()}, request))
    if not found:
        raise InputError(f"{origin}: every combination is excluded; no jobs")
    return found


def label_of(chosen: dict[str, Any]) -> str:
    return " ".join(f"{name}={_text(value)}" for name, value in chosen.items()) or "(no axes)"


def _text(value: Any) -> str:
    return ",".join(map(str, value)) if isinstance(value, list) else str(value)
