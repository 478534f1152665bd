"""The shape of the code, checked: a core without Textual, no import cycles, short functions."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import ROOT

PACKAGES = ("inspector", "builders", "profilers", "sessions")
CORE = ("builders", "profilers", "sessions")
MAX_FUNCTION_LINES = 60
SHORT = ("builders", "profilers", "sessions", "inspector/study.py")


def project_modules() -> dict[str, Path]:
    modules = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


def imports_of(path: Path, modules: dict[str, Path]) -> set[str]:
    """Every module imported anywhere in `path`, lazy imports inside functions included.

    `from package import submodule` counts as importing the submodule, not the package.
    """
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            submodules = {f"{node.module}.{alias.name}" for alias in node.names} & set(modules)
            found.update(submodules or {node.module})
    return found


def import_graph() -> dict[str, set[str]]:
    modules = project_modules()
    return {name: {m for m in imports_of(path, modules) if m in modules and m != name} for name, path in modules.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_no_import_cycle_between_project_modules():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_the_cycle_check_finds_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]


def test_the_core_never_imports_textual_or_the_front_ends():
    offenders = []
    modules = project_modules()
    for name, path in modules.items():
        if name.split(".")[0] in CORE:
            bad = {m for m in imports_of(path, modules) if m.split(".")[0] in ("textual", "rich", "inspector")}
            offenders += [f"{name} imports {m}" for m in sorted(bad)]
    assert offenders == []


def test_no_long_functions_in_the_core():
    long = []
    for target in SHORT:
        paths = [ROOT / target] if target.endswith(".py") else sorted((ROOT / target).rglob("*.py"))
        for path in paths:
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    lines = node.end_lineno - node.lineno + 1
                    if lines > MAX_FUNCTION_LINES:
                        long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({lines} lines)")
    assert long == []


POLICY_OWNERS = {"sessions/comparison.py", "sessions/noise.py"}  # the baseline rule, the noise rule
NOISE_LITERALS = {0.05, 1.05, 0.95, 0.1, 1.1}  # bands hand-written before the noise rule had one owner


def policy_literals(path: Path, root: Path = ROOT) -> list[str]:
    """Comparisons against a literal "fp16" (a baseline chosen by hand) or against a noise-band number."""
    found = []
    tree = ast.parse(path.read_text())
    for node in tree.body:  # a module constant holding a band (NOISE = 0.05) is a second owner too
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and node.value.value in NOISE_LITERALS:
            found.append(f"{path.relative_to(root)}:{node.lineno}: a noise-band constant")
    for node in ast.walk(tree):
        if not isinstance(node, ast.Compare):
            continue
        for operand in ast.walk(node):
            if isinstance(operand, ast.Constant) and operand.value == "fp16":
                found.append(f"{path.relative_to(root)}:{node.lineno}: compares with 'fp16'")
            elif isinstance(operand, ast.Constant) and type(operand.value) is float and operand.value in NOISE_LITERALS:
                found.append(f"{path.relative_to(root)}:{node.lineno}: compares with {operand.value}")
    return found


def test_baselines_and_noise_bands_are_decided_only_by_their_owners():
    found = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if str(path.relative_to(ROOT)) not in POLICY_OWNERS and path.name != "tables.py":  # tables: rounding
                found += policy_literals(path)
    assert found == []


def test_the_policy_check_finds_a_hand_written_baseline_and_band(tmp_path):
    (tmp_path / "x.py").write_text('NOISE = 0.05\nif v.name == "fp16" or abs(s - 1) <= 0.05:\n    pass\n')
    assert len(policy_literals(tmp_path / "x.py", tmp_path)) == 3
