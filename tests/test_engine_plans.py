"""Tactic selection of the cuDNN engine with a stand-in for cuDNN's plan list, the JSON timing cache, and the
engine's H200 sessions: no layer of an FP8 recipe ran in fp16 without a recorded reason."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from builders.engine_plans import PLANS_PER_OPT_LEVEL, TimingCache, choose_plan
from sessions.storage import decode, read_regular_file

RESULTS = Path(__file__).resolve().parents[1] / "benchmarks" / "results" / "h200"


class StandInGraph:
    """A plan list as cuDNN's frontend presents it: names by index; some plans refuse to build."""

    def __init__(self, names: list[str], refuse: set[int] = frozenset()) -> None:  # type: ignore[assignment]
        self.names, self.refuse = names, refuse
        self.built: list[int] = []

    def get_execution_plan_count(self) -> int:
        return len(self.names)

    def get_plan_name_at_index(self, index: int) -> str:
        return self.names[index]

    def build_plan_at_index(self, index: int) -> None:
        if index in self.refuse:
            raise RuntimeError(f"plan {index} is not supported")
        self.built.append(index)


def timer(graph: StandInGraph, times: dict[int, float]):
    def time_plan(index: int) -> float:
        graph.build_plan_at_index(index)
        return times[index]

    return time_plan


def test_the_fastest_of_the_plans_tried_wins_not_the_first():
    graph = StandInGraph(["eng4_k24=36", "eng4_k24=29", "eng2", "eng7"])
    choice = choose_plan(graph, "sig", 3, timer(graph, {0: 48.9, 1: 29.9, 2: 35.0, 3: 1.0}), None)
    assert (choice.index, choice.name, choice.tried, choice.offered, choice.time_us) == (1, "eng4_k24=29", 3, 4, 29.9)
    assert graph.built[-1] == 1  # the winner is built last, so execute() runs it


def test_plans_that_do_not_build_are_reasons_and_none_building_is_an_error():
    graph = StandInGraph(["a", "b", "c"], refuse={0})
    choice = choose_plan(graph, "sig", 8, timer(graph, {1: 5.0, 2: 4.0}), None)
    assert choice.index == 2 and choice.tried == 3 and choice.failures == ["[0] plan 0 is not supported"]
    with pytest.raises(RuntimeError, match="none of 2 of 2 plans built"):
        choose_plan(StandInGraph(["a", "b"], refuse={0, 1}), "sig", 8, lambda i: 1.0 / 0, None)


def test_opt_levels_try_more_plans():
    counts = [PLANS_PER_OPT_LEVEL[level] for level in range(6)]
    assert counts == sorted(counts) and counts[0] == 1 and counts[-1] >= 40


def test_the_timing_cache_is_json_keyed_like_tensorrts_and_a_second_run_builds_only_the_winner(tmp_path):
    header = {"gpu": "NVIDIA H200", "compute_capability": "90", "versions": "cudnn91900-fe1.32.0"}
    path = tmp_path / "cache.json"
    cache = TimingCache(path, header)
    graph = StandInGraph(["p0", "p1", "p2"])
    choose_plan(graph, "conv fp8 in=1x256x56x56", 3, timer(graph, {0: 3.0, 1: 2.0, 2: 9.0}), cache)
    cache.save()
    stored = json.loads(path.read_text())
    assert stored["key"] == header and stored["plans"]["conv fp8 in=1x256x56x56"]["name"] == "p1"

    again = StandInGraph(["p0", "p1", "p2"])
    choice = choose_plan(again, "conv fp8 in=1x256x56x56", 3, lambda i: pytest.fail("timed again"),
                         TimingCache(path, header))
    assert (choice.index, choice.cached, choice.tried, again.built) == (1, True, 1, [1])

    other_gpu = TimingCache(path, {**header, "gpu": "NVIDIA H100"})
    assert other_gpu.get("conv fp8 in=1x256x56x56") is None
    renamed = StandInGraph(["p0", "q1", "p2"])  # cuDNN lists other plans now: time them again
    choice = choose_plan(renamed, "conv fp8 in=1x256x56x56", 3, timer(renamed, {0: 1.0, 1: 2.0, 2: 3.0}),
                         TimingCache(path, header))
    assert (choice.index, choice.cached) == (0, False)


def test_a_damaged_cache_file_is_ignored(tmp_path):
    path = tmp_path / "cache.json"
    path.write_text("{not json")
    assert TimingCache(path, {"gpu": "x"}).entries == {}


ENGINE_SESSIONS = sorted(RESULTS.glob("*-engine*.json"))


@pytest.mark.parametrize("path", ENGINE_SESSIONS, ids=[p.stem for p in ENGINE_SESSIONS])
def test_no_recipe_layer_of_the_h200_engine_ran_fp16_without_a_reason(path):
    session = decode(read_regular_file(path, "session"), str(path))
    checked = 0
    for variant in session.variants:
        if variant.backend != "cudnn" or variant.precision != "fp8" or variant.status != "ok":
            continue
        assert variant.recipe is not None and not variant.simulated
        layers = {layer.name: layer for layer in variant.layers}
        hidden = [n for n in variant.notes if "were not lowered" in n]
        for name in variant.recipe.quantized:
            if name not in layers:
                assert hidden, f"{variant.name}: {name} is neither a layer nor named as not lowered"
                continue
            layer = layers[name]
            assert layer.precision == "fp8" or layer.attrs.get("fallback"), f"{variant.name}: {name} silently fp16"
            assert layer.attrs.get("asked") == "fp8"
            checked += 1
        for layer in variant.layers:
            if layer.precision == "fp8" and layer.op == "conv":
                assert layer.tactic and 1 <= layer.attrs["plans_tried"] <= PLANS_PER_OPT_LEVEL[session.study.plan.opt_level]
    assert checked or "segformer" in path.name or "vit" in path.name
