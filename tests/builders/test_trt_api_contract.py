"""The TensorRT backend cannot run here, so every name it uses is checked against the real bindings.

tests/data/trt_api/tensorrt-<version>.txt hold the names that the tensorrt-cu12-bindings 10.x and
tensorrt-cu13-bindings 11.x wheels register, read from their `tensorrt.so` by
benchmarks/trt_api_names.py: the flat set of identifiers, and per enum its members.

The check reads every project module that touches TensorRT (imports it, or uses a name `trt`) and
takes every attribute read, write and method call on any receiver, the literal names given to
getattr / hasattr / setattr, and the methods of subclasses of TensorRT classes (IProfiler, ...),
which TensorRT calls by name. A name passes when:

- its receiver is certainly not a TensorRT object: something from a module that does not touch
  TensorRT (torch, numpy, pathlib, our sessions, ...), a parameter annotated with a type that is not
  TensorRT's, a literal, a builtin's result, or a variable or `self` attribute only ever assigned such
  values; or it is `self.x` where the class defines x, or `trt_compat.f` where that module defines f;
- or it is in NON_TENSORRT_NAMES below;
- or TensorRT has it in the versions the code runs under: all of them (10.x and 11.x) when the use
  is unconditional; those a `major(trt) >= 11`-style test selects, inside its branches and after an
  `if <test>: return`; at least one under `hasattr(...)` or `try: ... except AttributeError`.
  `trt.Enum.MEMBER` must be a member of that enum (`Enum.*` in a list: not all members could be
  extracted, then any name of that version passes).
"""

from __future__ import annotations

import ast
import builtins
import functools
import operator
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.conftest import ROOT, TESTS

DATA = TESTS / "data" / "trt_api"
PACKAGES = ("builders", "profilers", "sessions", "inspector")
MUST_BE_CHECKED = {"builders/tensorrt/tensorrt_backend.py", "builders/tensorrt/compat.py"}

# Non-TensorRT names reached through receivers the rules above cannot tell from TensorRT objects.
# Extend it when the contract test fails on a name that is not TensorRT's; say where it comes from.
# TensorRT's own names cannot go here (a test checks): annotate the receiver instead.
NON_TENSORRT_NAMES = {
    "split",  # str, on trt.__version__
    "label",  # the backend class's own label (`cls.label` in a classmethod), no TensorRT object
}

# these builtins' results never are, nor hold, TensorRT objects (containers may: not listed)
FOREIGN_BUILTINS = {
    "abs", "bool", "bytearray", "bytes", "float", "format", "hash", "id", "int", "isinstance", "issubclass", "len",
    "memoryview", "open", "print", "range", "repr", "round", "str", "super",
} | {name for name in dir(builtins) if name[0].isupper()}  # exceptions, warnings
ENUM_OWN = {"name", "value"}  # pybind11 enum properties, besides dunders
VERSION_NAMES = {"major", "__version__", "trt_major"}
COMPARISONS = {ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge,
               ast.Eq: operator.eq, ast.NotEq: operator.ne}
MIRRORED = {ast.Lt: ast.Gt, ast.Gt: ast.Lt, ast.LtE: ast.GtE, ast.GtE: ast.LtE, ast.Eq: ast.Eq, ast.NotEq: ast.NotEq}
FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


# -- the name lists


def major_of(version: str) -> int:
    return int(version.split(".")[0])


@dataclass(frozen=True)
class Api:
    version: str
    names: frozenset[str]
    enums: dict[str, frozenset[str] | None]  # None: members not all extracted

    def has(self, name: str, qualifier: str | None) -> bool:
        members = self.enums.get(qualifier, ()) if qualifier else ()
        if qualifier in self.enums and members is not None and name not in ENUM_OWN and not name.startswith("__"):
            return name in members
        return name in self.names


def load_api(path: Path) -> Api:
    lines = path.read_text().splitlines()
    version = re.search(r"tensorrt ([\d.]+)", lines[0]).group(1)
    names, members, partial = set(), {}, set()
    for line in lines:
        if line.startswith("#"):
            continue
        enum, _, member = line.rpartition(".")
        if not enum:
            names.add(line)
        elif member == "*":
            partial.add(enum)
        else:
            members.setdefault(enum, set()).add(member)
    enums = {enum: None if enum in partial else frozenset(members.get(enum, ())) for enum in {*members, *partial}}
    return Api(version, frozenset(names), enums)


APIS = sorted((load_api(p) for p in DATA.glob("tensorrt-*.txt")), key=lambda api: major_of(api.version))


