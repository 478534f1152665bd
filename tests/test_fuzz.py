"""Property-based fuzzing of every reader of outside data: whatever the bytes, one InputError or a result.

Quick in CI; `TRT_INSPECT_FUZZ_EXAMPLES=10000 python -m pytest tests/test_fuzz.py` is the long run.
"""

import math
import os
import tomllib

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from profilers.trt_import.layer_info import parse_layer_info
from profilers.trt_import.profile import pair_profile, parse_profile
from profilers.trt_import.times import parse_times
from sessions.documents import storage
from sessions.documents.errors import InputError
from tests.conftest import DATA, H200, ROOT

EXAMPLES = int(os.environ.get("TRT_INSPECT_FUZZ_EXAMPLES", "150"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=6) | st.dictionaries(st.text(max_size=12), children, max_size=6),
    max_leaves=30,
)
layer_like = st.fixed_dictionaries(
    {"Name": st.text(max_size=30) | st.integers()},
    optional={
        "LayerType": st.text(max_size=10), "Groups": json_values, "Kernel": json_values, "Outputs": json_values,
        "Inputs": json_values, "Metadata": json_values, "Origin": json_values, "TacticName": json_values,
    },
)
layer_docs = st.one_of(
    json_values,
    st.fixed_dictionaries({"Layers": st.lists(st.text(max_size=20) | layer_like, max_size=8)},
                          optional={"Bindings": json_values, "I/O Tensors": json_values}),
)
profile_docs = st.one_of(
    json_values,
    st.lists(st.fixed_dictionaries({"name": st.text(max_size=10) | st.integers()},
                                   optional={"timeMs": json_values, "averageMs": json_values, "medianMs": json_values,
                                             "percentage": json_values, "count": json_values}), max_size=8),
)


def mutate(doc, path: list, value):
    target = doc
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return doc


@FUZZ
@given(st.binary(max_size=300))
def test_session_loader_on_random_bytes(data):
    try:
        storage.decode(data, "fuzz")
    except InputError:
        pass


@FUZZ
@given(json_values)
def test_session_loader_on_random_json(doc):
    try:
        storage.decode(orjson.dumps(doc), "fuzz")
    except InputError:
        pass


@FUZZ
@given(st.sampled_from([
    ["study"], ["study", "batch"], ["environment", "gpu"], ["method", "rounds"], ["variants"],
    ["variants", 0, "latency"], ["variants", 0, "kernels", "name"], ["variants", 1, "layers", 3],
    ["variants", 2, "trace", "calls"], ["schema_version"],
]), json_values)
def test_session_loader_on_a_real_session_with_one_field_replaced(path, value):
    doc = mutate(orjson.loads(orjson.dumps(SESSION_SEEDS["schema 1"])), path, value)  # a real session, cut small
    try:
        storage.decode(orjson.dumps(doc), "fuzz")
    except InputError:
        pass


@FUZZ
@given(layer_docs, profile_docs)
def test_trt_readers_on_generated_files(layers_doc, profile_doc):
    try:
        info = parse_layer_info(layers_doc, "layers")
    except InputError:
        return
    try:
        pair_profile(info.layers, parse_profile(profile_doc, "profile"), "profile")
    except InputError:
        pass


@FUZZ
@given(json_values)
def test_times_reader_on_generated_files(doc):
    try:
        parse_times(doc, "times")
    except InputError:
        pass


# --- element-level type corruption: one element of one column, or one nested field, replaced by a wrong-typed value ---

SEEDS = DATA / "fuzz"
EDGE_NUMBERS = [-1, 0, 2**62, -(2**63), 1e308, -1e308, 0.5, -0.0]
WRONG = [None, True, False, 0, -1, 7, 2**63 - 1, 1.5, 1e308, "", "x", "\r\n# heading", "<script>", [], [1],
         ["a", 2], {}, {"a": 1}]


def wrong_typed(original, null: bool = True):
    """Values of another JSON type than `original` (bool, int and float count as different), and edge numbers."""
    kind = type(original)
    others = [v for v in WRONG if type(v) is not kind and (null or v is not None)]
    if kind in (int, float) and not isinstance(original, bool):
        others += [v for v in EDGE_NUMBERS if v != original]
    return st.sampled_from(others)


def element_paths(doc, path=()):
    """Every element of every list and every field of every object, nested ones included."""
    items = doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else ()
    for key, value in items:
        yield (*path, key)
        yield from element_paths(value, (*path, key))


def corrupted(doc, data, null: bool = True):
    """A deep copy of `doc` with one drawn element replaced by a drawn wrong-typed value; and a description."""
    paths = list(element_paths(doc))
    path = data.draw(st.sampled_from(paths), label="path")
    copy = orjson.loads(orjson.dumps(doc))
    target = copy
    for key in path[:-1]:
        target = target[key]
    value = data.draw(wrong_typed(target[path[-1]], null), label="value")
    target[path[-1]] = value
    return copy


def small_session(source, kernels: int = 8, layers: int = 6, samples: int = 6):
    """A real session cut to a few layers, kernels and samples per variant, so that every element can be drawn."""
    doc = orjson.loads((H200 / source).read_bytes())
    for variant in doc["variants"]:
        variant["layers"] = variant["layers"][:layers]
        table = variant.get("kernels")
        if table:
            keep = [i for i, layer in enumerate(table["layer"]) if layer < layers][:kernels]
            for column in ("name", "layer", "call", "start_ns", "duration_ns", "stream", "grid", "block"):
                table[column] = [table[column][i] for i in keep]
        if variant.get("latency"):
            variant["latency"]["samples_ms"] = variant["latency"]["samples_ms"][:samples]
    doc["variants"] = doc["variants"][:3]
    return doc


