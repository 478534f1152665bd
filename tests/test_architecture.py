"""The shape of the code, checked: a core without Textual, no import cycles, short functions."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.conftest import ROOT

PACKAGES = ("inspector", "builders", "profilers", "sessions")
CORE = ("builders", "profilers", "sessions")
MAX_FUNCTION_LINES = 60
SHORT = ("builders", "profilers", "sessions", "inspector/study.py", "inspector/probe")


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
    return {name: {m for m in imports_of(path, modules) if m in modules and m != name}
            for name, path in modules.items()}


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


# Which package may import which: measurement (profilers) never reaches into what is measured (builders); the
# orchestration that joins them (a study, the FP8 probe) lives in inspector.
FORBIDDEN_ARROWS = {("profilers", "builders")}


def package_arrows(graph: dict[str, set[str]]) -> dict[tuple[str, str], list[str]]:
    """The imports between top-level packages, each arrow with the module imports that make it."""
    arrows: dict[tuple[str, str], list[str]] = {}
    for name, imported in graph.items():
        for other in sorted(imported):
            arrow = (name.split(".")[0], other.split(".")[0])
            if arrow[0] != arrow[1]:
                arrows.setdefault(arrow, []).append(f"{name} imports {other}")
    return arrows


def test_profilers_never_import_builders():
    arrows = package_arrows(import_graph())
    assert [line for arrow in sorted(FORBIDDEN_ARROWS) for line in arrows.get(arrow, [])] == []


def package_graph(arrows: dict[tuple[str, str], list[str]]) -> dict[str, set[str]]:
    """The packages each package imports."""
    packages: dict[str, set[str]] = {package: set() for arrow in arrows for package in arrow}
    for source, target in arrows:
        packages[source].add(target)
    return packages


def test_no_import_cycle_between_the_packages():
    cycle = find_cycle(package_graph(package_arrows(import_graph())))
    assert cycle is None, "package cycle: " + " -> ".join(cycle)


def test_the_package_checks_find_a_forbidden_arrow_and_a_package_cycle():
    graph = {"profilers.timing": {"builders.models.catalog"}, "builders.models.catalog": {"sessions.documents.model"},
             "sessions.documents.model": {"profilers.stats"}, "profilers.stats": set()}
    arrows = package_arrows(graph)
    assert arrows[("profilers", "builders")] == ["profilers.timing imports builders.models.catalog"]
    assert find_cycle(package_graph(arrows)) == ["builders", "sessions", "profilers", "builders"]


# sessions/ in three rooms: the document, what is derived from it, how both read. A room imports only the rooms
# before it in this order, and every module of sessions/ lies in one.
SESSION_ROOMS = ("documents", "analyses", "reports")


def room_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if parts[0] == "sessions" and len(parts) > 2 and parts[1] in SESSION_ROOMS else None


def imports_against_the_room_order(graph: dict[str, set[str]]) -> list[str]:
    """Imports from a room of sessions/ into a room after it (documents -> analyses, analyses -> reports, ...)."""
    found = []
    for name, imported in sorted(graph.items()):
        if (room := room_of(name)) is not None:
            later = SESSION_ROOMS[SESSION_ROOMS.index(room) + 1:]
            found += [f"{name} imports {other}" for other in sorted(imported) if room_of(other) in later]
    return found


def test_the_rooms_of_sessions_import_only_the_rooms_before_them():
    assert imports_against_the_room_order(import_graph()) == []


def test_the_room_check_finds_an_import_against_the_order():
    graph = {"sessions.documents.model": {"sessions.reports.views", "sessions.documents.vocab"},
             "sessions.reports.views": {"sessions.analyses.noise", "sessions.documents.model"},
             "sessions.analyses.noise": {"sessions.reports.tables"}}
    assert imports_against_the_room_order(graph) == ["sessions.analyses.noise imports sessions.reports.tables",
                                                     "sessions.documents.model imports sessions.reports.views"]


def test_every_module_of_sessions_lies_in_a_room():
    outside = [name for name in project_modules() if name.startswith("sessions.") and room_of(name) is None
               and name.split(".")[1] not in SESSION_ROOMS]
    assert outside == []


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


POLICY_OWNERS = {"sessions/analyses/comparison.py", "sessions/analyses/noise.py",  # the baseline rule, the noise rule
                 "sessions/documents/plan.py"}  # which precisions a variant name may ask of an engine: no comparison
NOISE_LITERALS = {0.05, 1.05, 0.95, 0.1, 1.1}  # bands hand-written before the noise rule had one owner
BAND_NAME = re.compile(r"NOISE|PAYS|BAND|TOLERANCE")  # what a module constant holding one was called


def policy_literals(path: Path, root: Path = ROOT) -> list[str]:
    """Comparisons against a literal "fp16" (a baseline chosen by hand) or against a noise-band number."""
    found = []
    tree = ast.parse(path.read_text())
    for node in tree.body:  # a module constant holding a band (NOISE = 0.05, PAYS = 1.05) is a second owner too
        names = [t.id for t in getattr(node, "targets", []) if isinstance(t, ast.Name)]
        if any(BAND_NAME.search(n) for n in names) and isinstance(node.value, ast.Constant):
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
    for package in ("sessions", "inspector"):  # where figures are compared; builders build what a precision asks
        for path in sorted((ROOT / package).rglob("*.py")):
            if str(path.relative_to(ROOT)) not in POLICY_OWNERS and path.name != "tables.py":  # tables: rounding
                found += policy_literals(path)
    assert found == []


def test_the_policy_check_finds_a_hand_written_baseline_and_band(tmp_path):
    (tmp_path / "x.py").write_text('NOISE = 0.05\nif v.name == "fp16" or abs(s - 1) <= 0.05:\n    pass\n')
    assert len(policy_literals(tmp_path / "x.py", tmp_path)) == 3


# The study options: ranges and defaults are written in the spec (sessions/documents/options.py) and nowhere else.

SPEC_MODULES = ("sessions/documents/options.py", "inspector/options.py")
# A literal that is not the option's default: what documents written before the option existed mean.
EARLIER_MEANINGS = {
    ("sessions/documents/plan.py", "switch_warmup"): "plans recorded before the option discarded none",
    ("sessions/documents/migrations.py", "*"): "schema-1 documents, read with the defaults of their time",
    ("sessions/analyses/noise.py", "threads"): ("one thread where a session recorded none (a load bound, "
                                                "not the option's default)"),
}


def spec_numbers(spec) -> set[float]:
    """The numbers an option's spec owns: its bounds and every default."""
    values = {spec.low, spec.high, spec.default, *spec.command_defaults.values(), *spec.machine_defaults.values()}
    return {v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)}


