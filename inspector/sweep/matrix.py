"""The sweep matrix (TOML): options every job shares, axes whose product makes the jobs, exclusions.

```toml
[sweep]                       # optional
name = "senet-fp8"            # the default output folder's name (else the file's stem)
imports = ["my_backend"]      # modules each job imports first (plug-in backends and tracers)
[base]                        # `run` options, by their long names (`calib-count` or `calib_count`)
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
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from inspector.request import StudyRequest
from sessions.errors import InputError
from sessions.input_files import read_toml_file

# option name (as on the command line, `-` -> `_`) -> StudyRequest field; out and raw-trace are the sweep's
OPTIONS = {
    "model": "model", "backend": "backend", "device": "device", "variants": "variants", "batch": "batch",
    "fp8_recipe": "fp8_recipes", "fp8_layout": "fp8_recipes", "fp8_exclude": "fp8_exclude", "images": "images",
    "calib_count": "calib_count", "rounds": "rounds", "iters": "iters", "warmup": "warmup_s", "tracer": "tracer",
    "trace_calls": "trace_calls", "checkpoint": "checkpoint", "opt_level": "opt_level", "seed": "seed",
    "eval_count": "eval_count", "switch_warmup": "switch_warmup", "threads": "threads",
}
TUPLE_FIELDS = {"fp8_recipes", "fp8_exclude"}
FIELD_TYPES = {f.name: f.type for f in fields(StudyRequest)}


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
    unknown = set(doc) - {"sweep", "base", "axes", "exclude"}
    if unknown:
        raise InputError(f"{origin}: unknown table {min(unknown)!r}; use [sweep], [base], [axes], [[exclude]]")
    sweep, base, axes = (_table(doc, key, origin) for key in ("sweep", "base", "axes"))
    exclude = doc.get("exclude", [])
    if not isinstance(exclude, list) or not all(isinstance(e, dict) for e in exclude):
        raise InputError(f"{origin}: exclude must be an array of tables ([[exclude]])")
    if set(sweep) - {"name", "imports"}:
        raise InputError(f"{origin}: [sweep] takes name and imports only")
    for key, values in axes.items():
        if not isinstance(values, list) or not values:
            raise InputError(f"{origin}: axes.{key} must be a non-empty list")
    for key in [*base, *axes, *(k for e in exclude for k in e)]:
        _field(key, origin)
    clash = {_field(k, origin) for k in base} & {_field(k, origin) for k in axes}
    if clash:
        raise InputError(f"{origin}: {min(clash)} is both in [base] and in [axes]")
    for rule in exclude:
        for key in rule:
            if key not in axes:
                raise InputError(f"{origin}: exclude names {key!r}, which is not an axis")
    if "model" not in base and "model" not in axes:
        raise InputError(f"{origin}: no model: give [base] model or an axes.model list")
    imports = sweep.get("imports", [])
    if not isinstance(imports, list) or not all(isinstance(i, str) for i in imports):
        raise InputError(f"{origin}: sweep.imports must be a list of module names")
    name = sweep.get("name", default_name)
    return Matrix(str(name), {_field(k, origin): v for k, v in base.items()}, axes, list(exclude), tuple(imports))


def _table(doc: dict[str, Any], key: str, origin: str) -> dict[str, Any]:
    table = doc.get(key, {})
    if not isinstance(table, dict):
        raise InputError(f"{origin}: {key} must be a table ([{key}])")
    return table


def _field(option: str, origin: str) -> str:
    field = OPTIONS.get(option.replace("-", "_"))
    if field is None:
        known = ", ".join(sorted(k.replace("_", "-") for k in OPTIONS))
        raise InputError(f"{origin}: unknown option {option!r}; known: {known}")
    return field


def _value(field: str, value: Any, where: str) -> Any:
    if field in TUPLE_FIELDS:
        items = value if isinstance(value, list) else [value]
        if not all(isinstance(i, str) for i in items):
            raise InputError(f"{where}: expected a name or a list of names")
        return tuple(items)
    expected = FIELD_TYPES[field]
    ok = {"int": (int,), "float | None": (int, float), "int | None": (int,)}.get(str(expected), (str,))
    if isinstance(value, bool) or not isinstance(value, ok):
        raise InputError(f"{where}: {value!r} is not a valid value")
    return float(value) if field == "warmup_s" else value


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
        chosen = dict(zip(names, values))
        if any(all(chosen[k] == v for k, v in rule.items()) for rule in matrix.exclude):
            continue
        settings = dict(matrix.base)
        for name, value in chosen.items():
            settings[_field(name, origin)] = value
        request_values = {f: _value(f, v, f"{origin}: {f}") for f, v in settings.items()}
        request = StudyRequest(**request_values)
        request.validate()
        found.append(Combination({n: _text(v) for n, v in chosen.items()}, request))
    if not found:
        raise InputError(f"{origin}: every combination is excluded; no jobs")
    return found


def _text(value: Any) -> str:
    return ",".join(map(str, value)) if isinstance(value, list) else str(value)


def run_argv(request: StudyRequest) -> list[str]:
    """The `trt-inspect run` command line that asks for `request` (what each job's session records)."""
    argv = ["trt-inspect", "run", request.model]
    defaults = StudyRequest(model=request.model)
    for option, field in OPTIONS.items():
        value = getattr(request, field)
        if field == "model" or option == "fp8_layout" or value == getattr(defaults, field):
            continue
        flag = "--" + ("warmup" if field == "warmup_s" else option.replace("_", "-"))
        for item in value if field in TUPLE_FIELDS else [value]:
            argv += [flag, f"{item:g}" if isinstance(item, float) else str(item)]
    return argv
