"""A verdict names the group that explains a speed-up only where both sides' time lies in layers of one group: checked
on H200 sessions against shares counted from their raw JSON, and on hand-made variants."""

from __future__ import annotations

import json

import pytest

from sessions.analyses.groups import load_rules
from sessions.analyses.verdict import verdicts
from sessions.documents import storage
from sessions.documents.model import LatencyStats, Layer, Session, Variant
from tests.conftest import ROOT

RESULTS = ROOT / "benchmarks/results/h200"
SESSIONS = [RESULTS / "engine-vs-compile/resnet50-b1-vs-compile.json",
            RESULTS / "matmul-tactic/segformer/segformer-b0-512-b32-vs-compile.json"]


def raw_shares(path) -> dict[str, float]:
    """Per variant, from the raw JSON: the share of its kernel time owned by a layer that lists no layers it covers."""
    shares = {}
    for variant in json.loads(path.read_text())["variants"]:
        regions = {i for i, layer in enumerate(variant["layers"]) if "covers" in (layer.get("attrs") or {})}
        kernels = variant["kernels"]
        total = sum(kernels["duration_ns"])
        held = sum(ns for ns, owner in zip(kernels["duration_ns"], kernels["layer"], strict=True)
                   if owner >= 0 and owner not in regions)
        shares[variant["name"]] = held / total
    return shares


@pytest.mark.parametrize("path", SESSIONS, ids=lambda p: p.name)
def test_a_group_explains_a_verdict_only_where_both_sides_time_lies_in_groups(path):
    shares = raw_shares(path)
    found = verdicts(storage.load(path), load_rules())
    assert found
    for verdict in found:
        text = verdict.text
        grouped = shares[verdict.variant] > 0.5 and shares[verdict.baseline] > 0.5
        assert (verdict.group is not None) == grouped, text
        if grouped:
            assert " saves " in text or " adds " in text
            continue
        assert " saves " not in text and " adds " not in text and "no group named" in text
        for name in (verdict.variant, verdict.baseline):
            if shares[name] <= 0.5:
                assert f"{shares[name] * 100:.0f} % of {name}'s kernel time lies in layers of one group" in text


def test_the_reviewed_sessions_read_as_they_should():
    """compile-fp16 keeps every kernel outside layers and SegFormer's cudnn-fp16 runs most of its time in Inductor's
    regions: neither is explained by a group; resnet50's cudnn-fp16, all of it in layers, still is."""
    resnet = {v.variant: v.text for v in verdicts(storage.load(SESSIONS[0]), load_rules())}
    segformer = {v.variant: v.text for v in verdicts(storage.load(SESSIONS[1]), load_rules())}
    assert raw_shares(SESSIONS[0])["compile-fp16"] == 0.0
    assert resnet["compile-fp16"].endswith("(100 % outside every layer)")
    assert "normalization saves" in resnet["cudnn-fp16"]
    assert "normalization" not in segformer["cudnn-fp16"]
    assert "in regions fused across layers" in segformer["cudnn-fp16"]


def _variant(name: str, median_ms: float, layers: list[Layer]) -> Variant:
    latency = LatencyStats(samples_ms=[median_ms], min_ms=median_ms, median_ms=median_ms, mean_ms=median_ms,
                           p90_ms=median_ms, p99_ms=median_ms, max_ms=median_ms, std_ms=0.0, cov=0.0)
    return Variant(name=name, backend="torch", precision="fp16", device="cuda", latency=latency, layers=layers)


def test_layer_times_alone_decide_too_a_half_in_regions_is_not_more_than_half(base_session):
    """Without a kernel table the layer times say where the time lies; exactly half in a region names no group."""
    conv = Layer(name="conv", kind="Conv2d", op="conv", time_ms=1.0, kernel_shape=[3, 3], groups=1)
    region = Layer(name="a + b", kind="Ops fused by Inductor (fp16)", op="elementwise", time_ms=1.0,
                   attrs={"covers": [{"name": "a", "kind": "LayerNorm", "tactic": None}]})
    base_session.variants = [_variant("fp16", 4.0, [Layer(name="conv", kind="Conv2d", op="conv", time_ms=4.0,
                                                          kernel_shape=[3, 3], groups=1)]),
                             _variant("cudnn-fp16", 2.0, [conv, region])]
    (verdict,) = verdicts(base_session, load_rules())
    assert verdict.group is None and "50 % of cudnn-fp16's kernel time lies in layers of one group" in verdict.text
    region.time_ms = 0.9
    (verdict,) = verdicts(base_session, load_rules())
    assert verdict.group is not None and "no group named" not in verdict.text


@pytest.fixture
def base_session() -> Session:
    held = storage.load(SESSIONS[0])
    return Session(study=held.study, environment=held.environment, method=held.method)