def _name(node: ast.AST) -> str | None:
    return node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None


def _number(node: ast.AST) -> float | None:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _number(node.operand)
        return None if inner is None else -inner
    ok = isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool)
    return node.value if ok else None


def option_offenders(source: str, where: str) -> list[str]:
    """Places in `source` that write an option's range or default themselves: a comparison of an option's field
    with one of its bounds or defaults, `field or <default>`, a dataclass field with a literal default, or an
    argparse argument for an option's flag that does not take its type from the spec."""
    from sessions.documents.options import OPTIONS

    fields = {s.field: s for s in OPTIONS if spec_numbers(s)}
    flags = {flag for s in OPTIONS if spec_numbers(s) or s.default or s.command_defaults for flag in s.flags}
    found = []
    for node in ast.walk(ast.parse(source)):
        line = f"{where}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, (ast.Compare, ast.BoolOp)):
            sides = [node.left, *node.comparators] if isinstance(node, ast.Compare) else node.values
            numbers = {n for side in sides if (n := _number(side)) is not None}
            for field in {n for side in sides if (n := _name(side)) in fields}:
                if numbers & spec_numbers(fields[field]):
                    found.append(f"{line}: {field} against {sorted(numbers)}")
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id in fields:
            if node.value is not None and _number(node.value) is not None:
                found.append(f"{line}: {node.target.id} = {_number(node.value)}")
        elif isinstance(node, ast.Call) and _name(node.func) == "add_argument":
            named = [a.value for a in node.args if isinstance(a, ast.Constant) and a.value in flags]
            keywords = {k.arg: k.value for k in node.keywords}
            typed = isinstance(keywords.get("type"), ast.Call) and _name(keywords["type"].func) == "argument_type"
            if named and ("default" in keywords or not typed):
                found.append(f"{line}: declares {named[0]}")
    return found