@dataclass(frozen=True)
class Need:
    """The versions a use must be valid in: every one of them, or (under hasattr / try) any one."""

    versions: frozenset[str]
    any_one: bool = False

    def narrowed(self, test: Callable[[int], bool], outcome: bool) -> Need:
        return Need(frozenset(v for v in self.versions if test(major_of(v)) == outcome), self.any_one)

    def lenient(self) -> Need:
        return Need(self.versions, True)

    def met_by(self, valid: set[str]) -> bool:
        if not self.versions:  # code for versions we have no list of: any known version will do
            return bool(valid)
        return bool(self.versions & valid) if self.any_one else self.versions <= valid


# -- the modules


@dataclass
class Module:
    path: Path
    tree: ast.Module
    dotted: str
    top_names: set[str] = field(default_factory=set)
    returns: dict[str, ast.expr | None] = field(default_factory=dict)  # top-level function -> return annotation

    def __post_init__(self) -> None:
        for node in self.tree.body:
            if isinstance(node, (*FUNCTIONS, ast.ClassDef)):
                self.top_names.add(node.name)
                if isinstance(node, FUNCTIONS):
                    self.returns[node.name] = node.returns
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                    self.top_names |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                self.top_names |= {(a.asname or a.name).split(".")[0] for a in node.names}

    @property
    def relative(self) -> Path:
        return self.path.relative_to(ROOT)


@functools.cache
def project_modules() -> dict[str, Module]:
    modules = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            dotted = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
            modules[dotted] = Module(path, ast.parse(path.read_text(), str(path)), dotted)
    return modules


def touches_tensorrt(tree: ast.AST) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] == "tensorrt" for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "tensorrt":
            return True
        if isinstance(node, ast.Name) and node.id == "trt" or isinstance(node, ast.arg) and node.arg == "trt":
            return True
    return False


def may_be_tensorrt(annotation: ast.expr | None) -> bool:
    return annotation is None or bool(re.search(r"\b(trt|tensorrt|Any|object)\b", ast.unparse(annotation)))


# -- version guards


