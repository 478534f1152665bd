"""A fused region's compiled code kept as bytes: compiled without dynamo, loaded back, kept in the timing cache,
compiled by workers, and refused where it does not compute what the region computes."""

from __future__ import annotations

import concurrent.futures
import hashlib
import os
import pickle
import threading
import time
from collections.abc import Callable

import pytest
import torch
import torch.fx
import torch.nn.functional as F

from builders.engine import compiler as plan_compiler
from builders.engine.compiler import PlanCompiler, _compile_region
from builders.engine.fused_tactics import INDUCTOR, FusedTactics
from builders.engine.plans import PRUNE_AFTER_S, TimingCache
from builders.engine.region_artifacts import compile_region, disagreement, load_region
from builders.engine.shaped_tracer import TensorSpec
from tests.builders.test_engine_fusion import (
    INPUT,
    Block,
    LinearGate,
    Mlp,
    Recalibrate,
    Widths,
    counting,
    eager,
    engine_of,
    fused_engine,
    stand_in_times,
)
from tests.builders.test_engine_plans import HandDrivenPool


class Gate(torch.nn.Module):
    """A squeeze-excitation region as the engine makes one: weights as inputs, an activation module called."""

    def __init__(self) -> None:
        super().__init__()
        self.act = torch.nn.ReLU()

    def forward(self, x: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor) -> torch.Tensor:
        s = self.act(F.conv2d(x.mean((2, 3), keepdim=True), w1))
        return x * torch.sigmoid(F.conv2d(s, w2))