def test_the_option_check_finds_ranges_and_defaults_written_outside_the_spec():
    source = '''
class Options:
    calib_count: int = 16
    rounds: int | None = None
def check(self, args):
    if self.batch > 65536 or not 0 <= self.opt_level <= 5:
        raise ValueError
    warmup = self.warmup_s or 0.05
    args.add_argument("--seed", type=int, default=0)
    args.add_argument("--batch", type=argument_type(option("batch")))
    return self.batch == 0
'''
    found = option_offenders(source, "x.py")
    assert sorted(f.split(": ", 1)[1] for f in found) == [
        "batch against [65536]", "calib_count = 16", "declares --seed", "opt_level against [0, 5]",
        "warmup_s against [0.05]"], found


def test_option_ranges_and_defaults_are_written_only_in_the_spec():
    found = []
    for path in project_modules().values():
        where = str(path.relative_to(ROOT))
        if where not in SPEC_MODULES:
            found += option_offenders(path.read_text(), where)
    allowed = [f for f in found if any(f.startswith(p) and (name == "*" or f" {name} " in f"{f} ")
                                       for p, name in EARLIER_MEANINGS)]
    assert sorted(set(found) - set(allowed)) == []


BACKEND_WORDS = ("tensorrt", "torch", "cudnn", "trtexec")
RENDERERS = ("sessions", "inspector/cli.py", "inspector/commands", "inspector/tui")


