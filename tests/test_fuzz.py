"""Property-based fuzzing of every reader of outside data: whatever the bytes, one InputError or a result.

Quick in CI; `TRT_INSPECT_FUZZ_EXAMPLES=10000 python -m pytest tests/test_fuzz.py` is the long run.
"""

import os

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from profilers.trt_files import pair_profile, parse_layer_info, parse_profile, parse_times
from sessions import storage
from sessions.errors import InputError
from tests.conftest import H200

EXAMPLES = int(os.environ.get("TRT_INSPECT_FUZZ_EXAMPLES", "150"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

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
REAL = orjson.loads((H200 / "senet154-h200.json").read_bytes())


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
    ["study"], ["study", "batch"], ["environment", "gpu"], ["method", "rounds"], ["variants"], ["variants", 0, "latency"],
    ["variants", 0, "kernels", "name"], ["variants", 1, "layers", 3], ["variants", 2, "trace", "calls"], ["schema_version"],
]), json_values)
def test_session_loader_on_a_real_session_with_one_field_replaced(path, value):
    doc = mutate(orjson.loads(orjson.dumps(REAL)), path, value)
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