class TwoOut(torch.nn.Module):
    """A region two values leave: the middle one and the last."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = torch.tanh(x)
        return y, torch.relu(y) + x


def gate_args() -> list[torch.Tensor]:
    torch.manual_seed(0)
    return [torch.randn(1, 8, 5, 5), torch.randn(4, 8, 1, 1), torch.randn(8, 4, 1, 1)]


def reference(module: torch.nn.Module, args: list[torch.Tensor]):
    """What the region computes, from the module as written (not traced, not compiled)."""
    with torch.no_grad():
        return module(*args)


@pytest.mark.slow
def test_a_region_compiled_without_dynamo_and_loaded_from_its_bytes_computes_what_the_region_computes():
    args = gate_args()
    module = torch.fx.symbolic_trace(Gate())
    function, blob = compile_region(module, args)
    assert blob is not None
    expected = reference(Gate(), args)
    torch.testing.assert_close(function(*args), expected)
    loaded = load_region(blob)
    torch.testing.assert_close(loaded(*args), expected)
    assert disagreement(loaded, module, args) is None
    with pytest.raises(Exception):  # noqa: B017  (whatever Inductor raises on damaged bytes)
        load_region(blob[: len(blob) // 2])


@pytest.mark.slow
def test_code_is_loaded_with_one_compile_thread_and_the_callers_setting_is_back_after(monkeypatch):
    from torch._inductor import config

    args = gate_args()
    module = torch.fx.symbolic_trace(Gate())
    _, blob = compile_region(module, args)
    assert blob is not None
    artifact_class = torch._inductor.CompiledArtifact
    real_load, threads_while_loading = artifact_class.load, []

    def recording_load(*load_args, **load_kwargs):
        threads_while_loading.append(config.compile_threads)
        return real_load(*load_args, **load_kwargs)

    monkeypatch.setattr(artifact_class, "load", staticmethod(recording_load))
    monkeypatch.setattr(config, "compile_threads", 4)
    loaded = load_region(blob)
    assert threads_while_loading == [1]
    assert config.compile_threads == 4  # the caller's setting is back once the code is loaded
    torch.testing.assert_close(loaded(*args), reference(Gate(), args))


@pytest.mark.slow
def test_a_region_two_values_leave_returns_both_in_order_compiled_and_loaded():
    args = [torch.randn(2, 3)]
    module = torch.fx.symbolic_trace(TwoOut())
    function, blob = compile_region(module, args)
    assert blob is not None
    for run in (function, load_region(blob)):
        got = run(*args)
        assert isinstance(got, tuple) and len(got) == 2
        for mine, theirs in zip(got, reference(TwoOut(), args), strict=True):
            torch.testing.assert_close(mine, theirs)


def test_code_that_computes_another_regions_values_disagrees():
    args = gate_args()
    module = torch.fx.symbolic_trace(Gate())
    assert disagreement(module, module, args) is None
    assert "differs" in disagreement(lambda x, w1, w2: x * 0.5, module, args)
    assert "(1, 4, 5, 5)" in disagreement(lambda x, w1, w2: x[:, :4], module, args)
    assert "outputs" in disagreement(lambda x, w1, w2: (x, x), module, args)
    nan = disagreement(lambda x, w1, w2: module(x, w1, w2).masked_fill(x > 2, float("nan")), module, args)
    assert nan is not None and "NaN" in nan
    close = disagreement(lambda x, w1, w2: module(x, w1, w2) * 1.001, module, args)
    assert close is None  # within the tolerance of another kernel's rounding


def test_the_timing_cache_keeps_a_regions_code_by_its_hash_and_refuses_altered_bytes(tmp_path):
    path = tmp_path / "cache.json"
    cache = TimingCache(path, {"gpu": "x"})
    cache.put_compiled_region("fused SE a", b"compiled code")
    cache.save()
    reloaded = TimingCache(path, {"gpu": "x"})
    assert reloaded.compiled_region("fused SE a") == b"compiled code"
    assert reloaded.compiled_region("fused SE b") is None
    stored = reloaded.plans_dir / f"{hashlib.sha256(b'compiled code').hexdigest()}.inductor"
    assert stored.read_bytes() == b"compiled code"
    stored.write_bytes(b"compiled codf")
    assert reloaded.compiled_region("fused SE a") is None


@pytest.mark.parametrize("name", ["../../etc/passwd", "ABC", 7, None])
def test_an_entry_naming_its_code_by_anything_but_a_digest_is_a_miss(tmp_path, name):
    path = tmp_path / "cache.json"
    cache = TimingCache(path, {"gpu": "x"})
    cache.put_compiled_region("fused SE a", b"code")
    key = next(iter(cache.entries))
    cache.entries[key] = {"artifact": name}
    cache.changed.add(key)
    cache.save()
    assert TimingCache(path, {"gpu": "x"}).compiled_region("fused SE a") is None


def test_code_files_no_entry_names_are_pruned_once_old_and_named_ones_kept(tmp_path):
    path = tmp_path / "cache.json"
    cache = TimingCache(path, {"gpu": "x"})
    cache.put_compiled_region("fused SE a", b"kept")
    orphan = cache.plans_dir / f"{hashlib.sha256(b'orphan').hexdigest()}.inductor"
    orphan.write_bytes(b"orphan")
    old = time.time() - PRUNE_AFTER_S - 60
    for file in cache.plans_dir.iterdir():
        os.utime(file, (old, old))
    cache.save()
    assert not orphan.exists()
    assert TimingCache(path, {"gpu": "x"}).compiled_region("fused SE a") == b"kept"


class Counts:
    """Stand-ins for Inductor's compiler and loader that count their calls; the "code" is the region's own function,
    looked up by the bytes it was kept as (`wrong` makes every load return a function that computes nothing like
    it)."""

    def __init__(self, wrong: bool = False) -> None:
        self.compiles, self.loads, self.wrong = 0, 0, wrong
        self.functions: dict[bytes, Callable[..., object]] = {}

    def compiler(self, module: torch.fx.GraphModule, _args: list[torch.Tensor]):
        self.compiles += 1
        blob = hashlib.sha256(module.code.encode()).digest()
        self.functions[blob] = module
        return module, blob

    def loader(self, blob: bytes) -> Callable[..., object]:
        self.loads += 1
        if self.wrong:
            return lambda *args: args[0] * 3.0
        return self.functions[blob]


def fused_runs(engine) -> int:
    return sum(layer.attrs.get("fusion", {}).get("chosen") == INDUCTOR for layer in engine.layers())


def said_of_code(fused) -> str:
    """What the fused tactics' note says of the signatures' code: the words between the times' source and " in "."""
    (note,) = [line for line in fused.notes if line.startswith("fused tactics")]
    return note.split("); ", 1)[1].split(" in ", 1)[0]