def backend_tests(source: str, where: str) -> list[str]:
    """Comparisons of something named `backend` with a backend's name: what a renderer asks the study instead."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            words = [s.value for s in ast.walk(node) if isinstance(s, ast.Constant) and s.value in BACKEND_WORDS]
            if words and any(_name(side) == "backend" for side in sides):
                found.append(f"{where}:{node.lineno}: backend against {words[0]!r}")
    return found


def test_the_backend_check_finds_a_renderer_testing_a_name():
    assert len(backend_tests('x = a if s.study.backend == "tensorrt" else b\nif backend in ("torch",): pass', "x")) == 2


def test_renderers_never_test_a_backend_name():
    found = []
    for target in RENDERERS:
        paths = [ROOT / target] if target.endswith(".py") else sorted((ROOT / target).rglob("*.py"))
        for path in paths:
            where = str(path.relative_to(ROOT))
            # the one reader of sessions written before engines named themselves
            if where != "sessions/documents/engines.py":
                found += backend_tests(path.read_text(), where)
    assert found == []


# One writer: every file a command writes goes through `sessions.documents.storage` (file_writer,
# session_writer, log_file, scratch_path). The caches under builders/ are another owner's and write through
# `write_atomically`; they are the modules named here.
ONE_WRITER = "sessions/documents/storage.py"
CACHE_WRITERS = {
    "builders/engine/plans.py",  # timing cache and plan files
    "builders/engine/twin.py",  # FP8 twin cache
    "builders/models/seeded_weights.py",  # kept seeded weights
    "builders/tensorrt/tensorrt_backend.py",  # built engines
    "builders/tensorrt/compat.py",  # TensorRT's timing cache
    "builders/tensorrt/onnx_export.py",  # exported ONNX files, atomically (`onnx --out` refuses no existing file)
}
WRITE_METHODS = {"write_text", "write_bytes", "touch", "symlink_to", "hardlink_to", "rename", "export_chrome_trace"}
SCRATCH = "scratch_path"  # `with scratch_path(...) as p`: a library may write p, a private temporary file
WRITE_FUNCTIONS = {
    ("os", "replace"), ("os", "rename"), ("os", "link"), ("os", "symlink"), ("os", "mkfifo"), ("os", "mknod"),
    ("os", "truncate"), ("shutil", "copy"), ("shutil", "copy2"), ("shutil", "copyfile"), ("shutil", "copytree"),
    ("shutil", "move"), ("tempfile", "mkstemp"), ("tempfile", "NamedTemporaryFile"), ("tempfile", "mktemp"),
    ("torch", "save"), ("np", "save"), ("numpy", "save"), ("onnx", "save"), ("onnx", "export"),
}
WRITE_NAMES = {"save_file", "write_atomically", "mkstemp", "NamedTemporaryFile"}
WRITE_FLAGS = {"O_CREAT", "O_WRONLY", "O_RDWR", "O_APPEND", "O_TRUNC"}


def _call_name(func: ast.expr) -> tuple[str | None, str | None]:
    """(owner, name) of a call: `os.replace` -> ("os", "replace"), `path.open` -> ("path", "open"),
    `open` -> (None, "open")."""
    if isinstance(func, ast.Name):
        return None, func.id
    if isinstance(func, ast.Attribute):
        value = func.value
        owner = value.id if isinstance(value, ast.Name) else value.attr if isinstance(value, ast.Attribute) else "?"
        return owner, func.attr
    return None, None


def _opens_for_writing(node: ast.Call, name: str | None) -> bool:
    """`open(p, "w")`, `path.open("ab")`, `os.fdopen(fd, "wb")`, `os.open(p, os.O_CREAT | ...)`."""
    if name == "os.open":
        return any(isinstance(n, ast.Attribute) and n.attr in WRITE_FLAGS
                   for arg in node.args[1:2] for n in ast.walk(arg))
    if name not in ("open", "fdopen", "os.fdopen") and not (name or "").endswith(".open"):
        return False
    if name == "open" and any(k.arg == "closefd" for k in node.keywords):
        return False  # closefd=False takes a descriptor (a terminal, a pipe), never a file name
    position = 0 if name.endswith(".open") and name != "os.open" and not name.startswith("io.") else 1
    modes = [k.value for k in node.keywords if k.arg == "mode"] + node.args[position:position + 1]
    return any(isinstance(m, ast.Constant) and isinstance(m.value, str) and set(m.value) & set("wax+") for m in modes)


def file_writes(source: str, where: str) -> list[str]:
    """Every place in `source` that creates, writes, renames or replaces a file by itself."""
    tree = ast.parse(source)
    scratch = {item.optional_vars.id for node in ast.walk(tree) if isinstance(node, ast.With) for item in node.items
               if isinstance(item.context_expr, ast.Call) and _call_name(item.context_expr.func)[1] == SCRATCH
               and isinstance(item.optional_vars, ast.Name)}
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or _into_scratch(node, scratch):
            continue
        owner, attr = _call_name(node.func)
        name = f"{owner}.{attr}" if owner else attr
        if (owner, attr) in WRITE_FUNCTIONS or attr in WRITE_NAMES or (owner and attr in WRITE_METHODS) \
                or (owner, attr) == ("onnx", "export") or _opens_for_writing(node, name):
            found.append(f"{where}:{node.lineno}: {name}")
    return found


def _into_scratch(node: ast.Call, scratch: set[str]) -> bool:
    """A call whose first argument is (or wraps) a scratch path's name: the library writes a private temporary file."""
    return bool(node.args) and any(isinstance(n, ast.Name) and n.id in scratch for n in ast.walk(node.args[0]))


def test_the_writer_check_finds_every_way_to_write_a_file():
    source = "\n".join([  # noqa: FLY002  (one case a line)
        "path.write_bytes(b'x')", "p.write_text('x')", "open(p, 'w')", "open(p, mode='ab')", "path.open('x')",
        "os.fdopen(fd, 'wb')", "os.open(p, os.O_CREAT | os.O_WRONLY)", "os.replace(a, b)", "shutil.copy2(a, b)",
        "tempfile.mkstemp()", "torch.save(m, p)", "save_file(t, p)", "prof.export_chrome_trace(p)",
        "write_atomically(p, b'x')", "torch.onnx.export(m, x, p)",
        # reads and folders are not writes
        "open(p)", "open(p, 'rb')", "path.open('rb')", "os.open(p, os.O_RDONLY)", "p.mkdir()", "p.read_bytes()",
        "open(fd, 'w', closefd=False)", "with scratch_path('.json') as kept:\n    prof.export_chrome_trace(str(kept))",
    ])
    assert [int(line.split(":")[1]) for line in file_writes(source, "x")] == list(range(1, 16))


