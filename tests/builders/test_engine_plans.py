"""Tactic selection of the cuDNN engine with a stand-in for cuDNN's plan list, the JSON timing cache, and the
engine's H200 sessions: no layer of an FP8 recipe ran in fp16 without a recorded reason."""

from __future__ import annotations

import concurrent.futures
import dataclasses
import hashlib
import json
import os
import threading
import time
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

import pytest
import torch

from builders.cache_files import document_digest
from builders.engine import compiler as plan_compiler
from builders.engine import kernels
from builders.engine.compiler import CompileJobs, PlanCompiler, WorkerAnswer, worker_count
from builders.engine.kernels import NOT_SERIALIZED, ConvGraph, ConvSignature, answer_covers
from builders.engine.plans import CACHE_VERSION, PLANS_PER_OPT_LEVEL, Choice, CompiledPlans, TimingCache, choose_plan
from sessions.documents.storage import decode, read_regular_file
from tests.conftest import ROOT

RESULTS = ROOT / "benchmarks" / "results" / "h200"
# a worker's answer is its reason where it has no GPU (the workers' CUDA context fails): the real-pool tests rely on it
NO_CUDA = pytest.mark.skipif(torch.cuda.is_available(), reason="a worker on a GPU compiles real plans")
SIG = "a graph signature"  # what the compiler keys its jobs by, opaque to it


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
    choice = choose_plan(graph, "conv fp8 in=1x256x56x56", 3, timer(graph, {0: 3.0, 1: 2.0, 2: 9.0}), cache)
    cache.put("conv fp8 in=1x256x56x56", choice, None)
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


def test_the_cache_keeps_the_winners_serialized_plan_by_its_hash_and_refuses_altered_bytes(tmp_path):
    path = tmp_path / "cache.json"
    cache = TimingCache(path, {"gpu": "x"})
    choice = Choice(2, "eng7", 4, 11, 12.5, False, [])
    cache.put("sig", choice, b"cuDNN plan bytes")
    cache.save()

    reloaded = TimingCache(path, {"gpu": "x"})
    assert reloaded.holds_plan("sig")
    plan, entry = reloaded.plan("sig")
    assert plan == b"cuDNN plan bytes" and (entry["index"], entry["name"], entry["offered"]) == (2, "eng7", 11)
    stored = reloaded.plans_dir / f"{hashlib.sha256(b'cuDNN plan bytes').hexdigest()}.plan"
    assert stored.read_bytes() == b"cuDNN plan bytes"
    stored.write_bytes(b"cuDNN plan bytez")  # altered on disk: not loaded, chosen again
    assert reloaded.plan("sig") is None
    stored.unlink()
    assert not reloaded.holds_plan("sig")


def test_a_cached_choice_keeps_its_record_and_gains_the_plan_it_lacked(tmp_path):
    cache = TimingCache(tmp_path / "cache.json", {"gpu": "x"})
    cache.put("sig", Choice(1, "p1", 3, 4, 2.0, False, []), None)
    cache.put("sig", Choice(1, "p1", 1, 4, None, True, []), b"plan")
    entry = cache.entries["sig"]
    assert (entry["tried"], entry["time_us"], cache.plan("sig")[0]) == (3, 2.0, b"plan")
    cache.dirty = False
    cache.put("sig", Choice(1, "p1", 1, 4, None, True, []), b"plan")
    assert not cache.dirty


def test_an_entry_keeps_other_libraries_times_and_the_winning_library(tmp_path):
    path = tmp_path / "cache.json"
    cache = TimingCache(path, {"gpu": "x"})
    cache.put("sig", Choice(1, "p1", 3, 4, 9.0, False, []), None)
    cache.put_libraries("sig", {"cuBLASLt": 3.5, "PyTorch": 4.0}, "cuBLASLt", "graph replays")
    cache.save()
    reloaded = TimingCache(path, {"gpu": "x"})
    assert reloaded.library_times("sig", "graph replays") == {"cuBLASLt": 3.5, "PyTorch": 4.0}
    assert (reloaded.entries["sig"]["library"], reloaded.get("sig")) == ("cuBLASLt", (1, "p1"))
    reloaded.put_libraries("sig", {"cuBLASLt": 3.5, "PyTorch": 4.0}, "cuBLASLt", "graph replays")
    assert not reloaded.dirty  # nothing new: nothing to save
    reloaded.put_libraries("other", {"cuBLASLt": 1.0}, "cuBLASLt", "graph replays")
    assert "other" not in reloaded.entries  # no cuDNN choice recorded: nothing to extend


def test_other_libraries_times_taken_another_way_are_not_read_and_are_replaced(tmp_path):
    path = tmp_path / "cache.json"
    _write_entry(path, {**OLD_ENTRY, "tactics": {"cuBLASLt": 90.0}, "library": "cuDNN"})  # timed eagerly, unsaid
    cache = TimingCache(path, {"gpu": "x"})
    assert cache.get("sig") == (1, "p1") and cache.library_times("sig", "graph replays") == {}
    cache.put_libraries("sig", {"cuBLASLt": 3.0}, "cuBLASLt", "graph replays")
    assert cache.dirty and cache.library_times("sig", "graph replays") == {"cuBLASLt": 3.0}
    assert cache.library_times("sig", "eager") == {}
    cache.put_libraries("sig", {"cuBLASLt": 3.0}, "cuBLASLt", "eager")  # the same times, taken another way
    assert cache.library_times("sig", "eager") == {"cuBLASLt": 3.0}


OLD_ENTRY = {"index": 1, "name": "p1", "tried": 3, "offered": 4, "time_us": 9.0}  # before other libraries were timed


def _write_entry(path: Path, entry: dict) -> None:
    """A cache file holding `entry` for "sig", with its digest right: only the entry's meaning can refuse it."""
    body = {"version": CACHE_VERSION, "key": {"gpu": "x"},
            "plans": {"sig": {**entry, "digest": document_digest(["sig", entry])}}}
    path.write_text(json.dumps(body))


def test_an_entry_written_before_other_libraries_were_timed_still_reads(tmp_path):
    _write_entry(tmp_path / "cache.json", OLD_ENTRY)
    cache = TimingCache(tmp_path / "cache.json", {"gpu": "x"})
    assert cache.get("sig") == (1, "p1") and cache.library_times("sig", "graph replays") == {}


@pytest.mark.parametrize("fields", [
    {"library": "cuBLASLT"}, {"library": 7}, {"library": ["cuDNN"]},
    {"library": "PyTorch", "tactics": {"cuBLASLt": 2.0}},  # the winner has no time
    {"tactics": {"cuBLASLt": -1.0}}, {"tactics": {"cuBLASLt": "fast"}}, {"tactics": {"cuBLASLt": True}},
    {"tactics": {"cuDNN": 2.0}}, {"tactics": {"TensorRT": 2.0}}, {"tactics": [["cuBLASLt", 2.0]]},
    {"tactics": {"cuBLASLt": 2.0}, "tactics_timing": 3},
])
def test_an_entry_whose_library_fields_do_not_read_is_a_miss(tmp_path, fields):
    _write_entry(tmp_path / "cache.json", {**OLD_ENTRY, **fields})
    assert TimingCache(tmp_path / "cache.json", {"gpu": "x"}).entries == {}


def test_plans_compiled_elsewhere_are_loaded_timed_and_refusals_keep_their_reason():
    loaded: list[int] = []
    compiled = CompiledPlans(["a", "b", "c", "d"], {1: b"one", 2: b"two"}, {0: "no kernel for this shape"},
                             lambda index, plan: loaded.append(index) or plan)
    times = {1: 7.0, 2: 5.0}
    choice = choose_plan(compiled, "sig", 3, lambda i: (compiled.build_plan_at_index(i), times[i])[1], None)
    assert (choice.index, choice.name, choice.tried, choice.offered) == (2, "c", 3, 4)
    assert choice.failures == ["[0] no kernel for this shape"] and loaded[-1] == 2
    with pytest.raises(RuntimeError, match="plan 3 was not compiled"):
        compiled.build_plan_at_index(3)


@pytest.mark.parametrize(("cores", "graphs", "workers"),
                         [(32, 34, 15), (16, 34, 15), (16, 5, 5), (16, 3, 0), (4, 34, 3), (2, 34, 0)])
def test_plan_compilation_is_spread_only_where_it_pays(monkeypatch, cores, graphs, workers):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(cores)))
    assert worker_count(graphs) == workers
    compiler = PlanCompiler(0)
    jobs = compiler.submit([], 4)
    assert jobs.take(SIG) is None and compiler._pool is None  # type: ignore[arg-type]  # nothing to compile: no pool


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
                assert (layer.tactic
                        and 1 <= layer.attrs["plans_tried"] <= PLANS_PER_OPT_LEVEL[session.study.plan.opt_level])
    assert checked or "segformer" in path.name or "vit" in path.name


def test_an_altered_plan_file_is_replaced_by_the_plan_built_again(tmp_path):
    cache = TimingCache(tmp_path / "cache.json", {"gpu": "x"})
    cache.put("sig", Choice(1, "p1", 3, 4, 2.0, False, []), b"first bytes")
    (cache.plans_dir / f"{cache.entries['sig']['plan']}.plan").write_bytes(b"first bytez")
    assert not cache.holds_plan("sig")
    cache.put("sig", Choice(1, "p1", 1, 4, None, True, []), b"built again")
    assert cache.plan("sig")[0] == b"built again" and cache.entries["sig"]["tried"] == 3 and cache.dirty


def test_a_cache_that_cannot_be_written_keeps_the_choice_without_its_plan(tmp_path):
    path = tmp_path / "cache.json"
    path.with_suffix(".plans").write_text("a file where the plans' folder would be")
    cache = TimingCache(path, {"gpu": "x"})
    cache.put("sig", Choice(0, "p0", 2, 2, 1.0, False, []), b"plan")
    assert cache.get("sig") == (0, "p0") and not cache.holds_plan("sig")