def version_test(test: ast.expr) -> Callable[[int], bool] | None:
    """A predicate on the TensorRT major version, for `major(trt) >= 11`-style tests; else None."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = version_test(test.operand)
        return None if inner is None else (lambda m: not inner(m))
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and type(test.ops[0]) in COMPARISONS):
        return None
    left, op, right = test.left, type(test.ops[0]), test.comparators[0]
    if isinstance(left, ast.Constant):
        left, right, op = right, left, MIRRORED[op]
    names = {n.id for n in ast.walk(left) if isinstance(n, ast.Name)}
    names |= {n.attr for n in ast.walk(left) if isinstance(n, ast.Attribute)}
    if not (names & VERSION_NAMES and isinstance(right, ast.Constant) and isinstance(right.value, int)):
        return None
    compare, bound = COMPARISONS[op], right.value
    return lambda m: compare(m, bound)


def is_hasattr_test(test: ast.expr) -> bool:
    calls = (n.func for n in ast.walk(test) if isinstance(n, ast.Call))
    return any(isinstance(f, ast.Name) and f.id == "hasattr" for f in calls)


def catches_attribute_error(node: ast.Try) -> bool:
    return any(h.type is None or "AttributeError" in ast.unparse(h.type) for h in node.handlers)


def is_self(node: ast.expr) -> bool:
    return isinstance(node, ast.Name) and node.id == "self"


def ends_the_block(node: ast.If) -> bool:
    return not node.orelse and isinstance(node.body[-1], (ast.Return, ast.Raise))


def literal_attribute(node: ast.AST) -> tuple[str, ast.expr, str] | None:
    """(function, receiver, name) for getattr / hasattr / setattr with a literal name."""
    match node:
        case ast.Call(func=ast.Name(id="getattr" | "hasattr" | "setattr" as how), args=[receiver, name, *_]):
            if isinstance(name, ast.Constant) and isinstance(name.value, str):
                return how, receiver, name.value
    return None


# -- the check


@dataclass(frozen=True)
class Use:
    where: str  # path:line
    name: str
    qualifier: str | None  # `A.B` for trt.A.B.name
    code: str
    need: Need


@dataclass(frozen=True)
class ClassScope:
    defined: set[str]  # methods, class attributes, self.x assigned anywhere in the class
    foreign: set[str]  # those self.x only ever holding non-TensorRT values


NO_CLASS = ClassScope(set(), set())


class Checker:
    """The TensorRT-facing names of one module, each with the versions it must exist in."""

    def __init__(self, module: Module, modules: dict[str, Module], trt_modules: set[str]):
        self.module = module
        self.uses: list[Use] = []
        self.problems: list[str] = []
        self.trt_aliases = {"trt"}
        self.foreign_imports: set[str] = set()
        self.trt_project_modules: dict[str, Module] = {}  # alias -> a module touching TensorRT
        self.returns = dict(module.returns)  # function called by name -> return annotation
        for node in ast.walk(module.tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    self.imported(alias.asname or alias.name.split(".")[0], alias.name, None, modules, trt_modules)
            elif isinstance(node, ast.ImportFrom):
                for alias in node.names:
                    self.imported(alias.asname or alias.name, node.module or "", alias.name, modules, trt_modules)

    def imported(self, bound: str, source: str, member: str | None, modules, trt_modules: set[str]) -> None:
        full = f"{source}.{member}" if member else source
        if source.split(".")[0] == "tensorrt":
            self.trt_aliases.add(bound)
        elif full in trt_modules:
            self.trt_project_modules[bound] = modules[full]
        elif source in trt_modules:
            self.returns[bound] = modules[source].returns.get(member)
        else:
            self.foreign_imports.add(bound)

    # which receivers are certainly not TensorRT objects
    def foreign(self, node: ast.expr, env: set[str], self_foreign: set[str]) -> bool:
        match node:
            case ast.Constant() | ast.JoinedStr() | ast.Compare():
                return True
            case ast.List(elts=items) | ast.Tuple(elts=items) | ast.Set(elts=items) | ast.Dict(values=items):
                return bool(items) and all(item is not None and self.foreign(item, env, self_foreign) for item in items)
            case ast.BinOp(left=left):
                return self.foreign(left, env, self_foreign)
            case ast.BoolOp(values=values):
                return all(self.foreign(v, env, self_foreign) for v in values)
            case ast.IfExp(body=body, orelse=orelse):
                return self.foreign(body, env, self_foreign) and self.foreign(orelse, env, self_foreign)
            case ast.Name(id=name):
                return name in env or name in self.foreign_imports
            case ast.Attribute(value=ast.Name(id="self"), attr=attr):
                return attr in self_foreign
            case ast.Attribute(value=value) | ast.Subscript(value=value) | ast.Starred(value=value):
                return self.foreign(value, env, self_foreign)
            case ast.Call(func=ast.Name(id=name)):
                if name in FOREIGN_BUILTINS or name in self.foreign_imports:
                    return True
                return not may_be_tensorrt(self.returns[name]) if name in self.returns else name in env
            case ast.Call(func=ast.Attribute(value=ast.Name(id=alias), attr=attr)) if alias in self.trt_project_modules:
                return not may_be_tensorrt(self.trt_project_modules[alias].returns.get(attr))
            case ast.Call(func=ast.Attribute(value=value)):
                return self.foreign(value, env, self_foreign)
        return False

    @staticmethod
    def bindings(body: list[ast.stmt]) -> list[tuple[ast.expr, ast.expr]]:
        """(target, value) of every assignment in a function body, nested functions and classes left out."""
        found = []
        stack: list[ast.AST] = list(body)
        while stack:
            node = stack.pop()
            if isinstance(node, (*FUNCTIONS, ast.ClassDef, ast.Lambda)):
                continue
            if isinstance(node, ast.Assign):
                found += [(target, node.value) for target in node.targets]
            elif isinstance(node, ast.AnnAssign) and node.value is not None:  # the annotation says what it holds
                found.append((node.target, node.value if may_be_tensorrt(node.annotation) else ast.Constant(None)))
            elif isinstance(node, (ast.AugAssign, ast.NamedExpr)):
                found.append((node.target, node.value))
            elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
                found.append((node.target, node.iter))  # an element of a foreign iterable is foreign
            elif isinstance(node, ast.withitem) and node.optional_vars is not None:
                found.append((node.optional_vars, node.context_expr))
            stack.extend(ast.iter_child_nodes(node))
        return found

    def local_env(self, function: ast.FunctionDef | ast.AsyncFunctionDef, outer: set[str], self_foreign: set[str]):
        """The function's local names that certainly hold no TensorRT object."""
        arguments = function.args
        params = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]
        params += [a for a in (arguments.vararg, arguments.kwarg) if a]
        assigned: dict[str, list[ast.expr]] = {}
        for target, value in self.bindings(function.body):
            for name in (n.id for n in ast.walk(target) if isinstance(n, ast.Name)):
                assigned.setdefault(name, []).append(value)
        env = outer - {a.arg for a in params} - set(assigned)
        env |= {a.arg for a in params if not may_be_tensorrt(a.annotation) and a.arg not in assigned}
        while more := {
            name for name, values in assigned.items()
            if name not in env and all(self.foreign(v, env, self_foreign) for v in values)
        }:
            env |= more
        return env

    def class_scope(self, cls: ast.ClassDef, outer: set[str]) -> ClassScope:
        methods = [n for n in cls.body if isinstance(n, FUNCTIONS)]
        defined = {m.name for m in methods}
        for node in cls.body:
            if isinstance(node, (ast.Assign, ast.AnnAssign)):
                for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                    defined |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
        values: dict[str, list[tuple[ast.FunctionDef, ast.expr]]] = {}
        for method in methods:
            for target, value in self.bindings(method.body):
                if isinstance(target, ast.Attribute) and is_self(target.value):
                    values.setdefault(target.attr, []).append((method, value))
        foreign: set[str] = set()
        while True:
            envs = {m: self.local_env(m, outer, foreign) for m in methods}
            more = {
                attr for attr, assigned in values.items()
                if attr not in foreign and all(self.foreign(v, envs[m], foreign) for m, v in assigned)
            }
            if not more:
                return ClassScope(defined | set(values), foreign)
            foreign |= more

    def chain(self, node: ast.expr) -> str | None:
        """`A.B` for trt.A.B (or self.trt.A.B), `` for trt itself, None for anything else."""
        if isinstance(node, ast.Name):
            return "" if node.id in self.trt_aliases else None
        if isinstance(node, ast.Attribute):
            if is_self(node.value):
                return "" if node.attr in self.trt_aliases else None
            inner = self.chain(node.value)
            return None if inner is None else f"{inner}.{node.attr}".lstrip(".")
        return None

    # walking the module
    def run(self, everyone: Need) -> None:
        self.block(self.module.tree.body, everyone, set(), NO_CLASS)

    def block(self, body: list[ast.stmt], need: Need, env: set[str], cls: ClassScope) -> None:
        for stmt in body:
            self.visit(stmt, need, env, cls)
            if isinstance(stmt, ast.If) and ends_the_block(stmt) and (test := version_test(stmt.test)):
                need = need.narrowed(test, False)  # `if major(trt) >= 11: return`: the rest runs on the others

    def visit(self, node: ast.AST, need: Need, env: set[str], cls: ClassScope) -> None:
        match node:
            case ast.FunctionDef() | ast.AsyncFunctionDef():
                for expr in [*node.decorator_list, *node.args.defaults, *filter(None, node.args.kw_defaults)]:
                    self.visit(expr, need, env, cls)
                self.block(node.body, need, self.local_env(node, env, cls.foreign), cls)
            case ast.ClassDef():
                for base in node.bases:
                    self.visit(base, need, env, cls)
                if any(self.chain(base) for base in node.bases):  # TensorRT calls these methods by name
                    for method in (n for n in node.body if isinstance(n, FUNCTIONS) and not n.name.startswith("_")):
                        self.uses.append(Use(self.where(method), method.name, None, f"def {method.name}", need))
                self.block(node.body, need, env, self.class_scope(node, env))
            case ast.If() | ast.IfExp():
                self.visit(node.test, need, env, cls)
                test = version_test(node.test)
                if test is not None:
                    then, otherwise = need.narrowed(test, True), need.narrowed(test, False)
                else:
                    then, otherwise = need.lenient() if is_hasattr_test(node.test) else need, need
                for branch, branch_need in ((node.body, then), (node.orelse, otherwise)):
                    for part in branch if isinstance(branch, list) else [branch]:
                        self.visit(part, branch_need, env, cls)
            case ast.Try():
                self.block(node.body, need.lenient() if catches_attribute_error(node) else need, env, cls)
                for part in [*node.handlers, *node.orelse, *node.finalbody]:
                    self.visit(part, need, env, cls)
            case ast.Lambda():
                self.visit(node.body, need, env - {a.arg for a in node.args.args}, cls)
            case ast.Attribute():
                self.attribute(node, node.attr, node.value, need, env, cls)
                self.visit(node.value, need, env, cls)
            case _:
                if (named := literal_attribute(node)) is not None:
                    how, receiver, name = named
                    self.attribute(node, name, receiver, need if how == "setattr" else need.lenient(), env, cls)
                for child in ast.iter_child_nodes(node):
                    self.visit(child, need, env, cls)

    def attribute(self, node: ast.expr, name: str, receiver: ast.expr, need: Need, env: set[str], cls: ClassScope):
        if is_self(receiver) and (name in cls.defined or name in self.trt_aliases):
            return
        if isinstance(receiver, ast.Name) and receiver.id in self.trt_project_modules:
            module = self.trt_project_modules[receiver.id]
            if name not in module.top_names:
                self.problems.append(f"{self.where(node)}: `{ast.unparse(node)}`: {module.relative} has no `{name}`")
            return
        if not self.foreign(receiver, env, cls.foreign):
            qualifier = self.chain(receiver)
            self.uses.append(Use(self.where(node), name, qualifier or None, ast.unparse(node)[:90], need))

    def where(self, node: ast.AST) -> str:
        return f"{self.module.relative}:{node.lineno}"