def test_every_file_is_written_through_the_one_writer():
    """No module but `sessions.documents.storage` (and the caches of builders/) writes a file by itself."""
    found = []
    for path in sorted(p for package in PACKAGES for p in (ROOT / package).rglob("*.py")):
        where = str(path.relative_to(ROOT))
        if where != ONE_WRITER and where not in CACHE_WRITERS:
            found += file_writes(path.read_text(), where)
    assert found == []
    assert all((ROOT / module).is_file() for module in CACHE_WRITERS)  # a moved cache module is named again


FP8_MODULE = "builders/fp8/format.py"


def fp8_offenders(source: str, where: str) -> list[str]:
    """FP8 facts written outside their owner: the e4m3 maximum (448), the e4m3 dtype, the FP8 compute capability."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Constant) and type(node.value) in (int, float) and node.value == 448:
            found.append(f"{where}:{node.lineno}: 448")
        elif isinstance(node, ast.Attribute) and node.attr == "float8_e4m3fn":
            found.append(f"{where}:{node.lineno}: float8_e4m3fn")
        elif isinstance(node, ast.Tuple) and [getattr(e, "value", None) for e in node.elts] == [8, 9]:
            found.append(f"{where}:{node.lineno}: (8, 9)")
    return found


def test_the_fp8_check_finds_each_fact():
    source = "import torch\nx = y.clamp(-448.0, 448)\nz = torch.float8_e4m3fn\nok = cap >= (8, 9)\nfine = (8, 6)\n"
    assert (sorted(f.split(": ", 1)[1] for f in fp8_offenders(source, "x.py"))
            == ["(8, 9)", "448", "448", "float8_e4m3fn"])


def test_fp8_facts_are_written_only_in_the_fp8_module():
    """The format, its maximum and the capability that runs it: builders.fp8.format owns them (the capability is
    sessions.analyses.lowering's FP8_TENSOR_CORES, which reads kernels' architectures and sits below builders)."""
    found = []
    for path in project_modules().values():
        where = str(path.relative_to(ROOT))
        if where != FP8_MODULE:
            found += [f for f in fp8_offenders(path.read_text(), where)
                      if not (where == "sessions/analyses/lowering.py" and f.endswith("(8, 9)"))]
    assert found == []


# One reader: every file the tool reads back passes `sessions.documents.input_files` (a regular file under a
# size cap, never a FIFO or a device; `read_regular_file`, `read_file_head`, `read_toml_file`) or, for a cache,
# `builders.cache_files` (the same, parsed inside `miss_on_failure`). No other module opens or loads a file by itself,
# but those named here, each for the reason given.
ONE_READER = "sessions/documents/input_files.py"
OTHER_READERS = {
    "sessions/documents/storage.py": ("the one writer: lock files, temporary files and folders it opens to write "
                                      "and fsync"),
    "sessions/documents/state.py": "opens a session's lock file to probe its flock; reads no byte",
    "inspector/tui/output.py": "descriptors of the terminal and of a pipe of its own, never a file by name",
    "builders/models/seeded_weights.py": "a cache writer: opens the file safetensors' save_file wrote, to fsync it",
    "builders/engine/cudnn_library.py": "/proc/self/maps, to find the libraries this process loaded",
    "profilers/environment.py": "/proc/cpuinfo, to name the CPU",
    "inspector/cpu_defaults.py": "/proc/self/stat and /proc/uptime, the process's CPU and wall seconds so far",
    "profilers/kernel_trace.py": "a CUDA header of the installed CUPTI package (at most 4 MiB), for callback ids",
    "profilers/images.py": "images the user names, opened by PIL under its pixel limit",
    "builders/recipes/fp8.py": "the recipes TOML shipped inside the package",
    "sessions/analyses/groups.py": "the built-in rules TOML shipped inside the package",
    "builders/models/catalog.py": "a model's ONNX file or checkpoint that the user names, read by the library that "
                                  "parses it (onnx, safetensors, torch with weights_only); config.json through "
                                  "input_files",
    "builders/tensorrt/onnx_files.py": "the ONNX files it exported, read back by onnx to count their Q/DQ nodes",
    "builders/tensorrt/onnx_export.py": "hashes an ONNX file (exported or the user's) for the engine cache's key",
    "builders/tensorrt/tensorrt_backend.py": "the ONNX file it builds from, read by onnx (its cached engine through "
                                             "builders.cache_files)",
    "builders/tensorrt/compat.py": "the ONNX file TensorRT's parser reads (its timing cache through "
                                   "builders.cache_files)",
}
OPENS = {"open", "fdopen", "safe_open", "load_file", "parse_from_file", "fromfile", "memmap", "loadtxt"}
READ_METHODS = {"read_text", "read_bytes"}
LOADERS = {"torch", "np", "numpy", "onnx", "json", "pickle", "tomllib", "yaml"}  # their `load` takes a file


def _module_names(tree: ast.Module) -> set[str]:
    """Names the file binds to a project module (`from profilers.trt_import import documents`): their functions are
    the project's own, not a path's methods."""
    modules = project_modules()
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names |= {alias.asname or alias.name for alias in node.names if f"{node.module}.{alias.name}" in modules}
        elif isinstance(node, ast.Import):
            names |= {alias.asname or alias.name for alias in node.names if alias.name in modules}
    return names


def file_reads(source: str, where: str) -> list[str]:
    """Every place in `source` that opens or reads a file by itself: `open(...)`, `os.open`, `os.fdopen`,
    `path.open()`, `path.read_text()`, `path.read_bytes()`, `torch.load` and the other loaders, `load_file`,
    `safe_open`. A project module's own functions (`documents.read_text`) are not reads."""
    tree = ast.parse(source)
    project = _module_names(tree)
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        owner, attr = _call_name(node.func)
        if owner in project:
            continue
        if attr in OPENS or (owner and attr in READ_METHODS) or (owner in LOADERS and attr in ("load", "load_model")):
            found.append(f"{where}:{node.lineno}: {f'{owner}.{attr}' if owner else attr}")
    return found