def first_build(path, counts: Counts, **workers) -> FusedTactics:
    """A first build's fused tactics, its cache saved at `path`; the tactics a later build starts from (`workers`:
    its stand-in workers, if any)."""
    tactics = FusedTactics(timer=stand_in_times(1.0, 5.0), compiler=counts.compiler, loader=counts.loader)
    fused_engine(Block(Recalibrate), tactics, cache=(cache := TimingCache(path, {"gpu": "stand-in"})))
    cache.save()
    return FusedTactics(timer=stand_in_times(1.0, 5.0), compiler=counts.compiler, loader=counts.loader, **workers)


def test_a_later_build_loads_the_code_the_cache_holds_and_compiles_nothing(tmp_path):
    counts = Counts()
    later = first_build(tmp_path / "timing.json", counts)
    assert (counts.compiles, counts.loads) == (1, 0)
    cache = TimingCache(tmp_path / "timing.json", {"gpu": "stand-in"})
    engine, fused = fused_engine(Block(Recalibrate), later, cache=cache)
    assert (counts.compiles, counts.loads) == (1, 1) and fused_runs(engine) == 1
    assert said_of_code(fused) == "1 signature's code: 1 loaded from the timing cache"


def test_code_from_the_cache_that_computes_something_else_is_compiled_again(tmp_path):
    counts = Counts()
    later = first_build(tmp_path / "timing.json", counts)
    counts.wrong = True
    model = Block(Recalibrate)
    engine, fused = fused_engine(model, later, cache=TimingCache(tmp_path / "timing.json", {"gpu": "stand-in"}))
    assert (counts.compiles, counts.loads) == (2, 1) and fused_runs(engine) == 1
    assert said_of_code(fused) == "1 signature's code: 1 compiled here"
    x = torch.randn(1, 16, 8, 8)
    with torch.no_grad():
        torch.testing.assert_close(engine.infer(x), model.eval()(x))


def answered(value: object) -> concurrent.futures.Future:
    future: concurrent.futures.Future = concurrent.futures.Future()
    future.set_result(value)
    return future


def test_code_a_worker_compiled_runs_is_kept_in_the_cache_and_a_workers_refusal_compiles_here(tmp_path):
    counts = Counts()
    sent: list[dict] = []

    def workers(jobs):
        sent.append(jobs)
        answers = {}
        for signature, (module, specs) in jobs.items():
            assert all(isinstance(spec, TensorSpec) for spec in specs)
            answers[signature] = answered(counts.compiler(module, [])[1])
        return answers

    cache = TimingCache(tmp_path / "timing.json", {"gpu": "stand-in"})
    tactics = FusedTactics(timer=stand_in_times(1.0, 5.0), compiler=eager, loader=counts.loader, workers=workers)
    engine, fused = fused_engine(Block(Recalibrate), tactics, cache=cache)
    assert len(sent) == 1 and counts.loads == 1 and fused_runs(engine) == 1
    assert said_of_code(fused) == "1 signature's code: 1 from the compile workers"
    (signature,) = sent[0]
    assert cache.compiled_region(signature) is not None

    refused = FusedTactics(timer=stand_in_times(1.0, 5.0), compiler=counts.compiler, loader=counts.loader,
                           workers=lambda jobs: {s: answered("Inductor: no kernel") for s in jobs})
    before = counts.compiles
    engine, fused = fused_engine(Block(Recalibrate), refused)
    assert counts.compiles == before + 1 and fused_runs(engine) == 1
    assert said_of_code(fused) == "1 signature's code: 1 compiled here"


def test_the_workers_answering_is_told_once_the_first_answer_is_back_and_before_any_is_taken(tmp_path):
    """`FusedTactics.workers_answering` (the engine pauses its foreseen compiles there) is called once, after the
    first of the regions' answers is back and before the build loads any; not where nothing was sent."""
    counts, events = Counts(), []
    pending: concurrent.futures.Future = concurrent.futures.Future()

    def workers(jobs):
        ((signature, (module, _specs)),) = jobs.items()
        threading.Timer(0.2, lambda: (events.append("answered"),
                                      pending.set_result(counts.compiler(module, [])[1]))).start()
        return {signature: pending}

    def loader(blob):
        events.append("loaded")
        return counts.loader(blob)

    cache = TimingCache(tmp_path / "timing.json", {"gpu": "stand-in"})
    tactics = FusedTactics(timer=stand_in_times(1.0, 5.0), compiler=eager, loader=loader, workers=workers,
                           workers_answering=lambda: events.append("told"))
    fused_engine(Block(Recalibrate), tactics, cache=cache)
    assert events == ["answered", "told", "loaded"]
    assert tactics.compile_s >= 0.2  # the wait for the first answer counts against the compile budget
    events.clear()
    cached = FusedTactics(timer=stand_in_times(1.0, 5.0), compiler=eager, loader=counts.loader, workers=workers,
                          workers_answering=lambda: events.append("told"))
    fused_engine(Block(Recalibrate), cached, cache=cache)
    assert events == []  # the code came from the cache: nothing sent, nobody told