def problems_in(checked: list[Module], modules: dict[str, Module], trt_modules: set[str]) -> list[str]:
    versions = [api.version for api in APIS]
    problems = []
    for module in checked:
        checker = Checker(module, modules, trt_modules)
        checker.run(Need(frozenset(versions)))
        problems += checker.problems
        for use in checker.uses:
            valid = {api.version for api in APIS if api.has(use.name, use.qualifier)}
            if use.name in NON_TENSORRT_NAMES or use.need.met_by(valid):
                continue
            spelled = f"{use.qualifier}.{use.name}" if use.qualifier else use.name
            if not valid and use.code.startswith("def "):
                problems.append(
                    f"{use.where}: `{use.code}`: neither TensorRT {' nor '.join(versions)} has a `{use.name}` to "
                    "override: TensorRT never calls it; fix the name"
                )
            elif not valid:
                problems.append(
                    f"{use.where}: `{use.code}`: neither TensorRT {' nor '.join(versions)} registers `{spelled}`: "
                    "fix the name; if the receiver is not a TensorRT object, annotate it with its type or add "
                    f"`{use.name}` to NON_TENSORRT_NAMES in tests/builders/test_trt_api_contract.py"
                )
            else:
                lacking = use.need.versions - valid if not use.need.any_one else use.need.versions
                problems.append(
                    f"{use.where}: `{use.code}`: `{spelled}` exists in TensorRT {', '.join(sorted(valid))} but not in "
                    f"{', '.join(sorted(lacking))}: use it only under a version test (`if major(trt) < 11:`) or hasattr"
                )
    return problems