@pytest.mark.parametrize(("plans", "complete"), [
    ({0: b"a", 1: "CUDNN_STATUS_NOT_SUPPORTED"}, True),  # cuDNN's own refusal: the same in any process
    ({0: b"a", 1: NOT_SERIALIZED}, False),  # built but not kept: this process builds it again
    ({0: b"a", 1: "CUDA out of memory. Tried to allocate"}, False),  # the worker's memory, not the plan
    ({0: b"a"}, False),  # a plan to try that the worker did not answer for
    ({0: "CUDNN_STATUS_NOT_SUPPORTED", 1: "CUDNN_STATUS_NOT_SUPPORTED"}, False),  # nothing to time
])
def test_a_workers_answer_is_used_only_where_it_covers_every_plan_to_try(plans, complete):
    assert answer_covers((["p0", "p1", "p2"], plans), 2) is complete


WORKER_LIFE = """
import os, signal, sys, time
from builders.engine.compiler import _new_pool

pool = _new_pool(1)
pid = pool.submit(os.getpid).result()
os.kill(pid, signal.SIGINT)  # as the terminal's Ctrl-C reaches every process of the group
time.sleep(1.0)
print(pid, pool.submit(os.getpid).result() == pid, flush=True)
os._exit(0)  # as the CLI leaves after an interrupt: no exit hooks, the pool not shut down
"""


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "\nState:\tZ" not in state


@pytest.mark.slow
def test_compile_workers_ignore_ctrl_c_and_end_with_the_engines_process():
    import subprocess
    import sys
    import time

    result = subprocess.run([sys.executable, "-c", WORKER_LIFE], capture_output=True, text=True, timeout=120,
                            cwd=ROOT, check=False)
    pid, survived = result.stdout.split()
    assert survived == "True", result.stderr
    assert "Traceback" not in result.stderr and "KeyboardInterrupt" not in result.stderr
    deadline = time.monotonic() + 20
    while _running(int(pid)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _running(int(pid)), "the worker outlived the process that started it"


@pytest.mark.slow
@NO_CUDA
def test_a_real_workers_answer_comes_back_through_the_pool_and_into_the_ledger():
    """The worker's job as the pool runs it (`_compile` in a spawned process, its `WorkerAnswer` pickled back): on a
    machine without cuDNN or a GPU the answer is the worker's reason, so the graph is this process's to build, and the
    worker's seconds are counted."""
    compiler = PlanCompiler(0)
    compiler._pool = plan_compiler._new_pool(2)
    warm = threading.Event()
    warm.set()  # wait for the answer, as once a worker of the pool has answered
    sig = ConvSignature("fp16", (1, 16, 6, 6), 16, (3, 3), (1, 1), (1, 1), (1, 1), 1, (), False)
    try:
        jobs = CompileJobs({sig: compiler._pool.submit(plan_compiler._compile, 0, sig, 1)}, compiler, warm,
                           compiler.pools)
        assert jobs.take(sig) is None and not compiler.has_broken(compiler.pools)
    finally:
        compiler.close()
    assert compiler.ledger.worker_s > 0 and compiler.ledger.waited_s > 0 and compiler.ledger.worker_plans == 0


@pytest.mark.slow
@NO_CUDA
def test_jobs_sent_ahead_to_real_workers_are_taken_by_a_submit_and_the_rest_withdrawn(monkeypatch):
    """Through a real pool of two spawned workers: the jobs sent ahead that a submit asks for come back from the
    workers (on a machine without cuDNN or a GPU each answer is the worker's reason, so this process builds the
    graph, and the worker's seconds are counted); the others are counted as never asked for when withdrawn."""
    monkeypatch.setattr(plan_compiler, "MAX_WORKERS", 2)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(16)))
    sigs = [ConvSignature("fp16", (1, 16, 6, 6), 16, (3, 3), (1, 1), (1, 1), (1, 1), 1, (), False, cold_weights=cold)
            for cold in (False, True)]
    sigs += [dataclasses.replace(sig, out_channels=32) for sig in sigs] + [dataclasses.replace(sigs[0], groups=4)]
    compiler = PlanCompiler(0)
    try:
        compiler._pool_for(len(sigs))  # a running pool: jobs are sent ahead only to one
        compiler.send_ahead(sigs, 1)
        assert compiler.pools == 1 and compiler._warm.wait(timeout=120)  # a worker has answered: the pool is warm
        jobs = compiler.submit(sigs[:2], 1)
        assert jobs.take(sigs[0]) is None and jobs.take(sigs[1]) is None  # answered with the worker's reason
        compiler.withdraw_ahead()
    finally:
        compiler.close()
    ledger = compiler.ledger
    assert ledger.worker_s > 0 and ledger.worker_plans == 0 and not compiler.has_broken(compiler.pools)
    assert ledger.ahead_unasked == 3


def test_a_timing_cache_that_cannot_be_written_is_kept_for_a_later_save(tmp_path):
    blocked = tmp_path / "a file where the folder would be"
    blocked.write_text("")
    cache = TimingCache(blocked / "cache.json", {"gpu": "x"})
    cache.put("sig", Choice(0, "p0", 2, 2, 1.0, False, []), None)
    cache.save()  # no error: the build goes on
    assert cache.dirty and cache.get("sig") == (0, "p0")


def _jobs(*states: str, compiler: PlanCompiler | None = None,
          warm: threading.Event | None = None) -> tuple[CompileJobs, list[concurrent.futures.Future], threading.Event]:
    """CompileJobs over hand-driven futures, one per state: pending (not started), running, or answered; and the
    pool's warmth (a new pool's unless `warm` is given)."""
    futures: list[concurrent.futures.Future] = [concurrent.futures.Future() for _ in states]
    warm = warm or threading.Event()
    by_sig = {f"sig{i}": f for i, f in enumerate(futures)}
    compiler = compiler or PlanCompiler(0)
    jobs = CompileJobs(by_sig, compiler, warm, compiler.pools)  # type: ignore[arg-type]
    for future, state in zip(futures, states, strict=True):
        if state != "pending":
            future.set_running_or_notify_cancel()
        if state == "answered":
            future.set_result(WorkerAnswer((["p0"], {0: b"plan"}), 0.5))
    return jobs, futures, warm


def test_before_any_worker_answers_this_process_builds_and_withdraws_the_job(monkeypatch):
    monkeypatch.setattr(plan_compiler, "ANSWER_TIMEOUT_S", 5)  # a wait that should not happen fails the test soon
    jobs, futures, _ = _jobs("pending", "running", "pending")
    assert jobs.take("sig0") is None and futures[0].cancelled()  # withdrawn: no worker compiles it now
    assert jobs.take("sig1") is None and not futures[1].cancelled()  # started: left to finish, unused
    futures[1].set_result(WorkerAnswer((["p0"], {0: b"late"}), 0.5))  # the first answer: the pool is warm
    threading.Timer(0.2, lambda: (futures[2].set_running_or_notify_cancel(),
                                  futures[2].set_result(WorkerAnswer((["p0"], {0: b"two"}), 0.5)))).start()
    assert jobs.take("sig2") == (["p0"], {0: b"two"})  # waited for, not built here
    assert jobs.take("sig2") is None and jobs.take("unsent") is None


def test_an_answer_already_back_is_used_and_a_workers_refusal_is_built_here():
    jobs, futures, _ = _jobs("answered", "running")
    futures[1].set_result(WorkerAnswer("CUDNN_STATUS_NOT_SUPPORTED", 0.5))
    assert jobs.take("sig0") == (["p0"], {0: b"plan"})
    assert jobs.take("sig1") is None


def test_the_ledger_counts_the_workers_plans_and_seconds_and_the_wait_for_them():
    warm = threading.Event()
    warm.set()  # a worker of the pool has answered before: answers not back are waited for
    jobs, futures, _ = _jobs("running", "running", "running", warm=warm)
    futures[0].set_result(WorkerAnswer((["p0", "p1"], {0: b"plan", 1: "CUDNN_STATUS_NOT_SUPPORTED"}), 2.0))
    futures[1].set_result(WorkerAnswer("no engine for this graph", 0.25))
    threading.Timer(0.3, lambda: futures[2].set_result(WorkerAnswer((["p0"], {0: b"late"}), 1.5))).start()
    assert jobs.take("sig0") is not None and jobs.take("sig1") is None and jobs.take("sig2") is not None
    ledger = jobs._compiler.ledger
    assert (ledger.worker_plans, ledger.worker_s) == (2, 3.75)  # plans serialized; a refusal's seconds count
    assert 0.2 < ledger.waited_s < 5  # the wait for the third answer only


@pytest.mark.parametrize("answer, loads, source", [
    ((["p0", "p1"], {0: b"zero", 1: "no kernel"}), True, "answered"),
    ((["p0", "p1"], {0: b"zero", 1: NOT_SERIALIZED}), True, "built"),  # the answer does not cover plan 1
    ((["p0"], {0: b"zero"}), False, "built"),  # the worker's plans do not load here
    (None, True, "built"),
])
def test_a_graph_says_whether_a_workers_plans_made_it(monkeypatch, answer, loads, source):
    def select_compiled(sig, *_args):
        if not loads:
            raise RuntimeError("plan does not deserialize")
        return ConvGraph(sig, None, None, None, Choice(0, "p0", 2, 2, 1.0, False, []), b"zero")

    def select_in_process(sig, *_args):
        return ConvGraph(sig, None, None, None, Choice(1, "p1", 2, 2, 2.0, False, []), b"one")

    monkeypatch.setattr(kernels, "select_compiled", select_compiled)
    monkeypatch.setattr(kernels, "select_in_process", select_in_process)
    sig = ConvSignature("fp16", (1, 16, 6, 6), 16, (3, 3), (1, 1), (1, 1), (1, 1), 1, (), False)
    assert kernels.build_graph(sig, None, None, 2, None, answer)[2] == source