def test_the_build_works_while_its_regions_compile_and_that_work_is_not_counted_as_compiling(tmp_path):
    """`FusedTactics.while_compiling` (the engine makes later builds' twins there) is called once the regions are sent
    and before any answer is waited for; its seconds are not the compile budget's; not called where nothing was
    sent."""
    counts, events = Counts(), []

    def workers(jobs):
        ((signature, (module, _specs)),) = jobs.items()
        pending: concurrent.futures.Future = concurrent.futures.Future()
        threading.Timer(0.1, lambda: (events.append("answered"),
                                      pending.set_result(counts.compiler(module, [])[1]))).start()
        return {signature: pending}

    def meanwhile():
        events.append("meanwhile")
        time.sleep(1.0)

    cache = TimingCache(tmp_path / "timing.json", {"gpu": "stand-in"})
    tactics = FusedTactics(timer=stand_in_times(1.0, 5.0), compiler=eager, loader=counts.loader, workers=workers,
                           workers_answering=lambda: events.append("told"), while_compiling=meanwhile)
    fused_engine(Block(Recalibrate), tactics, cache=cache)
    assert events == ["meanwhile", "answered", "told"]
    assert tactics.compile_s < 0.9  # the answer came during the 1 s of work: nothing waited for
    events.clear()
    cached = FusedTactics(timer=stand_in_times(1.0, 5.0), compiler=eager, loader=counts.loader, workers=workers,
                          while_compiling=meanwhile)
    fused_engine(Block(Recalibrate), cached, cache=cache)
    assert events == []  # the code came from the cache: nothing sent, no wait to fill


def test_workers_that_answer_no_region_in_time_are_taken_as_hung_and_the_regions_compile_here(monkeypatch):
    """No answer within ANSWER_TIMEOUT_S: `workers_hung` (the engine ends the pool), never `workers_answering`, and
    each region compiles in the build's process."""
    from builders.engine import fused_tactics

    monkeypatch.setattr(fused_tactics, "ANSWER_TIMEOUT_S", 0.1)
    counts, events = Counts(), []
    tactics = FusedTactics(timer=stand_in_times(1.0, 5.0), compiler=counts.compiler, loader=counts.loader,
                           workers=lambda jobs: {s: concurrent.futures.Future() for s in jobs},
                           workers_answering=lambda: events.append("told"), workers_hung=lambda: events.append("hung"))
    engine, _ = fused_engine(Block(Recalibrate), tactics)
    assert events[0] == "hung" and "told" not in events
    assert counts.compiles == 1 and fused_runs(engine) == 1


def test_regions_whose_code_the_cache_holds_are_not_sent_to_the_workers(tmp_path):
    sent: list[dict] = []
    later = first_build(tmp_path / "timing.json", Counts(), workers=lambda jobs: sent.append(jobs) or {})
    fused_engine(Block(Recalibrate), later, cache=TimingCache(tmp_path / "timing.json", {"gpu": "stand-in"}))
    assert sent == []


@pytest.mark.slow
def test_a_worker_compiles_a_region_from_the_specs_of_its_arguments_into_bytes_that_load():
    args = gate_args()
    module = torch.fx.symbolic_trace(Gate())
    blob = _compile_region(0, pickle.dumps(module), [TensorSpec.of(a) for a in args])
    assert isinstance(blob, bytes)
    torch.testing.assert_close(load_region(blob)(*args), reference(Gate(), args))
    assert "missing" in _compile_region(0, pickle.dumps(module), [TensorSpec.of(args[0])])  # why, not a raise