def project() -> tuple[dict[str, Module], list[Module]]:
    modules = dict(project_modules())
    return modules, [m for m in modules.values() if touches_tensorrt(m.tree)]


def check_source(source: str) -> list[str]:
    """What the contract finds in one more module of builders/ (for the tests of the check itself)."""
    modules, checked = project()
    probe = Module(ROOT / "builders" / "_contract_probe.py", ast.parse(source), "builders._contract_probe")
    modules[probe.dotted] = probe
    return problems_in([probe], modules, {probe.dotted, *(m.dotted for m in checked)})


# -- the tests


def test_the_backend_uses_only_names_the_real_bindings_register():
    modules, checked = project()
    assert {str(m.relative) for m in checked} >= MUST_BE_CHECKED
    problems = problems_in(checked, modules, {m.dotted for m in checked})
    assert not problems, "\n".join(problems)


def test_the_name_lists_are_the_real_wheels():
    assert [major_of(api.version) for api in APIS] == [10, 11]
    for path in DATA.glob("tensorrt-*.txt"):
        assert re.match(r"# tensorrt_cu1\d_bindings-[\d.]+-\S+\.whl sha256=[0-9a-f]{64} ", path.read_text())
    old, new = APIS
    # what 11.x removed (tensorrt-facts.md, section 2.1)
    for flag in ("FP16", "INT8", "FP8", "BF16", "OBEY_PRECISION_CONSTRAINTS"):
        assert old.has(flag, "BuilderFlag") and not new.has(flag, "BuilderFlag"), flag
    for name in ("int8_calibrator", "platform_has_fast_fp16", "device_memory_size", "precision", "dynamic_range"):
        assert name in old.names and name not in new.names, name
    assert old.has("EXPLICIT_BATCH", "NetworkDefinitionCreationFlag")
    assert not new.has("EXPLICIT_BATCH", "NetworkDefinitionCreationFlag")
    assert old.has("CUDNN", "TacticSource") and not new.has("CUDNN", "TacticSource")
    # what both have
    both = ("set_timing_cache", "execute_async_v3", "nvtx_verbosity", "report_layer_time", "phase_start",
            "step_complete", "phase_finish", "get_tensor_name", "num_io_tensors", "create_engine_inspector",
            "Logger", "Builder", "OnnxParser", "Runtime", "IProfiler", "IProgressMonitor", "nptype", "__version__")
    members = [("ProfilingVerbosity", "LAYER_NAMES_ONLY"), ("ProfilingVerbosity", "DETAILED"),
               ("LayerInformationFormat", "JSON"), ("TensorIOMode", "INPUT"), ("MemoryPoolType", "WORKSPACE"),
               ("NetworkDefinitionCreationFlag", "STRONGLY_TYPED"), ("ILogger.Severity", "WARNING"),
               ("DataType", "BF16")]
    for api in APIS:
        assert not set(both) - api.names, api.version
        for enum, member in members:
            assert api.has(member, enum) and not api.has(member + "X", enum), (api.version, enum, member)