SESSION_SEEDS = {"schema 2": small_session("senet154-arch.json"), "schema 1": small_session("senet154-h200.json")}
SESSION_SEEDS["schema 2"]["environment"]["during_timing"] = {
    "source": "NVML", "samples": [{"t_s": 0.0, "sm_clock_mhz": 1980, "temperature_c": 40, "clock_event_reasons": []}]}
SESSION_SEEDS["schema 2"]["environment"]["torch"] = {"cudnn_benchmark": False, "cudnn_version": 92400}


def every_view(session) -> None:
    """What `show`, `groups`, `export` and `diff` do with a loaded session."""
    from sessions.analyses.diff import diff_sessions
    from sessions.analyses.groups import load_rules
    from sessions.analyses.summary import summary_document
    from sessions.reports import export
    from sessions.reports.diff_report import diff_document, diff_text
    from sessions.reports.group_report import group_document, group_text

    rules = load_rules()
    summary_document(session, "s.json")
    for by in ("role", "stage", "kernel"):
        group_document(session, by, rules)
        group_text(session, by, rules)
    export.export_markdown(session, rules, None, "s.json")
    export.export_csv(session)
    diff = diff_sessions(session, session, rules, 0.05, "a", "b")
    diff_document(diff)
    diff_text(diff, markdown=True)


@FUZZ
@given(st.sampled_from(sorted(SESSION_SEEDS)), st.data())
def test_session_readers_on_one_wrong_typed_element(seed, data):
    """Loading refuses the file with one line, or every view works on what loaded, and it saves and loads again."""
    doc = corrupted(SESSION_SEEDS[seed], data)
    try:
        session = storage.decode(orjson.dumps(doc), "fuzz")
    except InputError:
        return
    every_view(session)
    storage.decode(storage.encode(session), "round trip")


def trt_seed(name: str):
    return orjson.loads((SEEDS / name).read_bytes())


TRT_SEEDS = sorted(p.name.removesuffix(".layers.json") for p in SEEDS.glob("*.layers.json"))


@FUZZ
@given(st.sampled_from(TRT_SEEDS), st.sampled_from(["layers", "profile", "times"]), st.data())
def test_trtexec_import_on_one_wrong_typed_element(tmp_path_factory, seed, which, data):
    """`import --layers --profile --times --out`: exit 2 with one line, or a session that loads."""
    from inspector.cli import main

    files = {"layers": f"{seed}.layers.json", "profile": f"{seed}.profile.json", "times": "trt10.times.json"}
    files = {k: v for k, v in files.items() if (SEEDS / v).exists()}
    if which not in files:
        which = "layers"
    folder = tmp_path_factory.mktemp("import")
    argv = ["import"]
    for kind, name in files.items():
        doc = trt_seed(name)
        (folder / name).write_bytes(orjson.dumps(corrupted(doc, data) if kind == which else doc))
        argv += [f"--{kind}", str(folder / name)]
    code = main([*argv, "--out", str(folder / "s.json")])  # anything but an InspectError escapes and fails
    assert code in (0, 2), code
    if code == 0:
        storage.load(folder / "s.json")


def toml_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return "nan" if math.isnan(value) else repr(value)  # TOML writes inf and nan as JSON cannot
    if isinstance(value, str):
        return orjson.dumps(value).decode()
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    return "{" + ", ".join(f"{orjson.dumps(k).decode()} = {toml_value(v)}" for k, v in value.items()) + "}"


def toml_text(doc: dict) -> str:
    """TOML for a rules document (top-level tables and arrays of tables); TOML has no null."""
    lines = []
    for key, value in doc.items():
        if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            for table in value:
                lines.append(f"[[{key}]]")
                lines += [f"{k} = {toml_value(v)}" for k, v in table.items()]
        elif isinstance(value, dict):
            lines.append(f"[{key}]")
            lines += [f"{k} = {toml_value(v)}" for k, v in value.items()]
        else:
            lines.insert(0, f"{key} = {toml_value(value)}")
    return "\n".join(lines) + "\n"


BUILTIN_RULES = tomllib.loads((ROOT / "sessions" / "analyses" / "group_rules.toml").read_text())
USER_RULES = {"roles": BUILTIN_RULES["roles"][:4], "kernel_classes": BUILTIN_RULES["kernel_classes"][:3],
              "stages": BUILTIN_RULES.get("stages", {"pattern": "^(layer\\d+)"})}


@FUZZ
@given(st.data())
def test_groups_rules_file_with_one_wrong_typed_element(tmp_path_factory, data):
    """--groups RULES.toml: one InputError line, or rules that group a real session by role, stage and kernel."""
    from sessions.analyses.groups import load_rules
    from sessions.reports.group_report import group_document

    path = tmp_path_factory.mktemp("rules") / "rules.toml"
    path.write_text(toml_text(corrupted(USER_RULES, data, null=False)))
    try:
        rules = load_rules(path)
    except InputError:
        return
    session = storage.decode(orjson.dumps(SESSION_SEEDS["schema 2"]), "seed")
    for by in ("role", "stage", "kernel"):
        group_document(session, by, rules)