def test_the_reader_check_finds_every_way_to_read_a_file():
    source = "\n".join([  # noqa: FLY002  (one case a line)
        "open(p)", "open(fd, 'rb')", "os.open(p, os.O_RDONLY)", "os.fdopen(fd)", "path.open('rb')", "p.read_text()",
        "Path(p).read_bytes()", "torch.load(p)", "np.load(p)", "onnx.load(str(p))", "json.load(f)", "load_file(p)",
        "safe_open(p, 'pt')", "parser.parse_from_file(p)", "Image.open(p)",
        # the project's readers, parsing bytes, and listing a folder are not
        "from profilers.trt_import import documents\ndocuments.read_text(p, 'log')", "read_regular_file(p, 'x')",
        "json.loads(data)", "orjson.loads(data)", "load(data)", "p.iterdir()", "p.stat()", "p.is_file()",
    ])
    assert [int(line.split(":")[1]) for line in file_reads(source, "x")] == list(range(1, 16))


def test_every_file_is_read_through_the_one_reader():
    """No module but `sessions.documents.input_files` (and those OTHER_READERS names, each with its reason) opens or
    loads a file by itself: the importers, the caches (`builders.cache_files`) and the session loader read through
    it."""
    found = []
    for path in sorted(p for package in PACKAGES for p in (ROOT / package).rglob("*.py")):
        where = str(path.relative_to(ROOT))
        if where != ONE_READER and where not in OTHER_READERS:
            found += file_reads(path.read_text(), where)
    assert found == []
    readers = {where for path in sorted(p for package in PACKAGES for p in (ROOT / package).rglob("*.py"))
               if file_reads(path.read_text(), where := str(path.relative_to(ROOT)))}
    assert readers == {ONE_READER, *OTHER_READERS}  # every module named reads a file still: none named for nothing


# The device a study runs on is one object (profilers/device.py): code that builds, runs or measures asks it (`gpu`,
# `synchronize`, `words`, `timer`) and never compares a device's name. Sessions keep the name they recorded, so
# `sessions/` reads it as data. The modules named here test a tensor's own device, not the study's.
DEVICE_OBJECT = "profilers/device.py"
DEVICE_NAMES = {"cuda", "cpu"}
DEVICE_TESTS_ELSEWHERE = {
    "builders/engine/twin.py",  # a tensor's own device (torch's `device.type`), not the study's
    "builders/models/seeded_weights.py",  # likewise
}