def test_a_builds_graphs_are_what_it_added_to_the_ledger_in_one_line():
    from builders.engine.compiler import CompileLedger

    before = CompileLedger(cached=3, cached_s=0.5, built=1, built_s=1.0)
    after = CompileLedger(cached=5, cached_s=0.75, answered=4, answered_s=2.0, built=2, built_s=3.5,
                          worker_plans=12, worker_s=30.0, waited_s=6.0)
    assert after.since(before).words() == (
        "cuDNN graphs made: 4 from plans the compile workers built, loaded and timed here (2.0 s), 1 compiled and "
        "timed here (2.5 s), 2 from the timing cache (0.2 s); the compile workers: 12 plans compiled, 30.0 s of "
        "their time (their start included), 6.0 s waited for")
    warm = CompileLedger(cached=7, cached_s=1.25)
    assert warm.since(CompileLedger()).words() == "cuDNN graphs made: 7 from the timing cache (1.2 s)"
    assert after.since(after).words() is None


def test_a_broken_pool_leaves_its_graphs_to_this_process_and_is_replaced_as_often_as_restarts_allow(monkeypatch):
    pools: list[HandDrivenPool] = []
    monkeypatch.setattr(plan_compiler, "_new_pool", lambda workers: pools.append(HandDrivenPool(workers)) or pools[-1])
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(16)))
    compiler = PlanCompiler(0)
    for broken in range(plan_compiler.RESTARTS + 1):
        jobs = compiler.submit(["a", "b", "c", "d"], 4)  # type: ignore[list-item]
        assert len(pools) == broken + 1  # a pool of its own: the one before broke
        for job in pools[-1].jobs:
            job.set_running_or_notify_cancel()
        pools[-1].jobs[0].set_exception(BrokenProcessPool("a worker died"))
        pools[-1].jobs[1].set_result(WorkerAnswer((["p0"], {0: b"plan"}), 0.5))
        assert jobs.take("a") is None  # type: ignore[arg-type]
        assert jobs.take("b") is None  # type: ignore[arg-type]  (an answer from a broken pool is not used)
    assert compiler.broken
    compiler.submit(["a", "b", "c", "d"], 4)  # type: ignore[list-item]
    assert len(pools) == plan_compiler.RESTARTS + 1  # no pool started past the restarts: built in this process


def test_a_pool_found_broken_while_sending_is_replaced_and_sent_to_again(monkeypatch):
    pools: list[RefusingPool | HandDrivenPool] = []

    def new_pool(workers: int) -> RefusingPool | HandDrivenPool:
        pools.append(RefusingPool(workers) if not pools else HandDrivenPool(workers))
        return pools[-1]

    monkeypatch.setattr(plan_compiler, "_new_pool", new_pool)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(16)))
    compiler = PlanCompiler(0)
    compiler.submit(["a", "b", "c", "d"], 4)  # type: ignore[list-item]
    assert len(pools) == 2 and len(pools[1].jobs) == 4 and not compiler.broken  # type: ignore[union-attr]


@pytest.mark.parametrize("failure", [concurrent.futures.CancelledError(), ValueError("an answer that did not unpickle"),
                                     TimeoutError()])
def test_any_failure_of_a_job_leaves_the_graph_to_this_process(failure, monkeypatch):
    compiler = running_compiler(monkeypatch)
    jobs, futures, _ = _jobs("answered", "running", compiler=compiler)
    futures[1].set_exception(failure)
    assert jobs.take("sig1") is None
    withdrawn = isinstance(failure, concurrent.futures.CancelledError)
    assert compiler.has_broken(compiler.pools) is not withdrawn and (compiler._pool is None) is not withdrawn


def test_the_jobs_of_a_pool_closed_as_planned_break_nothing(monkeypatch):
    compiler = running_compiler(monkeypatch)
    jobs, futures, _ = _jobs("answered", "running", compiler=compiler)
    compiler.close()  # the builds are done: its running workers are ended, their jobs fail as a broken pool's do
    futures[1].set_exception(BrokenProcessPool("terminated by close"))
    assert jobs.take("sig1") is None and not compiler.has_broken(compiler.pools)
    compiler.submit(["a", "b", "c", "d"], 4)  # type: ignore[list-item]
    jobs_of_closed, futures, _ = _jobs("running", compiler=compiler)
    jobs_of_closed._pool = compiler.pools - 1  # a job of the pool before
    futures[0].set_exception(BrokenProcessPool("terminated by close"))
    assert jobs_of_closed.take("sig0") is None
    assert compiler._pool is not None and not compiler.has_broken(compiler.pools)


def test_once_a_worker_has_answered_later_builds_wait_for_the_workers():
    jobs, _, warm = _jobs("answered")
    assert jobs.take("sig0") is not None
    later, futures, _ = _jobs("pending", warm=warm)
    threading.Timer(0.2, lambda: (futures[0].set_running_or_notify_cancel(),
                                  futures[0].set_result(WorkerAnswer((["p0"], {0: b"nine"}), 0.5)))).start()
    assert later.take("sig0") == (["p0"], {0: b"nine"})


def running_compiler(monkeypatch) -> PlanCompiler:
    """A compiler whose pool (a `HandDrivenPool`) is running."""
    monkeypatch.setattr(plan_compiler, "_new_pool", HandDrivenPool)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(16)))
    compiler = PlanCompiler(0)
    compiler.submit(["a", "b", "c", "d"], 4)  # type: ignore[list-item]
    return compiler


class HandDrivenPool:
    """A stand-in for the process pool: jobs are futures the test completes."""

    def __init__(self, workers: int) -> None:
        self.jobs: list[concurrent.futures.Future] = []
        self.sent: list[object] = []  # what each job compiles: a signature, or a region's pickled function

    def submit(self, fn, *args) -> concurrent.futures.Future:
        self.jobs.append(concurrent.futures.Future())
        self.sent.append(args[1])
        return self.jobs[-1]

    def shutdown(self, wait: bool, cancel_futures: bool) -> None:
        for job in self.jobs:
            job.cancel()


class RefusingPool(HandDrivenPool):
    """A stand-in for a pool whose worker died before the jobs were sent."""

    def submit(self, fn, *args) -> concurrent.futures.Future:
        raise BrokenProcessPool("a worker died")


def test_an_answer_from_a_closed_pool_does_not_make_the_next_pool_warm(monkeypatch):
    pools: list[HandDrivenPool] = []
    monkeypatch.setattr(plan_compiler, "_new_pool", lambda workers: pools.append(HandDrivenPool(workers)) or pools[-1])
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(16)))
    compiler = PlanCompiler(0)
    first = compiler.submit(["a", "b", "c", "d"], 4)  # type: ignore[list-item]
    pools[0].jobs[0].set_running_or_notify_cancel()
    pools[0].jobs[1].set_running_or_notify_cancel()
    pools[0].jobs[0].set_result(WorkerAnswer((["p0"], {0: b"a"}), 0.5))
    assert first.take("a") is not None  # type: ignore[arg-type]
    compiler.close()
    second = compiler.submit(["e", "f", "g", "h"], 4)  # type: ignore[list-item]
    # the closed pool's running job ends after the new pool began
    pools[0].jobs[1].set_result(WorkerAnswer((["p0"], {0: b"late"}), 0.5))
    assert second.take("e") is None and pools[1].jobs[0].cancelled()  # type: ignore[arg-type]  # cold: built here


def test_close_returns_once_no_worker_is_left_running_a_job():
    """A worker still compiling when the builds are done would take a core and the GPU while the variants are timed:
    `close` ends it, and returns only when every worker has exited."""
    compiler = PlanCompiler(0)
    compiler._pool = plan_compiler._new_pool(2)
    running = [compiler._pool.submit(time.sleep, 60) for _ in range(2)]
    while not all(job.running() for job in running):
        time.sleep(0.05)
    processes = list(compiler._pool._processes.values())
    started = time.monotonic()
    compiler.close()
    assert not any(process.is_alive() for process in processes)
    assert time.monotonic() - started < 30


@pytest.mark.skipif(not hasattr(os, "getpriority"), reason="no process priorities on this system")
def test_the_workers_run_nicer_than_the_studys_process():
    """Where the study's process and its starting workers both want the CPU (a first run's model load), the study's
    process has it: each worker is WORKER_NICENESS nicer (the system's cap, 19, at most)."""
    pool = plan_compiler._new_pool(2)
    try:
        seen = {job.result(timeout=120) for job in [pool.submit(os.getpriority, os.PRIO_PROCESS, 0) for _ in range(4)]}
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    assert seen == {min(os.getpriority(os.PRIO_PROCESS, 0) + plan_compiler.WORKER_NICENESS, 19)}