def sign_by_rank(x: torch.Tensor) -> torch.Tensor:
    """A function whose code branches on its input's rank: a graph calling it cannot be traced again on unpickling."""
    return x if x.dim() > 2 else -x


def unrebuildable() -> torch.fx.GraphModule:
    """A region's function that pickles but does not unpickle (unpickling a GraphModule traces its code again)."""
    graph = torch.fx.Graph()
    graph.output(graph.call_function(sign_by_rank, (graph.placeholder("x"),)))
    return torch.fx.GraphModule(torch.nn.Module(), graph)


class Locked(torch.nn.Module):
    """A module holding what does not pickle."""

    def __init__(self) -> None:
        super().__init__()
        self.lock = threading.Lock()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + 1


def unpicklable() -> torch.fx.GraphModule:
    """A region's function calling a module that does not pickle."""
    graph, root = torch.fx.Graph(), torch.nn.Module()
    root.add_module("held", Locked())
    graph.output(graph.call_module("held", (graph.placeholder("x"),)))
    return torch.fx.GraphModule(root, graph)


def test_a_region_that_does_not_unpickle_is_its_own_answer_not_a_raise():
    with pytest.raises(Exception):  # noqa: B017  (what torch.fx raises is its own)
        pickle.loads(pickle.dumps(unrebuildable()))
    answer = _compile_region(0, pickle.dumps(unrebuildable()), [TensorSpec.of(torch.randn(2, 3))])
    assert isinstance(answer, str) and answer


@pytest.mark.slow
def test_regions_sent_to_a_real_pool_come_back_as_bytes_that_load(monkeypatch):
    monkeypatch.setattr(plan_compiler, "worker_count", lambda jobs: 2)
    args = gate_args()
    specs = [TensorSpec.of(a) for a in args]
    compiler = PlanCompiler(0)
    try:
        answers = compiler.submit_regions({"a": (torch.fx.symbolic_trace(Gate()), specs),
                                           "b": (torch.fx.symbolic_trace(TwoOut()), [TensorSpec.of(args[0])]),
                                           "c": (unrebuildable(), [TensorSpec.of(args[0])]),
                                           "d": (unpicklable(), [TensorSpec.of(args[0])])})
        assert "d" not in answers  # its function does not pickle: compiled in the engine's process
        assert isinstance(answers["c"].result(timeout=300), str)  # its own answer: the pool and the others go on
        first = answers["a"].result(timeout=300)
        assert isinstance(first, bytes) and isinstance(answers["b"].result(timeout=300), bytes)
        torch.testing.assert_close(load_region(first)(*args), reference(Gate(), args))
    finally:
        compiler.close()


def test_no_region_is_sent_where_too_few_to_spread_or_the_pool_is_broken(monkeypatch):
    monkeypatch.setattr(plan_compiler, "worker_count", lambda jobs: 0)
    assert PlanCompiler(0).submit_regions({"a": (torch.fx.symbolic_trace(TwoOut()), [])}) == {}
    monkeypatch.setattr(plan_compiler, "worker_count", lambda jobs: 2)
    started: list[HandDrivenPool] = []
    monkeypatch.setattr(plan_compiler, "_new_pool",
                        lambda workers: started.append(HandDrivenPool(workers)) or started[-1])
    broken = PlanCompiler(0)
    for _ in range(plan_compiler.RESTARTS + 1):
        assert broken.submit_regions({"a": (torch.fx.symbolic_trace(TwoOut()), [])})  # a pool runs, then breaks
        broken.break_pool()
    assert broken.submit_regions({"a": (torch.fx.symbolic_trace(TwoOut()), [])}) == {}
    assert len(started) == plan_compiler.RESTARTS + 1


class Pool:
    """A stand-in pool whose jobs the test finishes or leaves pending, recording what was sent and withdrawn."""

    def __init__(self) -> None:
        self.sent: list[str] = []
        self.futures: list[concurrent.futures.Future] = []

    def __call__(self, jobs):
        answers = {}
        for signature in jobs:
            future: concurrent.futures.Future = concurrent.futures.Future()
            if not self.sent:  # the first job's worker answers at once (it could not compile): compiled here
                future.set_result("Inductor: no kernel")
            self.sent.append(signature)
            self.futures.append(future)
            answers[signature] = future
        return answers