def _holds_device_name(node: ast.AST) -> bool:
    if isinstance(node, ast.Constant):
        return node.value in DEVICE_NAMES
    return isinstance(node, (ast.Tuple, ast.List, ast.Set)) and any(_holds_device_name(e) for e in node.elts)


def device_tests(source: str, where: str) -> list[str]:
    """Comparisons with a device's name: `device == "cuda"`, `"cpu" != d`, `d in ("cuda", "cpu")`, `s == {"cuda"}`."""
    return [f"{where}:{node.lineno}: {ast.unparse(node)}" for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Compare) and any(_holds_device_name(side)
                                                     for side in (node.left, *node.comparators))]


def test_the_device_check_finds_each_way_to_test_a_name():
    source = ('a = device == "cuda"\nb = "cpu" != plan.device\nc = d in ("cuda", "cpu")\ne = s == {"cuda"}\n'
              'f = study_device(d).gpu\ng = "cuda" if gpu else "cpu"\n')
    assert sorted(line.split(": ", 1)[0] for line in device_tests(source, "x")) == ["x:1", "x:2", "x:3", "x:4"]


def test_no_device_name_is_tested_outside_the_device_object():
    found = []
    for package in ("inspector", "builders", "profilers"):
        for path in sorted((ROOT / package).rglob("*.py")):
            where = str(path.relative_to(ROOT))
            if where != DEVICE_OBJECT and where not in DEVICE_TESTS_ELSEWHERE:
                found += device_tests(path.read_text(), where)
    assert found == []


# Backends own their policy (default variants, CPU sizing, the precisions a variant asks of them under their
# name): outside the backends and their registry, no code compares a backend with a name, or writes a variant that
# names a backend (`cudnn-fp16`). sessions/documents/engines.py reads sessions written before engines named
# themselves. The names are the registry's, found by file name as the CLI finds them.
BACKEND_OWNERS = ("builders/backend.py", "sessions/documents/engines.py")


def registered_backends() -> list[str]:
    return sorted(path.stem.removesuffix("_backend") for path in (ROOT / "builders").glob("*/*_backend.py"))


def backend_policy(source: str, where: str, names: list[str]) -> list[str]:
    """Comparisons of a backend (anything called `backend`, or its `name`) with a backend's name, and strings that
    name a variant after a backend (`cudnn-fp16`, `compile-bf16`); docstrings may name them as examples."""
    prefixed = re.compile(rf"\b({'|'.join(map(re.escape, names))})-(?:fp32|fp16|bf16|fp8)\b")
    tree = ast.parse(source)
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                  and node.body and isinstance(node.body[0], ast.Expr)}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            named = any(isinstance(s, ast.Constant) and s.value in names for side in sides for s in ast.walk(side))
            if named and any(_name(part) == "backend" for side in sides for part in ast.walk(side)):
                found.append(f"{where}:{node.lineno}: {ast.unparse(node)}")
        elif (isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
              and prefixed.search(node.value)):
            found.append(f"{where}:{node.lineno}: {node.value[:60]!r}")
    return found


def test_the_backend_policy_check_finds_a_name_test_and_a_named_variant():
    source = ('if backend == "torch" and device == "cpu": pass\nx = plan.backend in ("tensorrt",)\n'
              'DEFAULT = "fp32,fp16,cudnn-fp16,cudnn-fp8"\ny = cls.sizes_cpu_plan\nz = "torch-profiler"\n'
              'if backend.name == "compile": pass\nif request.backend != "auto": pass\n')
    assert sorted(line.split(": ", 1)[0] for line in backend_policy(source, "x", registered_backends())) == [
        "x:1", "x:2", "x:3", "x:6"]


def test_no_backend_policy_outside_the_backends_and_their_registry():
    names, found = registered_backends(), []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            where = str(path.relative_to(ROOT))
            if not path.stem.endswith("_backend") and where not in BACKEND_OWNERS:
                found += backend_policy(path.read_text(), where, names)
    assert found == []