def test_graphs_sent_ahead_are_the_jobs_a_later_submit_takes_and_end_with_their_pool(monkeypatch):
    """A signature sent ahead is sent once, in the order given: the submit that asks for it takes that job (its
    answer included) and sends only the others; what a closed pool had sent ahead is sent again to the next."""
    compiler, pools = hand_driven_compiler(monkeypatch)
    compiler.send_ahead(["a", "b", "c", "d"], 4)  # type: ignore[list-item]
    compiler.send_ahead(["c", "d", "e", "f", "e"], 4)  # type: ignore[list-item]
    assert len(pools) == 1 and len(pools[0].jobs) == 6  # c and d not sent twice, e once
    for job in pools[0].jobs[:2]:
        job.set_running_or_notify_cancel()
    pools[0].jobs[1].set_result(WorkerAnswer((["p0"], {0: b"b"}), 0.5))  # b's answer: the pool is warm
    jobs = compiler.submit(["b", "g", "c"], 4)  # type: ignore[list-item]
    assert len(pools[0].jobs) == 7  # only g sent now
    assert jobs.take("b") == (["p0"], {0: b"b"})  # type: ignore[arg-type]
    pools[0].jobs[2].set_running_or_notify_cancel()
    pools[0].jobs[2].set_result(WorkerAnswer((["p0"], {0: b"c"}), 0.5))
    assert jobs.take("c") == (["p0"], {0: b"c"})  # type: ignore[arg-type]  (the job sent ahead, not a new one)
    compiler.close()
    compiler.submit(["d", "e", "f", "h"], 4)  # type: ignore[list-item]
    assert len(pools) == 2 and len(pools[1].jobs) == 4  # the closed pool's jobs sent ahead are not taken


def test_a_worker_answering_a_job_sent_ahead_makes_the_pool_warm(monkeypatch):
    """Once a job sent ahead is answered, a later submit's jobs are waited for, not built in this process."""
    compiler, pools = hand_driven_compiler(monkeypatch)
    compiler.send_ahead(["a", "b", "c", "d"], 4)  # type: ignore[list-item]
    pools[0].jobs[0].set_running_or_notify_cancel()
    pools[0].jobs[0].set_result(WorkerAnswer((["p0"], {0: b"a"}), 0.5))
    later = compiler.submit(["e", "f", "g", "h"], 4)  # type: ignore[list-item]
    threading.Timer(0.2, lambda: (pools[0].jobs[4].set_running_or_notify_cancel(),
                                  pools[0].jobs[4].set_result(WorkerAnswer((["p0"], {0: b"e"}), 0.5)))).start()
    assert later.take("e") == (["p0"], {0: b"e"})  # type: ignore[arg-type]


def test_jobs_sent_ahead_and_never_asked_for_are_withdrawn_unless_a_worker_took_them(monkeypatch):
    compiler, pools = hand_driven_compiler(monkeypatch)
    compiler.send_ahead(["a", "b", "c", "d"], 4)  # type: ignore[list-item]
    pools[0].jobs[0].set_running_or_notify_cancel()  # a worker took a
    compiler.withdraw_ahead()
    assert [job.cancelled() for job in pools[0].jobs] == [False, True, True, True]
    compiler.submit(["a", "b", "c", "d"], 4)  # type: ignore[list-item]
    assert len(pools) == 1 and len(pools[0].jobs) == 8  # asked for later: sent again, to the same pool


def test_a_submit_that_finds_the_pool_broken_holds_only_the_new_pools_jobs(monkeypatch):
    """Jobs sent ahead to a pool that sending then finds broken went with it: the submit's jobs are the new pool's
    alone, so the old pool's failure neither breaks the new one nor makes it warm, and the graph sent ahead is built
    in this process."""
    compiler, pools = hand_driven_compiler(monkeypatch)
    monkeypatch.setattr(plan_compiler, "ANSWER_TIMEOUT_S", 5)  # a wait that should not happen fails the test soon
    compiler.send_ahead(["a", "b", "c", "d"], 4)  # type: ignore[list-item]
    pools[0].jobs[0].set_running_or_notify_cancel()  # a worker of the first pool took a
    pools[0].submit = RefusingPool.submit.__get__(pools[0])  # type: ignore[method-assign]  (a worker died)
    jobs = compiler.submit(["a", "e", "f", "g", "h"], 4)  # type: ignore[list-item]
    assert len(pools) == 2 and len(pools[1].jobs) == 4
    pools[0].jobs[0].set_exception(BrokenProcessPool("the first pool's worker died"))
    assert jobs.take("a") is None  # type: ignore[arg-type]  (not the dead pool's job: this process builds it)
    assert not compiler.has_broken(compiler.pools) and not compiler.broken
    assert jobs.take("e") is None and pools[1].jobs[0].cancelled()  # type: ignore[arg-type]  (the new pool is cold)


def test_the_ledger_says_how_many_graphs_were_sent_ahead_and_never_asked_for(monkeypatch):
    compiler, pools = hand_driven_compiler(monkeypatch)
    compiler.send_ahead(["a", "b", "c", "d", "e"], 4)  # type: ignore[list-item]
    pools[0].jobs[1].set_running_or_notify_cancel()  # a worker took b
    compiler.submit(["a"], 4)  # type: ignore[list-item]
    compiler.withdraw_ahead()
    assert (compiler.ledger.ahead_unasked, compiler.ledger.ahead_withdrawn) == (4, 3)
    assert compiler.ledger.words() is None  # no graph made: no line
    compiler.ledger.built, compiler.ledger.built_s = 1, 0.5
    assert compiler.ledger.words() == ("cuDNN graphs made: 1 compiled and timed here (0.5 s); 4 graphs sent ahead and "
                                       "not asked for (3 withdrawn before a worker took them)")


def hand_driven_compiler(monkeypatch, running: bool = True) -> tuple[PlanCompiler, list[HandDrivenPool]]:
    """A compiler on a machine of 16 cores whose pools are `HandDrivenPool`s, listed as they start; with `running`,
    its first pool started, no job sent to it yet (jobs are sent ahead only to a running pool)."""
    pools: list[HandDrivenPool] = []
    monkeypatch.setattr(plan_compiler, "_new_pool", lambda workers: pools.append(HandDrivenPool(workers)) or pools[-1])
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(16)))
    compiler = PlanCompiler(0)
    if running:
        compiler._pool_for(4)
    return compiler, pools


def test_graphs_are_sent_ahead_only_to_a_running_pool(monkeypatch):
    """Work that may never be asked for starts no workers: with no pool running nothing is sent ahead, and a submit
    that needs workers starts them."""
    compiler, pools = hand_driven_compiler(monkeypatch, running=False)
    compiler.send_ahead(["a", "b", "c", "d", "e"], 4)  # type: ignore[list-item]
    assert pools == [] and compiler.pools == 0
    compiler.submit(["a", "b", "c", "d"], 4)  # type: ignore[list-item]
    compiler.send_ahead(["e", "f"], 4)  # type: ignore[list-item]
    assert len(pools) == 1 and len(pools[0].jobs) == 6


def test_close_counts_the_jobs_sent_ahead_that_it_drops(monkeypatch):
    compiler, pools = hand_driven_compiler(monkeypatch)
    compiler.send_ahead(["a", "b", "c"], 4)  # type: ignore[list-item]
    compiler.close()
    assert (compiler.ledger.ahead_unasked, compiler.ledger.ahead_withdrawn) == (3, 3)
    assert all(job.cancelled() for job in pools[0].jobs)


class BlockingPool(HandDrivenPool):
    """A stand-in for a pool whose shutdown (its workers' exit) lasts until the test lets it end."""

    def __init__(self, workers: int) -> None:
        super().__init__(workers)
        self.shutting_down, self.may_end = threading.Event(), threading.Event()

    def shutdown(self, wait: bool, cancel_futures: bool) -> None:
        self.shutting_down.set()
        assert self.may_end.wait(10)
        super().shutdown(wait, cancel_futures)


def test_begin_close_returns_while_the_workers_exit_and_close_waits_for_them(monkeypatch):
    """The study's last build begins the close and goes on (its variant's quality and trace overlap the workers'
    exit); the close before timing returns only once they are gone, with what the first call withdrew."""
    pools: list[BlockingPool] = []
    monkeypatch.setattr(plan_compiler, "_new_pool", lambda workers: pools.append(BlockingPool(workers)) or pools[-1])
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(16)))
    compiler = PlanCompiler(0)
    compiler._pool_for(4)
    compiler.send_ahead(["a", "b"], 4)  # type: ignore[list-item]
    compiler.begin_close()
    assert pools[0].shutting_down.wait(5) and not compiler.running  # returned while the shutdown lasts
    closed: list[list[object]] = []
    closing = threading.Thread(target=lambda: closed.append(compiler.close()))
    closing.start()
    closing.join(0.3)
    assert closing.is_alive()  # waits for the workers
    pools[0].may_end.set()
    closing.join(5)
    assert closed == [["a", "b"]] and all(job.cancelled() for job in pools[0].jobs)
    assert compiler.close() == []  # returned once


def test_what_ending_a_pool_raised_on_its_thread_close_raises(monkeypatch):
    """A pool whose shutdown fails on `begin_close`'s thread is not a silent success: `close` raises it."""
    class FailingPool(HandDrivenPool):
        def shutdown(self, wait: bool, cancel_futures: bool) -> None:
            raise OSError("the pool's queue is gone")

    monkeypatch.setattr(plan_compiler, "_new_pool", FailingPool)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(16)))
    compiler = PlanCompiler(0)
    compiler._pool_for(4)
    compiler.begin_close()
    with pytest.raises(OSError, match="queue is gone"):
        compiler.close()
    assert compiler.close() == []  # raised once


def test_a_broken_pools_jobs_are_not_returned_as_unasked_but_an_earlier_begin_close_is(monkeypatch):
    """Graphs withdrawn because their pool broke are asked for again by the builds: `close` does not return them
    as graphs no build asked for; those withdrawn by `begin_close` it does."""
    compiler, pools = hand_driven_compiler(monkeypatch)
    compiler.send_ahead(["a"], 4)  # type: ignore[list-item]
    compiler.begin_close()
    compiler._pool_for(4)
    compiler.send_ahead(["b"], 4)  # type: ignore[list-item]
    compiler.break_pool()
    assert pools[1].jobs[0].cancelled()  # b withdrawn with its broken pool
    assert compiler.close() == ["a"]