def test_past_the_budget_no_region_is_sent_and_no_job_is_left_pending_when_the_regions_are_timed():
    pool = Pool()
    calls: list[str] = []

    def timer(library, run):
        assert all(f.done() for f in pool.futures), "a worker job was left while a region was timed"
        calls.append(library)
        return 1.0 if library == INDUCTOR else 5.0

    spent = FusedTactics(timer=timer, compiler=eager, loader=Counts().loader, workers=pool, budget_s=0.0)
    fused_engine(Block(Recalibrate), spent)
    assert pool.sent == [] and calls == []  # nothing compiled, nothing sent, nothing timed
    tactics = FusedTactics(timer=timer, compiler=eager, loader=Counts().loader, workers=pool, budget_s=1e-9)
    tactics.compile_s = 0.0
    fused_engine(Widths(), tactics)  # twenty signatures sent; the budget ends after the first compile
    assert len(pool.sent) == 20 and sum(f.cancelled() for f in pool.futures) == 19


def _nap(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


def test_settle_withdraws_every_job_not_started_at_once_on_a_real_pool_and_says_when_one_hangs(monkeypatch):
    from builders.engine import fused_tactics

    hung: list[bool] = []
    with concurrent.futures.ProcessPoolExecutor(2) as pool:
        answers = {str(k): pool.submit(_nap, 2.0) for k in range(8)}
        while not any(a.running() for a in answers.values()):  # two jobs run, at most one more is queued
            time.sleep(0.05)
        fused_tactics.settle(answers, lambda: hung.append(True))
        assert sum(a.cancelled() for a in answers.values()) >= 4 and all(a.done() for a in answers.values())
        assert hung == []
        monkeypatch.setattr(fused_tactics, "ANSWER_TIMEOUT_S", 0.2)
        slow = {"x": pool.submit(_nap, 2.0)}
        time.sleep(0.5)
        fused_tactics.settle(slow, lambda: hung.append(True))
        assert hung == [True]
        late = pool.submit(_nap, 2.0)
        while not late.running():
            time.sleep(0.05)
        fused_tactics.settle({"y": late}, lambda: hung.append(True), wait=False)
        assert hung == [True] and not late.done()  # interrupted: nothing waited for


def test_regions_that_do_not_pickle_start_no_pool(monkeypatch):
    started: list[HandDrivenPool] = []
    monkeypatch.setattr(plan_compiler, "_new_pool",
                        lambda workers: started.append(HandDrivenPool(workers)) or started[-1])
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(16)))
    compiler = PlanCompiler(0)
    spec = [TensorSpec.of(torch.randn(2, 3))]
    assert compiler.submit_regions({name: (unpicklable(), spec) for name in "abcd"}) == {}
    assert started == []  # four jobs asked, none sendable: fewer than a pool is started for


@pytest.mark.slow
@pytest.mark.parametrize("model", [lambda: Block(LinearGate), Mlp])
def test_regions_with_linears_are_compiled_by_real_workers_and_the_engine_computes_what_the_model_computes(
        model, monkeypatch):
    """The path a first build takes on a GPU machine of several cores: the engine's own regions (linears among their
    layers) sent to a real pool, each compiled there and loaded here; none compiled in the engine's process."""
    monkeypatch.setattr(plan_compiler, "worker_count", lambda jobs: 2)
    torch.manual_seed(0)
    built, x = model(), torch.randn(INPUT)
    unfused, _ = engine_of(built)
    calls: list[str] = []
    compiler = PlanCompiler(0)
    try:
        tactics = FusedTactics(timer=stand_in_times(1.0, 5.0), compiler=counting(calls),
                               workers=compiler.submit_regions, workers_hung=compiler.break_pool)
        engine, fused = fused_engine(built, tactics)
    finally:
        compiler.close()
    assert fused is not None and [s for s in engine.program.steps if s.kind == "fused"]
    assert calls == [] and not compiler.has_broken(compiler.pools)  # every region's code came from a worker
    with torch.no_grad():
        torch.testing.assert_close(engine.infer(x), unfused.infer(x), rtol=1e-5, atol=1e-5)