def test_the_allow_list_holds_no_tensorrt_name():
    assert not NON_TENSORRT_NAMES & set().union(*(api.names for api in APIS))


PROBE = """
from pathlib import Path
import torch
from builders.tensorrt import compat as trt_compat

def build(trt, onnx: Path, engine, config):
    logger = trt.Logger(trt.Logger.WARNING)
    {line}
"""


@pytest.mark.parametrize(
    "line, message",
    [
        ("trt.Logger(trt.Logger.WARNINGX)", "registers `Logger.WARNINGX`"),
        ("config.set_timing_cach(None, False)", "registers `set_timing_cach`"),
        ("name = engine.get_tensor_nam(0)", "registers `get_tensor_nam`"),
        ("config.profiling_verbosity = trt.ProfilingVerbosity.DETAILD", "registers `ProfilingVerbosity.DETAILD`"),
        ("trt.ProfilingVerbosity.JSON", "registers `ProfilingVerbosity.JSON`"),  # a member of another enum
        ("ctx = engine.create_execution_context()\n    ctx.nvtx_verbosty = 0", "registers `nvtx_verbosty`"),
        ("ok = hasattr(config, 'set_timing_cach')", "registers `set_timing_cach`"),
        ("held = {}\n    held['a'] = engine\n    held['a'].get_tensor_nam(0)", "registers `get_tensor_nam`"),
        ("for e in [engine]:\n        e.get_tensor_nam(0)", "registers `get_tensor_nam`"),
        ("class P(trt.IProfiler):\n        def report_layer_tim(self, name, ms): pass",
         "has a `report_layer_tim` to override"),
        ("trt_compat.build_plann(trt)", "has no `build_plann`"),
        ("config.set_flag(trt.BuilderFlag.FP16)", "`BuilderFlag.FP16` exists in TensorRT 10.16.1.11 but not in 11.4"),
        ("x = engine.int8_calibrator", "`int8_calibrator` exists in TensorRT 10.16.1.11 but not in 11.4"),
        ("if trt_compat.major(trt) >= 11:\n        config.set_flag(trt.BuilderFlag.FP16)",
         "`BuilderFlag.FP16` exists in TensorRT 10.16.1.11 but not in 11.4"),
    ],
)
def test_the_check_fails_on_a_wrong_name(line, message):
    problems = check_source(PROBE.format(line=line))
    assert len(problems) == 1 and message in problems[0] and "_contract_probe.py:" in problems[0], problems


@pytest.mark.parametrize(
    "line",
    [
        "config.set_timing_cache(config.create_timing_cache(b''), False)",
        "if trt_compat.major(trt) < 11:\n        config.set_flag(trt.BuilderFlag.FP16)",
        "if trt_compat.major(trt) >= 11:\n        return\n    config.set_flag(trt.BuilderFlag.FP16)",
        "if hasattr(trt.BuilderFlag, 'FP16'):\n        config.set_flag(trt.BuilderFlag.FP16)",
        "flag = trt.BuilderFlag.FP16 if trt_compat.major(trt) < 11 else None",
        "torch.cuda.synchronizze()",  # not TensorRT's
        "onnx.read_bytess()",  # a Path, by its annotation
        "class M(trt.IProgressMonitor):\n        def phase_start(self, name, parent, steps): self.steps = {}",
    ],
)
def test_the_check_passes_right_names(line):
    assert not check_source(PROBE.format(line=line))