def settled(condition, what: str) -> None:
    """Waits (up to 5 s) for `condition()`, which a feeder thread makes true; fails naming `what` otherwise."""
    deadline = time.monotonic() + 5
    while not condition():
        assert time.monotonic() < deadline, f"not seen within 5 s: {what}"
        time.sleep(0.01)


def fed(pool: HandDrivenPool, *groups: object) -> bool:
    """Whether `pool`'s jobs were sent as `groups`, in order: each one job, or a tuple of jobs feeder threads sent side
    by side (threads woken together send in either order, so the feeder's order holds up to one job per worker)."""
    at = 0
    for group in groups:
        together = group if isinstance(group, tuple) else (group,)
        if sorted(map(repr, pool.sent[at:at + len(together)])) != sorted(map(repr, together)):
            return False
        at += len(together)
    return at == len(pool.sent)


def answer(pool: HandDrivenPool, sig: object) -> None:
    """The worker's answer to `pool`'s job for `sig`: taken and done."""
    job = pool.jobs[pool.sent.index(sig)]
    job.set_running_or_notify_cancel()
    job.set_result(WorkerAnswer((["p0"], {0: str(sig).encode()}), 0.5))


def foreseeing_compiler(monkeypatch, workers: int = 2) -> tuple[PlanCompiler, list[HandDrivenPool]]:
    """`hand_driven_compiler` with no pool running, on a machine whose pools have `workers` workers."""
    monkeypatch.setattr(plan_compiler, "MAX_WORKERS", workers)
    return hand_driven_compiler(monkeypatch, running=False)


def test_foreseen_graphs_start_a_pool_and_are_fed_to_it_one_per_worker_behind_a_builds_jobs(monkeypatch):
    """`foresee` starts the workers (they compile a later build's graphs while the builds before it run), and its
    jobs enter the pool at most one per worker, in order, each as one before it is answered: a build's jobs (sent
    ahead, asked for, a fused region's compile) queue behind none of them that no worker has taken."""
    compiler, pools = foreseeing_compiler(monkeypatch)
    compiler.foresee(["a", "b", "c", "d", "e"], 4)  # type: ignore[list-item]
    settled(lambda: len(pools) == 1 and fed(pools[0], ("a", "b")), "a and b in the pool")
    compiler.send_ahead(["f", "g"], 4)  # type: ignore[list-item]
    answer(pools[0], "a")
    settled(lambda: fed(pools[0], ("a", "b"), "f", "g", "c"), "c in the pool once a is answered")
    monkeypatch.setattr(plan_compiler, "_pickled", lambda module: b"region")
    compiler.submit_regions({"se": (None, [])})
    jobs = compiler.submit(["h"], 4)  # type: ignore[list-item]
    answer(pools[0], "b")
    settled(lambda: fed(pools[0], ("a", "b"), "f", "g", "c", b"region", "h", "d"), "d once b is answered")
    answer(pools[0], "h")
    assert jobs.take("h") == (["p0"], {0: b"h"})  # type: ignore[arg-type]  (a foreseen answer made the pool warm)
    compiler.close()


def test_a_foreseen_graph_a_build_asks_for_leaves_the_feeder_for_the_builds_own_jobs(monkeypatch):
    """A foreseen graph the feeder has not sent yet, once a build sends it ahead or asks for it, is sent with that
    build's jobs (not behind the other foreseen ones); one the feeder has sent stays that job and is taken back."""
    compiler, pools = foreseeing_compiler(monkeypatch)
    compiler.foresee(["a", "b", "c", "d", "e"], 4)  # type: ignore[list-item]
    settled(lambda: len(pools) == 1 and fed(pools[0], ("a", "b")), "a and b in the pool")
    answer(pools[0], "a")
    settled(lambda: fed(pools[0], ("a", "b"), "c"), "c in the pool")
    jobs = compiler.submit(["a", "e"], 4)  # type: ignore[list-item]
    assert fed(pools[0], ("a", "b"), "c", "e")  # e sent now; a is the feeder's job, answered
    assert jobs.take("a") == (["p0"], {0: b"a"})  # type: ignore[arg-type]
    answer(pools[0], "b")
    settled(lambda: fed(pools[0], ("a", "b"), "c", "e", "d"), "d after e")
    compiler.close()


def test_foreseen_graphs_are_withdrawn_by_the_build_that_sends_them_and_the_rest_by_close(monkeypatch):
    """A build's `withdraw_ahead` leaves the graphs foreseen for later builds, unless it sent one ahead itself (it is
    then that build's, withdrawn unasked); `close` withdraws the rest, each counted in the ledger, and ends the
    feeder's threads."""
    compiler, pools = foreseeing_compiler(monkeypatch)
    compiler.foresee(["a", "b", "c", "d"], 4)  # type: ignore[list-item]
    settled(lambda: len(pools) == 1 and fed(pools[0], ("a", "b")), "a and b in the pool")
    compiler.send_ahead(["c", "e"], 4)  # type: ignore[list-item]
    assert compiler.withdraw_ahead() == ["c", "e"]  # withdrawn before a worker took them
    assert (compiler.ledger.ahead_unasked, compiler.ledger.ahead_withdrawn) == (2, 2)
    answer(pools[0], "a")
    settled(lambda: fed(pools[0], ("a", "b"), "c", "e", "d"), "d fed, foreseen still")
    feeder = compiler._feeder
    assert compiler.close() == ["a", "b", "d"]  # no build asked for them; b and d running, ended with the pool
    assert (compiler.ledger.ahead_unasked, compiler.ledger.ahead_withdrawn) == (5, 2)
    assert feeder is not None and all(not thread.is_alive() for thread in feeder._threads)


def test_a_closed_pools_held_feeder_sends_nothing_and_its_end_leaves_a_later_hold_alone(monkeypatch):
    """`begin_close` lets the feeder's held threads go without sending to the closed pool; that pool's ending, which
    lasts, does not undo a hold a later build put on the next pool's feeder."""
    compiler, _ = foreseeing_compiler(monkeypatch)
    pools: list[BlockingPool] = []
    monkeypatch.setattr(plan_compiler, "_new_pool", lambda workers: pools.append(BlockingPool(workers)) or pools[-1])
    compiler.foresee(["a", "b", "c", "d"], 4)  # type: ignore[list-item]
    settled(lambda: len(pools) == 1 and fed(pools[0], ("a", "b")), "a and b in the pool")
    compiler.pause_foreseen()
    held = [compiler._ahead["c"], compiler._ahead["d"]]
    answer(pools[0], "a")
    answer(pools[0], "b")
    settled(lambda: all(job.running() for job in held), "c and d held in the feeder's threads")
    compiler.begin_close()
    assert all(isinstance(job.exception(5), RuntimeError) for job in held)  # let go, not sent
    assert fed(pools[0], ("a", "b")) and len(pools[0].sent) == 2
    compiler.foresee(["e", "f", "g", "h"], 4)  # type: ignore[list-item]  (a later build's pool)
    settled(lambda: len(pools) == 2 and fed(pools[1], ("e", "f")), "e and f in the next pool")
    compiler.pause_foreseen()
    pools[0].may_end.set()
    settled(lambda: not any(thread.name == "plan-workers-ending" for thread in threading.enumerate()),
            "the first pool ended")
    answer(pools[1], "e")
    time.sleep(0.2)
    assert len(pools[1].sent) == 2  # g and h still held
    pools[1].may_end.set()
    compiler.close()


def test_held_foreseen_graphs_are_waited_for_and_none_is_fed_until_resumed(monkeypatch):
    """`hold_foreseen` (a build about to time its fused regions) returns once the foreseen jobs in the pool are
    answered, and sends no other until `resume_foreseen`."""
    compiler, pools = foreseeing_compiler(monkeypatch)
    compiler.foresee(["a", "b", "c", "d"], 4)  # type: ignore[list-item]
    settled(lambda: len(pools) == 1 and fed(pools[0], ("a", "b")), "a and b in the pool")
    threading.Timer(0.2, lambda: (answer(pools[0], "a"), answer(pools[0], "b"))).start()
    compiler.hold_foreseen()
    assert all(job.done() for job in pools[0].jobs)
    time.sleep(0.2)
    assert fed(pools[0], ("a", "b"))  # c and d held
    compiler.resume_foreseen()
    settled(lambda: fed(pools[0], ("a", "b"), ("c", "d")), "c and d once resumed")
    compiler.close()


def test_paused_foreseen_graphs_are_not_waited_for_and_none_is_fed_until_resumed(monkeypatch):
    """`pause_foreseen` (a build whose regions' compiles have begun to answer) returns at once, the foreseen jobs in
    the pool left running, and sends no other until `resume_foreseen`."""
    compiler, pools = foreseeing_compiler(monkeypatch)
    compiler.foresee(["a", "b", "c", "d"], 4)  # type: ignore[list-item]
    settled(lambda: len(pools) == 1 and fed(pools[0], ("a", "b")), "a and b in the pool")
    compiler.pause_foreseen()
    assert not any(job.done() for job in pools[0].jobs)  # nothing waited for
    answer(pools[0], "a")
    time.sleep(0.2)
    assert fed(pools[0], ("a", "b"))  # c not fed in a's place
    compiler.resume_foreseen()
    settled(lambda: fed(pools[0], ("a", "b"), "c"), "c once resumed")
    compiler.close()


def test_too_few_foreseen_graphs_start_no_pool_and_a_foreseen_one_is_sent_once(monkeypatch):
    compiler, pools = foreseeing_compiler(monkeypatch, workers=4)
    compiler.foresee(["a", "b", "c"], 4)  # type: ignore[list-item]  (fewer than MIN_GRAPHS: compiled in process)
    assert pools == []
    compiler.foresee(["a", "b", "c", "d", "a"], 4)  # type: ignore[list-item]
    compiler.foresee(["d", "e"], 4)  # type: ignore[list-item]
    settled(lambda: len(pools) == 1 and fed(pools[0], ("a", "b", "c", "d")), "one job a worker")
    answer(pools[0], "a")
    settled(lambda: fed(pools[0], ("a", "b", "c", "d"), "e"), "e once a is answered")
    compiler.close()


def test_graphs_marked_unforeseen_are_not_foreseen_in_a_later_run_and_a_bad_mark_does_not_read(tmp_path, monkeypatch):
    """`mark_unforeseen` (a graph cuDNN refused, or one no build asked for: neither holds a plan) persists in the
    timing cache, and the next run's foresight and send ahead of calibration leave those graphs out, so a run whose
    other graphs are cached starts no workers; a mark that does not read is no mark."""
    from types import SimpleNamespace

    from builders.engine import build
    from builders.engine.plans import REFUSED, UNASKED, UNFORESEEN_PREFIX

    path, header = tmp_path / "cache.json", {"gpu": "x"}
    sent: list[list[str]] = []
    a, b, c, d = map(NamedSignature, "abcd")
    backend = SimpleNamespace(graphs={}, plan_limit=4, cache=TimingCache(path, header), compiler=SimpleNamespace(
        foresee=lambda sigs, limit: sent.append([sig.name for sig in sigs]),
        send_ahead=lambda sigs, limit: sent.append([sig.name for sig in sigs])))
    build.mark_unforeseen(backend, [b], REFUSED)  # type: ignore[arg-type]
    build.mark_unforeseen(backend, [d], UNASKED)  # type: ignore[arg-type]
    backend.cache.save()
    backend.cache = TimingCache(path, header)  # the next run
    build.foresee(backend, [[a, b], [c, d]])  # type: ignore[arg-type]
    assert sent == [["a", "c"]]
    monkeypatch.setattr(build, "first_round_graphs", lambda *_args: [a, b, c, d])
    build.send_first_round_ahead(backend, None, None, set(), {}, {})  # type: ignore[arg-type]  (ahead of calibration)
    assert sent[1] == ["a", "c"]
    stored = json.loads(path.read_text())
    for why in (REFUSED, "another reason"):
        entry = {"why": why, "extra": 1} if why == REFUSED else {"why": why}
        key = UNFORESEEN_PREFIX + "c"
        stored["plans"][key] = {**entry, "digest": document_digest([key, entry])}
        path.write_text(json.dumps(stored))
        assert not TimingCache(path, header).unforeseen("c")
    assert TimingCache(path, header).unforeseen("b")


def test_a_graph_cudnn_refuses_is_marked_unforeseen_and_one_it_builds_is_not(tmp_path, monkeypatch):
    from types import SimpleNamespace

    from builders.engine import build
    from builders.engine.plans import REFUSED, UNFORESEEN_PREFIX

    made, refused = NamedSignature("made"), NamedSignature("refused")

    def build_graph(sig, *_args):
        if sig == refused:
            raise RuntimeError("cuDNN: no engine proposed a plan for this graph")
        return object(), 0.0, "compiled"

    monkeypatch.setattr(build, "build_graph", build_graph)
    cache = TimingCache(tmp_path / "cache.json", {"gpu": "x"})
    compiler = SimpleNamespace(submit=lambda sigs, limit: SimpleNamespace(take=lambda sig: None),
                               ledger=SimpleNamespace(record=lambda source, seconds: None))
    backend = SimpleNamespace(graphs={}, cache=cache, compiler=compiler, plan_limit=4, cudnn=None, handle=None)
    build._build_new(backend, [made, refused])  # type: ignore[arg-type]
    assert backend.graphs[refused] == "cuDNN: no engine proposed a plan for this graph"
    assert cache.entries[UNFORESEEN_PREFIX + "refused"] == {"why": REFUSED} and not cache.unforeseen("made")


@pytest.mark.parametrize("fails", [False, True])
def test_a_build_marks_what_it_sent_ahead_and_never_asked_for_unless_it_fails(tmp_path, monkeypatch, fails):
    """`lower_and_choose` marks the graphs its end withdraws as unasked (`mark_unforeseen`); a build that fails
    withdraws them unmarked (a build that would have gone on might ask for them)."""
    from types import SimpleNamespace

    from builders.engine import build

    def graphs_built(*_args):
        if fails:
            raise RuntimeError("a lowering that fails")
        return False

    for name, stand_in in [("lower", lambda *_args: SimpleNamespace()), ("_send_round_ahead", lambda *_args: {}),
                           ("_build_graphs", graphs_built), ("_choose_by_timing", lambda *_args: False),
                           ("_conv_signatures", lambda *_args: {})]:
        monkeypatch.setattr(build, name, stand_in)
    cache = TimingCache(tmp_path / "cache.json", {"gpu": "x"})
    backend = SimpleNamespace(cache=cache, cold_weights=False,
                              compiler=SimpleNamespace(withdraw_ahead=lambda: [NamedSignature("unasked")]))
    try:
        build.lower_and_choose(backend, SimpleNamespace(nodes=[]), torch.nn.Identity(), set(), {}, {}, {},  # type: ignore[arg-type]
                               value_shapes={})
    except RuntimeError:
        assert fails
    assert cache.unforeseen("unasked") is not fails


@pytest.mark.parametrize(("foreseen", "built", "marked"), [({"a", "b"}, {"a", "b"}, True), (set(), set(), True),
                                                           ({"a", "b"}, {"a"}, False)])
def test_the_graphs_no_build_of_a_study_asked_for_are_marked_once_the_builds_are_done(tmp_path, monkeypatch,
                                                                                      foreseen, built, marked):
    """`CudnnBackend.builds_done`: what the plan compiler's `close` withdrew unasked is marked and saved, so the
    next run does not foresee it; not where a build whose round was foreseen failed or never ran (an interrupted
    study): it would have asked for its graphs."""
    from types import SimpleNamespace

    cudnn_backend = pytest.importorskip("builders.engine.cudnn_backend")
    monkeypatch.setattr(cudnn_backend, "end_compile_workers", lambda: None)
    path, header = tmp_path / "cache.json", {"gpu": "x"}
    instance = object.__new__(cudnn_backend.CudnnBackend)
    instance.context = SimpleNamespace(cache=TimingCache(path, header),
                                       compiler=SimpleNamespace(close=lambda: [NamedSignature("foreseen")], device=0))
    instance._foreseen_builds, instance._built = foreseen, built
    instance._premade = {"cudnn-fp8-no-se": (StandInTwin("cudnn-fp8-no-se"), 1.0)}  # its build never took it
    instance.builds_done()
    assert TimingCache(path, header).unforeseen("foreseen") is marked
    assert instance._premade == {}


def test_the_engine_tells_both_worker_kinds_to_end_when_its_last_build_is_done(monkeypatch):
    """`CudnnBackend.builds_ending`: the plan compiler's close begun and Inductor's pools asked to end, neither
    waited for (`builds_done` waits)."""
    from types import SimpleNamespace

    cudnn_backend = pytest.importorskip("builders.engine.cudnn_backend")
    asked: list[str] = []
    monkeypatch.setattr(cudnn_backend, "begin_ending_compile_workers", lambda: asked.append("inductor"))
    instance = object.__new__(cudnn_backend.CudnnBackend)
    instance.context = SimpleNamespace(compiler=SimpleNamespace(begin_close=lambda: asked.append("plans"),
                                                                close=lambda: asked.append("waited")))
    instance.builds_ending()
    assert sorted(asked) == ["inductor", "plans"]

    def no_thread() -> None:
        raise RuntimeError("can't start new thread")

    instance.context.compiler.begin_close = no_thread
    instance.builds_ending()  # the variant's build is over: nothing raised (builds_done ends them, waiting)


@pytest.mark.parametrize("fails", [False, True])
def test_a_build_that_succeeds_is_counted_and_one_that_fails_withdraws_what_it_sent_ahead(fails):
    """`CudnnBackend.build` around `_build`: a success joins the builds `builds_done` counts; a failure anywhere in
    it (before its lowering too) leaves nothing it sent ahead queued, and is not counted."""
    from types import SimpleNamespace

    from sessions.documents.plan import VariantPlan

    cudnn_backend = pytest.importorskip("builders.engine.cudnn_backend")
    withdrawn: list[bool] = []
    instance = object.__new__(cudnn_backend.CudnnBackend)
    instance.context = SimpleNamespace(compiler=SimpleNamespace(withdraw_ahead=lambda: withdrawn.append(True)))
    instance._built = set()

    def build(variant, _calibration):
        if fails:
            raise MemoryError("out of memory copying the model")
        return variant.name

    instance._build = build
    variant = VariantPlan("fp16", backend="cudnn")
    if fails:
        with pytest.raises(MemoryError):
            instance.build(variant, torch.zeros(1))
    else:
        assert instance.build(variant, torch.zeros(1)) == variant.name
    assert (instance._built, withdrawn) == ((set(), [True]) if fails else ({variant.name}, []))


def recording_backend(monkeypatch, events: list[str], running: bool, calibrates: bool = True):
    """A `CudnnBackend` whose every step of `build` stands in, appending what it does to `events`: the pool running
    or not, the calibration failing unless `calibrates`, and the lowering failing once reached. Its plan: engine
    fp16, FP8 `all` and `no-se`; its twins made early (`_premake_twins`) are recorded by name, not made."""
    from types import SimpleNamespace

    from sessions.documents.plan import VariantPlan

    cudnn_backend = pytest.importorskip("builders.engine.cudnn_backend")
    instance = object.__new__(cudnn_backend.CudnnBackend)
    instance.context = SimpleNamespace(compiler=SimpleNamespace(running=running,
                                                                withdraw_ahead=lambda: events.append("withdrawn")),
                                       static_input=torch.zeros(1))
    instance._quantizer = None
    instance._builds_foreseen = False
    instance._foreseen_builds, instance._built = set(), set()
    instance._foresee_builds = lambda first, *_args: events.append(f"foresaw from {first.name}")
    instance._plain = lambda: (events.append("plain"), (torch.nn.Identity(), []))[1]
    instance._send_ahead_of_calibration = lambda *_args: events.append("sent ahead")
    instance._premade = {}
    instance.plan = SimpleNamespace(variants=[VariantPlan("fp16", backend="cudnn"),
                                              VariantPlan("fp8", "all", (), "cudnn"),
                                              VariantPlan("fp8", "no-se", (), "cudnn")], backend="torch")
    instance._twins_meanwhile = None

    def premake(variants, _calibration):
        if variants:
            events.append(f"twins of {', '.join(v.name for v in variants)}")
        return 0.0

    instance._premake_twins = premake

    def twin(*_args):
        events.append("calibrated")
        if not calibrates:
            raise ValueError("detected inf values in amax")
        return SimpleNamespace()

    instance._twin = twin
    monkeypatch.setattr(cudnn_backend, "trace", lambda *_args: events.append("traced"))
    monkeypatch.setattr(cudnn_backend, "recorded_shapes", lambda *_args: {})

    def lowered(*_args):
        events.append("lowered")
        raise RuntimeError("stand-in stops here")

    monkeypatch.setattr(cudnn_backend, "build_engine", lowered)
    return instance


@pytest.mark.parametrize("running", [True, False])
def test_an_fp8_build_sends_its_first_round_ahead_before_it_calibrates_and_only_to_a_running_pool(monkeypatch,
                                                                                                 running):
    """`CudnnBackend.build`: with the compile workers running (a first build's pool), the later builds' twins are
    made while they compile the foreseen graphs, and the FP8 build's first round goes to them before ModelOpt
    calibrates; without them nothing is foreseen (a warm build starts no workers) and no twin is made early."""
    from sessions.documents.plan import VariantPlan

    events: list[str] = []
    instance = recording_backend(monkeypatch, events, running)
    with pytest.raises(RuntimeError, match="could not build cudnn-fp8-all: RuntimeError: stand-in stops here"):
        instance.build(VariantPlan("fp8", "all", (), "cudnn"), torch.zeros(1))
    ahead, later = (["sent ahead"], ["twins of cudnn-fp8-no-se"]) if running else ([], [])
    # the backend's first build foresees every build's first round; its own twin before the later builds' (the
    # calibration their recipes share is its own); failed: nothing of its own left queued
    assert events == ["plain", "traced", "foresaw from cudnn-fp8-all", *ahead, "calibrated", *later, "lowered",
                      "withdrawn"]
    assert instance._built == set()  # so the graphs foreseen for it are not marked unasked (`builds_done`)
    events.clear()
    with pytest.raises(RuntimeError, match="could not build cudnn-fp16"):
        instance.build(VariantPlan("fp16", None, (), "cudnn"), torch.zeros(1))
    assert events == ["plain", "traced", "lowered", "withdrawn"]  # an fp16 build sends nothing ahead of itself


@pytest.mark.parametrize("regions_compile", [True, False])
def test_a_first_build_makes_one_later_twin_before_it_lowers_and_the_others_while_its_regions_compile(
        monkeypatch, regions_compile):
    """An engine fp16 first build with the workers running: FP8 `all`'s twin before it lowers (the workers compile the
    graphs foreseen), `no-se`'s once its fused regions' compiles are sent (`FusedTactics.while_compiling`, Inductor's
    loader imported first), or, where it sent none, once the engine is built; where the build fails, not at all."""
    from sessions.documents.plan import VariantPlan

    cudnn_backend = pytest.importorskip("builders.engine.cudnn_backend")
    events: list[str] = []
    instance = recording_backend(monkeypatch, events, running=True)
    monkeypatch.setattr(cudnn_backend, "import_loader", lambda: events.append("loader imported"))

    def built(*_args):
        events.append("lowered")
        if regions_compile:
            instance._while_regions_compile()  # as `compile_needed` calls it once the regions are sent
        return object(), [], []

    monkeypatch.setattr(cudnn_backend, "build_engine", built)
    monkeypatch.setattr(cudnn_backend, "_structure_roles", lambda *_args: events.append("roles"))
    instance.structure = None
    with pytest.raises(RuntimeError, match="could not build cudnn-fp16"):  # the stand-in engine does not run
        instance.build(VariantPlan("fp16", None, (), "cudnn"), torch.zeros(1))
    meanwhile = ["loader imported", "twins of cudnn-fp8-no-se"]
    assert events == ["plain", "traced", "foresaw from cudnn-fp16", "twins of cudnn-fp8-all", "lowered",
                      *(meanwhile if regions_compile else ["twins of cudnn-fp8-no-se"]), "roles", "withdrawn"]
    assert instance._twins_meanwhile is None

    events.clear()
    instance._builds_foreseen = False

    def fails(*_args):
        events.append("lowered")
        raise RuntimeError("cuDNN refused every plan")

    monkeypatch.setattr(cudnn_backend, "build_engine", fails)
    with pytest.raises(RuntimeError, match="could not build cudnn-fp16"):
        instance.build(VariantPlan("fp16", None, (), "cudnn"), torch.zeros(1))
    assert events == ["plain", "traced", "foresaw from cudnn-fp16", "twins of cudnn-fp8-all", "lowered", "withdrawn"]
    assert instance._twins_meanwhile is None  # a later wait of another build makes none of them


@pytest.mark.parametrize("regions_compile", [True, False])
def test_a_first_builds_time_leaves_out_the_later_builds_twins_made_before_during_or_after_it(monkeypatch,
                                                                                               regions_compile):
    """`Variant.build_s` of an engine fp16 first build: its own 5 s of lowering, not the 3 s of each later build's twin
    it made (FP8 `all`'s before it lowers, `no-se`'s in its regions' wait or after it), nor a failing import of
    Inductor's loader in that wait (which fails nothing)."""
    from types import SimpleNamespace

    from sessions.documents.plan import VariantPlan

    cudnn_backend = pytest.importorskip("builders.engine.cudnn_backend")
    events: list[str] = []
    instance = recording_backend(monkeypatch, events, running=True)
    clock = [0.0]
    monkeypatch.setattr(cudnn_backend, "time", SimpleNamespace(perf_counter=lambda: clock[0]))

    def premake(variants, _calibration):
        clock[0] += 3.0 * len(variants)
        return 3.0 * len(variants)

    def loader_fails():
        raise ImportError("torch._inductor.compile_fx")

    def built(*_args):
        clock[0] += 5.0
        if regions_compile:
            instance._while_regions_compile()
        return SimpleNamespace(run_once=lambda: None), [], []

    instance._premake_twins = premake
    monkeypatch.setattr(cudnn_backend, "import_loader", loader_fails)
    monkeypatch.setattr(cudnn_backend, "build_engine", built)
    monkeypatch.setattr(cudnn_backend, "_structure_roles", lambda *_args: None)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    instance.structure = None
    instance.context.cache = SimpleNamespace(save=lambda: None)
    instance.context.cudnn = SimpleNamespace(__version__="stand-in", backend_version=lambda: 0)
    result = instance.build(VariantPlan("fp16", None, (), "cudnn"), torch.zeros(1))
    assert clock[0] == 11.0 and result.variant.build_s == 5.0


def test_a_calibration_that_fails_withdraws_what_was_sent_ahead_of_it(monkeypatch):
    """A build that fails leaves nothing queued for the next: the calibration's own error, after the withdrawal."""
    from sessions.documents.plan import VariantPlan

    events: list[str] = []
    instance = recording_backend(monkeypatch, events, running=True, calibrates=False)
    instance._builds_foreseen = True  # not the backend's first build
    with pytest.raises(ValueError, match="inf values in amax"):
        instance.build(VariantPlan("fp8", "all", (), "cudnn"), torch.zeros(1))
    assert events == ["plain", "traced", "sent ahead", "calibrated", "withdrawn"]


def test_foreseeing_that_fails_withdraws_and_leaves_the_build_to_its_own_lowering(monkeypatch):
    """Sending ahead is speculative: where it fails, what it sent is withdrawn and the build is not failed by it."""
    from types import SimpleNamespace

    from sessions.documents.plan import VariantPlan

    cudnn_backend = pytest.importorskip("builders.engine.cudnn_backend")
    events: list[str] = []

    def fails(*_args):
        events.append("foreseen")
        raise KeyError("layer1.0.conv1")

    monkeypatch.setattr(cudnn_backend, "send_first_round_ahead", fails)
    instance = object.__new__(cudnn_backend.CudnnBackend)
    instance.context = SimpleNamespace(compiler=SimpleNamespace(withdraw_ahead=lambda: events.append("withdrawn")))
    instance.structure = SimpleNamespace(layers=[])
    monkeypatch.setattr(cudnn_backend, "variant_selection", lambda *_args: SimpleNamespace(quantized=["conv"]))
    instance._send_ahead_of_calibration(VariantPlan("fp8", "all", (), "cudnn"), None, None, {})
    assert events == ["foreseen", "withdrawn"]


def test_what_is_sent_ahead_of_calibration_is_the_recipes_selection_with_one_key_per_tensor_read(monkeypatch):
    """`_send_ahead_of_calibration` foresees the FP8 layers from the recipe and the model's structure (seresnet18,
    random weights): `no-se` leaves the squeeze-excitation convolutions out, the first block of a stage's first
    convolution and its shortcut read one tensor and share a key, its two convolutions in a row do not."""
    from types import SimpleNamespace

    from builders.models.structure import model_structure
    from sessions.documents.plan import VariantPlan

    cudnn_backend = pytest.importorskip("builders.engine.cudnn_backend")
    timm = pytest.importorskip("timm")
    model = timm.create_model("seresnet18", pretrained=False).eval()
    sent: list[tuple[set[str], dict[str, object]]] = []
    monkeypatch.setattr(cudnn_backend, "send_first_round_ahead",
                        lambda _ctx, _traced, _plain, fp8, keys, _shapes: sent.append((fp8, keys)))
    instance = object.__new__(cudnn_backend.CudnnBackend)
    instance.context = SimpleNamespace()
    instance.structure = model_structure(model, torch.randn(1, 3, 64, 64))
    instance._send_ahead_of_calibration(VariantPlan("fp8", "no-se", (), "cudnn"), None, model, {})
    (fp8, keys), = sent
    assert {"layer2.0.conv1", "layer2.0.conv2", "layer2.0.downsample.0", "layer4.1.conv2"} <= fp8
    assert not [path for path in fp8 if ".se." in path]
    assert keys["layer2.0.conv1"] == keys["layer2.0.downsample.0"]
    assert keys["layer2.0.conv1"] != keys["layer2.0.conv2"]
    assert set(keys) == fp8


def test_the_first_build_foresees_the_first_round_of_each_of_the_backends_builds_in_the_order_built(monkeypatch):
    """`_foresee_builds` (seresnet18, random weights): the round of the build starting, then those of the plan's later
    builds on this backend in order (not PyTorch's variants, nor those before it), each FP8 one with its recipe's
    layers and foreseen keys; a plan of this backend's own leaves out the precisions it does not build; a build
    whose round cannot be foreseen is left out, the others kept."""
    from types import SimpleNamespace

    from builders.models.structure import model_structure
    from sessions.documents.plan import VariantPlan

    cudnn_backend = pytest.importorskip("builders.engine.cudnn_backend")
    timm = pytest.importorskip("timm")
    model = timm.create_model("seresnet18", pretrained=False).eval()
    instance = object.__new__(cudnn_backend.CudnnBackend)
    instance.context = SimpleNamespace()
    instance._foreseen_builds = set()
    instance.structure = model_structure(model, torch.randn(1, 3, 64, 64))
    fp16, fp8_all, no_se = (VariantPlan("fp16", backend="cudnn"), VariantPlan("fp8", "all", (), "cudnn"),
                            VariantPlan("fp8", "no-se", (), "cudnn"))
    instance.plan = SimpleNamespace(variants=[VariantPlan("fp32"), VariantPlan("fp16"), fp16, fp8_all, no_se],
                                    backend="torch")
    refused: set[int] = set()

    def first_round(_ctx, _traced, _plain, fp8, keys, _shapes):
        if len(fp8) in refused:
            raise KeyError("layer1.0.conv1")
        return [(len(fp8), len(keys))]

    monkeypatch.setattr(cudnn_backend, "first_round_graphs", first_round)
    foreseen: list[list[tuple[int, int]]] = []
    monkeypatch.setattr(cudnn_backend, "foresee", lambda _ctx, rounds: foreseen.append(rounds))
    n_all = len(set(cudnn_backend.variant_selection(instance.structure, fp8_all).quantized))
    n_no_se = len(set(cudnn_backend.variant_selection(instance.structure, no_se).quantized))
    assert 0 < n_no_se < n_all
    instance._foresee_builds(fp16, None, model, {})
    instance._foresee_builds(fp8_all, None, model, {})
    assert instance._foreseen_builds == {fp16.name, fp8_all.name, no_se.name}  # what `builds_done` waits for
    refused.add(n_all)
    instance._foreseen_builds = set()
    instance._foresee_builds(fp16, None, model, {})
    assert instance._foreseen_builds == {fp16.name, no_se.name}  # a round not foreseen: its build is not waited for
    assert foreseen == [[[(0, 0)], [(n_all, n_all)], [(n_no_se, n_no_se)]],
                        [[(n_all, n_all)], [(n_no_se, n_no_se)]],
                        [[(0, 0)], [(n_no_se, n_no_se)]]]
    foreseen.clear()
    instance.plan = SimpleNamespace(variants=[VariantPlan("fp32"), VariantPlan("fp16"), VariantPlan("fp8", "no-se")],
                                    backend="cudnn")
    instance._foresee_builds(VariantPlan("fp16"), None, model, {})
    assert foreseen == [[[(0, 0)], [(n_no_se, n_no_se)]]]


def test_a_build_about_to_time_its_regions_ends_inductors_workers_and_holds_the_foreseen_compiles(monkeypatch):
    """The fused tactics' `ask_workers_to_end` on the engine: Inductor's compile workers asked to end, then the
    foreseen plan compiles held (`PlanCompiler.hold_foreseen`), so no worker compiles while regions are timed."""
    from types import SimpleNamespace

    cudnn_backend = pytest.importorskip("builders.engine.cudnn_backend")
    events: list[str] = []
    monkeypatch.setattr(cudnn_backend, "begin_ending_compile_workers", lambda: events.append("inductor's end"))
    cudnn_backend._compiles_end(SimpleNamespace(hold_foreseen=lambda: events.append("held")))()
    assert events == ["inductor's end", "held"]


@dataclasses.dataclass(frozen=True)
class NamedSignature:
    """A stand-in signature: its timing-cache key is its name."""

    name: str

    def key(self) -> str:
        return self.name


def test_foresight_sends_only_the_graphs_neither_made_nor_cached_in_the_order_of_the_builds():
    """`build.foresee`: the first rounds joined in order, less the graphs a build made (or cuDNN refused) and those
    the timing cache holds, so a warm run foresees nothing and starts no workers."""
    from types import SimpleNamespace

    from builders.engine.build import foresee

    sent: list[tuple[list[str], int]] = []
    cached = {"c"}
    a, b, c, d, e, r = map(NamedSignature, "abcder")
    backend = SimpleNamespace(graphs={a: object(), r: "refused"}, plan_limit=4,
                              cache=SimpleNamespace(holds_plan=lambda key: key in cached, unforeseen=lambda key: False),
                              compiler=SimpleNamespace(foresee=lambda sigs, limit: sent.append(
                                  ([sig.name for sig in sigs], limit))))
    foresee(backend, [[a, b, c], [r, d, b], [e]])  # type: ignore[arg-type]
    assert sent == [(["b", "d", "b", "e"], 4)]  # repeats are the compiler's to drop (`PlanCompiler.foresee`)
    cached.update("bde")
    foresee(backend, [[a, b, c], [r, d], [e]])  # type: ignore[arg-type]
    assert sent[1] == ([], 4)


class StandInTwin:
    """A twin as the engine's backend handles it: where it was parked and its scales moved."""

    def __init__(self, name: str) -> None:
        self.name, self.parked, self.scales_on = name, False, "cuda"

    def park(self) -> None:
        self.parked = True

    def scales_to(self, device: str) -> None:
        self.scales_on = device


def test_a_first_run_makes_the_later_fp8_builds_twins_early_and_each_build_takes_its_own(monkeypatch):
    """`_premake_twins` (a first run's first build, the workers compiling): the twin of each later FP8 build on this
    backend, not the build starting nor an fp16 or PyTorch variant, made and parked with its scales in host memory;
    `_twin_for` hands each build its own, scales on the device, once, with the seconds it took; a build without one
    makes its twin then, an fp16 build none; a twin that cannot be made is left to its build."""
    from types import SimpleNamespace

    from sessions.documents.plan import VariantPlan

    cudnn_backend = pytest.importorskip("builders.engine.cudnn_backend")
    instance = object.__new__(cudnn_backend.CudnnBackend)
    instance._premade = {}
    fp16, fp8_all, no_se, pointwise = (VariantPlan("fp16", backend="cudnn"), VariantPlan("fp8", "all", (), "cudnn"),
                                       VariantPlan("fp8", "no-se", (), "cudnn"),
                                       VariantPlan("fp8", "pointwise", (), "cudnn"))
    instance.plan = SimpleNamespace(variants=[VariantPlan("fp16"), fp16, fp8_all, VariantPlan("fp8", "all"), no_se,
                                              pointwise], backend="torch")
    made: list[str] = []

    def twin(variant, _calibration):
        made.append(variant.name)
        if variant.recipe == "pointwise":
            raise RuntimeError("ModelOpt: no quantizer")
        time.sleep(0.01)
        return StandInTwin(variant.name)

    monkeypatch.setattr(instance, "_twin", twin)
    seconds = instance._premake_twins(instance._later_fp8_builds(fp16), torch.zeros(1))
    assert made == [fp8_all.name, no_se.name, pointwise.name]  # the torch backend's FP8 variant is not this one's
    assert set(instance._premade) == {fp8_all.name, no_se.name}
    assert all(t.parked and t.scales_on == "cpu" for t, _ in instance._premade.values())
    assert seconds >= sum(s for _, s in instance._premade.values()) >= 0.02
    taken, taken_s = instance._twin_for(no_se, torch.zeros(1))
    assert taken.name == no_se.name and taken.scales_on == "cuda" and taken_s >= 0.01
    assert no_se.name not in instance._premade
    made.clear()
    again, again_s = instance._twin_for(no_se, torch.zeros(1))  # taken once: a second build makes its own
    assert made == [no_se.name] and again is not taken and again_s == 0.0
    assert instance._twin_for(fp16, torch.zeros(1)) == (None, 0.0) and made == [no_se.name]
    made.clear()
    instance._premade.clear()
    instance._premake_twins(instance._later_fp8_builds(fp8_all), torch.zeros(1))  # its own twin: made by its build
    assert made == [no_se.name, pointwise.name]
