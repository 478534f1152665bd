"""Generated fused tactics: a region of the steps the engine runs as PyTorch ops (builders.engine.fusion_regions:
pointwise chains, normalizations, concatenations, interpolations, fp16 linears and what surrounds them,
squeeze-excitation blocks with their 1x1 convolutions) run by kernels Inductor generates for it (default options:
no CUDA graphs of its own, the engine captures its whole forward in one), timed against the engine's
own steps for the same region; the faster runs, as TensorRT's Myelin and pointwise fusion are tactics its builder
times. Values that leave a region in the middle are outputs of its function, written beside the fused step's own.

- The region's subgraph is made functional (`subgraph`): its values from outside and its layers' weights are the
  inputs, so one compiled function serves every region of one signature (ops, constants, shapes, strides, dtypes,
  torch's version), compiled once per study, the signatures that cover the most steps first, while the study's
  compiles have taken less than COMPILE_BUDGET_S seconds (a compile under way finishes; the regions left keep the
  engine's steps, and the variant's notes say how many and why).
- Every signature a build needs compiles first; then Inductor's compile workers are asked to shut down
  (`begin_ending_compile_workers`); the engine's timer (`kernels.time_execution`) waits until they have ended before
  it times a region, and the backend once every variant is built, so none is alive while the regions, and later the
  study's rows, are timed; a build whose regions' times are all held times nothing and waits for nothing.
- Both candidates run on the same scratch tensors (the shapes and strides one eager forward of the engine made), each
  captured in a CUDA graph as the engine runs it, the replays timed by `kernels.time_execution`
  (`kernels.time_captured`).
- A region's function is compiled without dynamo (`region_artifacts.compile_region`: traced to ATen operations,
  then Inductor's `standalone_compile`), and the compiled code kept in the engine's timing cache
  (`TimingCache.put_compiled_region`), so a later build loads it instead of compiling. Where a build
  needs several signatures compiled and the plan compiler's workers can run (`FusedTactics.workers`), they compile
  them side by side and hand the code back. Code loaded from the cache or a worker runs only where it computes
  what the region computes on the scratch tensors (`region_artifacts.disagreement`); else it is compiled here.
- The two times are kept in the engine's timing cache (an entry of its own, `plans.FUSED_PREFIX`), so a later build
  re-times nothing and loads only the regions whose fused tactic won.
- A fused region is one layer named as TensorRT names a fused layer, its layers' names joined by ' + ': its kernels
  are launched in one range, so the profiler can attribute them to the region only, never to one of its layers. Where
  the engine's steps win, each layer records the fused tactic it was timed against (`attrs["fusion"]`).
- A region also offered wider (`fusion_regions.widened`: with the convolutions before or after it) runs in the form
  whose fused tactic saves more time against the engine's steps; the other form keeps its steps and says why
  (`OUTDONE`). Where both forms' times are held, the one that saves less is not compiled, unless the other then
  does not compile.
- Offered from `--opt-level` 1 (level 0 times one tactic per layer), and only where every layer of the region runs
  fp16 and writes fp16 (`fusion_regions`): a layer a recipe quantizes keeps the precision chosen for it, and joins
  where that is fp16, its record kept in the fused layer's (`sessions.documents.covers`).
"""

from __future__ import annotations

import concurrent.futures
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch
import torch.fx

from builders.engine.compiler import ANSWER_TIMEOUT_S
from builders.engine.fusion_regions import (
    SQUEEZE_EXCITATION,
    SUBGRAPH,
    Region,
    find_regions,
    fused_sequence,
    fused_step,
    widened,
)
from builders.engine.graph import TracedModel
from builders.engine.kernels import time_captured
from builders.engine.lowering import Program, Step
from builders.engine.plans import TimingCache, tactics_timed
from builders.engine.region_artifacts import COMPILE_WORDS, compile_region, disagreement, load_region
from builders.engine.region_graph import Subgraph, as_recorded, module_tensors, subgraph
from builders.engine.shaped_tracer import DTYPE_WORDS, TensorSpec
from builders.engine.tactics import Tactic
from builders.pytorch.inductor_workers import begin_ending_compile_workers
from sessions.documents.covers import cover
from sessions.documents.errors import joined_message
from sessions.documents.model import Layer
from sessions.documents.vocab import COVERS

if TYPE_CHECKING:
    from builders.engine.runtime import CudnnEngine

INDUCTOR, ENGINE_STEPS = "Inductor", "engine steps"  # the two tactics of a region
COMPILE_BUDGET_S = 120.0  # seconds of compiling after which a study compiles no new signature
NOT_COMPILED = "not compiled: the study's compile budget was spent"  # why a region past the budget keeps its steps
CHOSEN_UNFUSED = "engine steps chosen by timing"  # how a layer says its region's fused tactic lost
OUTDONE = "the region's other form runs fused: it saves more"  # why one of a region's two forms is not chosen
TIMED, EARLIER, CACHED = "timed", "timed before in this study", "timing cache"  # where a region's times came from
# where a signature's compiled code came from: the timing cache, a compile worker, or compiled in the build's process
FROM_CACHE, FROM_WORKERS, COMPILED_HERE = "loaded from the timing cache", "from the compile workers", "compiled here"
REGION_KINDS = {SQUEEZE_EXCITATION: "SqueezeExcitation fused by Inductor",  # a fused layer's kind; else POINTWISE_KIND
                SUBGRAPH: "Ops fused by Inductor"}
POINTWISE_KIND = "PointWise ops fused by Inductor"
Runner = Callable[[dict[str, Any]], Any]
Timer = Callable[[str, Callable[[], object]], float]  # (INDUCTOR or ENGINE_STEPS, one run) -> microseconds
# (a region's function, example arguments) -> its compiled function and the compiled code's bytes (or None)
Compiler = Callable[[torch.fx.GraphModule, list[torch.Tensor]], tuple[Callable[..., Any], bytes | None]]
Loader = Callable[[bytes], Callable[..., Any]]  # compiled code's bytes -> its function (raises where they do not load)
Answer = concurrent.futures.Future[Any]  # a worker's answer for one region: the compiled code's bytes, or why none
# {signature: (the region's function, the specs of its arguments)} -> the workers' answers, by signature ({}: none)
Workers = Callable[[dict[str, tuple[torch.fx.GraphModule, list[TensorSpec]]]], Mapping[str, Answer]]


def no_workers(_jobs: dict[str, tuple[torch.fx.GraphModule, list[TensorSpec]]]) -> Mapping[str, Answer]:
    """Where no worker process can compile: every region compiles in the build's process."""
    return {}


def time_region(_library: str, run: Callable[[], object]) -> float:
    """A region's run (fused, or the engine's steps) timed as the engine runs it (`kernels.time_captured`)."""
    return time_captured(run)


@dataclass
class FusedTactics:
    """What a study's builds share: each signature's compiled function (or why it has none) and, where it has one,
    where its code came from (`origins`: FROM_CACHE, FROM_WORKERS or COMPILED_HERE), its two times timed in this
    study, the seconds getting the code took against the budget; and how builds time, compile and ask the compile
    workers to end (`ask_workers_to_end`; the timer waits until they have) (stand-ins on the CPU)."""

    compiled: dict[str, Callable[..., Any] | str] = field(default_factory=dict)
    origins: dict[str, str] = field(default_factory=dict)
    times: dict[str, tuple[float, float]] = field(default_factory=dict)
    compile_s: float = 0.0
    budget_s: float = COMPILE_BUDGET_S
    timer: Timer = time_region
    compiler: Compiler = compile_region
    loader: Loader = load_region
    workers: Workers = no_workers
    workers_hung: Callable[[], None] = lambda: None  # a worker's answer did not come in time: end the workers' pool
    # the first of a build's region compiles sent to the workers has answered: the engine pauses the foreseen plan
    # compiles there (`PlanCompiler.pause_foreseen`), so those running end while the regions load
    workers_answering: Callable[[], None] = lambda: None
    # a build's region compiles are sent to the workers and none is waited for yet: the engine's process does there
    # the work that would otherwise follow the wait (the engine: `CudnnBackend._while_regions_compile`)
    while_compiling: Callable[[], None] = lambda: None
    ask_workers_to_end: Callable[[], None] = begin_ending_compile_workers

    def function(self, sub: Subgraph, scratch: list[torch.Tensor], cache: TimingCache | None = None,
                 answer: Answer | None = None) -> Callable[..., Any] | str:
        """`sub`'s compiled function where this study has none yet: the code `cache` holds, else a worker's
        (`answer`, kept in `cache`), where it computes what the region computes on `scratch`; else compiled here
        (and kept in `cache`). Or why there is none (it failed, or the study's compiles took `budget_s` already).
        Getting it counts against the budget, waiting for a worker included."""
        if sub.signature not in self.compiled:
            if self.compile_s >= self.budget_s:
                return f"{NOT_COMPILED} ({self.compile_s:.1f} s of {self.budget_s:.0f} s)"
            started = time.perf_counter()
            args = [*scratch, *sub.tensors]
            found = self._code_loaded(sub, args, cache, answer)
            origin, function = found if found is not None else (COMPILED_HERE, self._compiled(sub, args, cache))
            self.compiled[sub.signature] = function
            if not isinstance(function, str):
                self.origins[sub.signature] = origin
            self.compile_s += time.perf_counter() - started
        return self.compiled[sub.signature]

    def _code_loaded(self, sub: Subgraph, args: list[torch.Tensor], cache: TimingCache | None,
                     answer: Answer | None) -> tuple[str, Callable[..., Any]] | None:
        """`sub`'s function from the code `cache` holds (FROM_CACHE), else from the worker's `answer`
        (FROM_WORKERS; its code is then kept in `cache`), where that code loads and computes what `sub` computes on
        `args`; else None (the caller compiles). The worker's answer is waited for only where the cache has none."""
        loaded = self._loaded(cache.compiled_region(sub.signature) if cache is not None else None, sub, args)
        if loaded is not None:
            return FROM_CACHE, loaded[0]
        loaded = self._loaded(_bytes_of(answer, self.workers_hung), sub, args)
        if loaded is None:
            return None
        if cache is not None:
            cache.put_compiled_region(sub.signature, loaded[1])
        return FROM_WORKERS, loaded[0]

    def _loaded(self, blob: bytes | None, sub: Subgraph, args: list[torch.Tensor]
                ) -> tuple[Callable[..., Any], bytes] | None:
        """The function `blob` holds, with `blob`, where it loads, runs and computes what `sub` computes on `args`
        (`region_artifacts.disagreement`); else None (the caller compiles)."""
        if blob is None:
            return None
        try:
            function = self.loader(blob)
            if disagreement(function, sub.module, args) is not None:
                return None
        except Exception:  # noqa: BLE001  (code that does not load or run is compiled again)
            return None
        _synchronize(args)
        return function, blob

    def _compiled(self, sub: Subgraph, args: list[torch.Tensor], cache: TimingCache | None) -> Callable[..., Any] | str:
        """`sub` compiled here and called once on `args`, its code kept in `cache`; or why it did not compile."""
        try:
            function, blob = self.compiler(sub.module, args)
            with torch.no_grad():
                function(*args)
            _synchronize(args)
        except Exception as exc:  # noqa: BLE001  (a region Inductor cannot compile keeps the engine's steps)
            return f"Inductor: {joined_message(exc, 200)}"
        if blob is not None and cache is not None:
            cache.put_compiled_region(sub.signature, blob)
        return function

    def send_to_workers(self, subs: list[Subgraph], specs: Mapping[str, Any],
                        cache: TimingCache | None) -> Mapping[str, Answer]:
        """The workers' answers for the signatures of `subs` this study has not compiled and `cache` does not hold,
        by signature ({} where no worker can compile them, none is needed, or the study's compile budget is spent:
        nothing would take the answers)."""
        if self.compile_s >= self.budget_s:
            return {}
        jobs = {sub.signature: (sub.module, [*(specs[name] for name in sub.inputs), *map(TensorSpec.of, sub.tensors)])
                for sub in subs if sub.signature not in self.compiled
                and (cache is None or not cache.holds_compiled_region(sub.signature))}
        return self.workers(jobs) if jobs else {}


def settle(answers: Mapping[str, Answer], hung: Callable[[], None], wait: bool = True) -> None:
    """Every worker job of `answers` withdrawn where it has not started (all at once, before any wait: a pool hands
    its next jobs to a worker while one is waited for), then, with `wait`, each one that has waited for (at most
    ANSWER_TIMEOUT_S in all: past it the workers are taken as hung, `hung()`): none compiles, or benchmarks a kernel
    on the GPU (Inductor tunes some while compiling), while the build times its regions. Without `wait` (the build
    is interrupted) nothing is waited for."""
    running = [answer for answer in answers.values() if not answer.cancel()]
    if not wait or not running:
        return
    _, late = concurrent.futures.wait(running, timeout=ANSWER_TIMEOUT_S)
    if late:
        hung()


def _bytes_of(answer: Answer | None, hung: Callable[[], None]) -> bytes | None:
    """A worker's compiled code, or None where there is no answer, it failed, it says why there is none, or it did not
    come within ANSWER_TIMEOUT_S (a worker that hangs: the workers are taken as hung, `hung()`, and the region is
    compiled here)."""
    if answer is None:
        return None
    try:
        result = answer.result(timeout=ANSWER_TIMEOUT_S)
    except concurrent.futures.TimeoutError:
        hung()
        return None
    except Exception:  # noqa: BLE001  (a broken pool, an answer that does not unpickle: compiled here)
        return None
    return result if isinstance(result, bytes) else None


def _synchronize(tensors: list[torch.Tensor]) -> None:
    if any(t.is_cuda for t in tensors):
        torch.cuda.synchronize()


class FusedRunner:
    """A fused region's step: the compiled function on the region's values from outside and its layers' tensors.
    It returns the region's last output (the step's own value) and writes its other outputs into `env` by name, for
    the steps after it that read them, each with the strides the engine's steps recorded for it (`as_recorded`)."""

    def __init__(self, function: Callable[..., Any], sub: Subgraph, outputs: tuple[str, ...]) -> None:
        self.function, self.inputs, self.tensors, self.strides = function, sub.inputs, sub.tensors, sub.strides
        self.outputs = outputs

    def __call__(self, env: dict[str, Any]) -> Any:
        with torch.no_grad():  # compiled without autograd: the same guards on every call, captured or not
            result = self.function(*(env[name] for name in self.inputs), *self.tensors)
        values = [result] if len(self.outputs) == 1 else list(result)
        values = [as_recorded(value, stride) for value, stride in zip(values, self.strides, strict=True)]
        env.update(zip(self.outputs[:-1], values[:-1], strict=True))
        return values[-1]


@dataclass
class Decision:
    """One region's fused tactic: its steps (indices), the subgraph and both tactics timed (None where it was not
    offered: `why`), the tactic that runs, and the function where the fused tactic runs."""

    region: Region
    indices: list[int]
    why: str | None = None
    fused: Tactic | None = None
    unfused: Tactic | None = None
    source: str = TIMED  # where the two times came from: TIMED, EARLIER or CACHED
    held: tuple[float, float] | None = None  # the two times (fused, steps) in microseconds, once known
    function: Callable[..., Any] | None = None
    sub: Subgraph | None = None
    outdone: str | None = None  # why the region's other form runs instead (`prefer`)

    @property
    def runs_fused(self) -> bool:
        return self.function is not None


@dataclass
class Fused:
    """The engine's program, runners and layers with the fused tactics that won in place of their steps; notes."""

    program: Program
    runners: list[tuple[Step, Runner]]
    layers: list[Layer]
    notes: list[str]


def fuse_regions(tactics: FusedTactics, plan_limit: int, cache: TimingCache | None, traced: TracedModel,
                 engine: CudnnEngine, layers: list[Layer]) -> Fused | None:
    """`engine` (built, not yet timed; `layers` its layer table, one per step, which the engine gives up to the
    result: a layer of a region that keeps its steps records there the fused tactic it was timed against) with each
    region's fused tactic where it timed faster than the engine's steps for the region, in the form that saves more
    where the region has two (`prefer`); None where no region is offered one (`--opt-level` 0: `plan_limit` 1; no
    region found)."""
    if not tactics_timed(plan_limit):
        return None
    steps = engine.program.steps
    regions = find_regions(traced.nodes, steps, unpassable(traced))
    if not regions:
        return None
    wider = widened(traced.nodes, steps, regions, unpassable(traced))
    found = [*regions, *wider.values()]
    specs = value_specs(engine, {name for region in found for name in (*region.inputs, *region.outputs)})
    decisions = [prepare(tactics, cache, traced, region, list(region.steps), specs) for region in found]
    forms = [(decisions[position], decisions[len(regions) + k]) for k, position in enumerate(wider)]
    prefer(forms, held=True)
    compile_needed(tactics, decisions, specs, cache)
    compile_stranded(tactics, forms, specs, cache)
    tactics.ask_workers_to_end()  # nothing compiles after this; the timer waits until they have ended
    for decision in decisions:
        choose(tactics, cache, engine, decision, specs)
    prefer(forms)
    replaced = [(d.indices, d) for d in decisions if d.runs_fused]
    program = Program(fused_sequence(steps, [(i, fused_step(d.region, [steps[k] for k in i])) for i, d in replaced]),
                      engine.program.output, engine.program.input)
    fused_runners = [(i, (step, _runner(d))) for (i, d), step in zip(replaced, _new_steps(program, replaced),
                                                                      strict=True)]
    for decision in reversed(decisions):  # a layer in both forms of a region keeps the narrower form's record
        if not decision.runs_fused:
            _keep_fusion(decision, [layers[k] for k in decision.indices])
    other = {id(form): pair[1 - side] for pair in forms for side, form in enumerate(pair)}
    fused_layers = [(i, fused_layer(d, [layers[k] for k in i], other.get(id(d)))) for i, d in replaced]
    return Fused(program, fused_sequence(engine.runners, fused_runners), fused_sequence(layers, fused_layers),
                 notes(tactics, decisions, forms))


def _new_steps(program: Program, replaced: list[tuple[list[int], Decision]]) -> list[Step]:
    """The fused steps of `program`, in the order of `replaced` (each ran where the last of its steps ran)."""
    by_output = {step.node: step for step in program.steps if step.kind == "fused"}
    return [by_output[decision.region.output] for _, decision in replaced]


def _runner(decision: Decision) -> Runner:
    assert decision.function is not None and decision.sub is not None
    return FusedRunner(decision.function, decision.sub, decision.region.outputs)


def unpassable(traced: TracedModel) -> frozenset[str]:
    """The nodes that call a module whose tensors a region's function cannot pass (`module_tensors`): no region
    takes them, so they do not keep the ops around them from fusing."""
    return frozenset(node.name for node in traced.module.graph.nodes if node.op == "call_module"
                     and isinstance(module_tensors(traced.module.get_submodule(str(node.target))), str))


def value_specs(engine: CudnnEngine, names: set[str]) -> dict[str, Any]:
    """The spec of each value `names` holds as one eager forward of `engine` made it: a TensorSpec for a tensor, the
    value itself for anything else (a shape, a number)."""
    specs: dict[str, Any] = {}

    def seen(name: str, value: Any) -> None:
        if name in names:
            specs[name] = TensorSpec.of(value) if isinstance(value, torch.Tensor) else value

    engine.observe(seen)
    return specs


def prepare(tactics: FusedTactics, cache: TimingCache | None, traced: TracedModel, region: Region,
            indices: list[int], specs: Mapping[str, Any]) -> Decision:
    """`region`'s decision before anything compiles: its function (or why it has none) and its two times where this
    study or the timing cache holds them."""
    decision = Decision(region, indices)
    sub = subgraph(traced, region, specs)
    if isinstance(sub, str):
        decision.why = sub
        return decision
    decision.sub = sub
    decision.held, decision.source = tactics.times.get(sub.signature), EARLIER
    if decision.held is None and cache is not None:
        decision.held, decision.source = cache.fused_times(sub.signature), CACHED
    if decision.held is None:
        decision.source = TIMED
    return decision


def compile_needed(tactics: FusedTactics, decisions: list[Decision], specs: Mapping[str, Any],
                   cache: TimingCache | None = None) -> None:
    """Compiles each signature that must be timed or runs (its held times say the fused tactic won), those covering
    the most steps first, within the study's compile budget: loaded from `cache` where it holds the code, else sent
    to the workers at once and taken back in that order (`FusedTactics.function`). Once they are sent,
    `FusedTactics.while_compiling` is called, before any wait (its seconds are not the compiles'); then
    `FusedTactics.workers_answering` once the first of them has answered, before any is taken back (`workers_hung`
    where none answers within ANSWER_TIMEOUT_S)."""
    weight: dict[str, int] = {}
    first: dict[str, Decision] = {}
    for decision in decisions:
        if decision.sub is None or decision.outdone or not (decision.held is None or _fused_wins(decision.held)):
            continue
        signature = decision.sub.signature
        weight[signature] = weight.get(signature, 0) + len(decision.indices)
        first.setdefault(signature, decision)
    order = sorted(weight, key=lambda key: -weight[key])
    subs = [sub for sub in (first[signature].sub for signature in order) if sub is not None]
    answers = tactics.send_to_workers(subs, specs, cache)
    try:
        if answers:  # none back in time: the workers are taken as hung (each region then compiles here)
            tactics.while_compiling()
            waiting_from = time.perf_counter()
            done, _ = concurrent.futures.wait(answers.values(), ANSWER_TIMEOUT_S, concurrent.futures.FIRST_COMPLETED)
            tactics.compile_s += time.perf_counter() - waiting_from  # waiting for a worker counts against the budget
            (tactics.workers_answering if done else tactics.workers_hung)()
        for sub in subs:
            tactics.function(sub, _scratch(sub, specs), cache, answers.get(sub.signature))
    except BaseException:  # Ctrl-C included: the jobs not started are withdrawn, none is waited for
        settle(answers, tactics.workers_hung, wait=False)
        raise
    settle(answers, tactics.workers_hung)


def compile_stranded(tactics: FusedTactics, forms: list[tuple[Decision, Decision]], specs: Mapping[str, Any],
                     cache: TimingCache | None = None) -> None:
    """Each form outdone before compiling (`prefer` on held times) whose other form then did not compile (it failed,
    or the study's compile budget was spent) is no longer outdone and is compiled (within the budget), so a region
    that has a form to run runs it."""
    for pair in forms:
        for loser, winner in (pair, pair[::-1]):
            failed = winner.sub is not None and isinstance(tactics.compiled.get(winner.sub.signature), str)
            if loser.outdone and failed and loser.sub is not None:
                loser.outdone = loser.why = None
                tactics.function(loser.sub, _scratch(loser.sub, specs), cache)


def _scratch(sub: Subgraph, specs: Mapping[str, Any]) -> list[torch.Tensor]:
    return [specs[name].scratch() for name in sub.inputs]


def _fused_wins(held: tuple[float, float]) -> bool:
    return held[0] < held[1]


def choose(tactics: FusedTactics, cache: TimingCache | None, engine: CudnnEngine, decision: Decision,
           specs: Mapping[str, Any]) -> None:
    """`decision`'s two times (held, or timed now on scratch tensors and kept in the study and the cache) and the
    tactic that runs: the fused function where it timed faster and was compiled."""
    sub = decision.sub
    if sub is None:
        return
    function = tactics.compiled.get(sub.signature, NOT_COMPILED)
    if decision.held is None and sub.signature in tactics.times:  # a region of this signature was timed just now
        decision.held, decision.source = tactics.times[sub.signature], EARLIER
    if decision.held is None:
        if isinstance(function, str):
            decision.why = function
            return
        constants = {name: specs[name] for name in decision.region.inputs if name not in sub.inputs}
        try:
            decision.held = _time_both(tactics.timer, function, sub, _scratch(sub, specs), engine, decision.indices,
                                       constants)
        except Exception as exc:  # noqa: BLE001  (a candidate that does not run or capture is not chosen)
            decision.why = f"not timed: {joined_message(exc, 200)}"
            return
        tactics.times[sub.signature] = decision.held
        if cache is not None:
            cache.put_fused(sub.signature, *decision.held)
    word = _precision(specs.get(decision.region.output))
    decision.fused = Tactic(INDUCTOR, word, word, decision.held[0], sub.signature)
    decision.unfused = Tactic(ENGINE_STEPS, word, word, decision.held[1])
    if fusion_reason(decision.fused, decision.unfused) is None:
        if isinstance(function, str):
            decision.why = function
        else:
            decision.function = function


def prefer(forms: list[tuple[Decision, Decision]], held: bool = False) -> None:
    """Of each region's two forms (narrower, wider), the one whose fused tactic saves more microseconds against the
    engine's steps is chosen, and the other is `outdone` (it keeps its steps, saying why); a tie keeps the narrower.
    Where neither saves anything, both keep their own choice. `held`: before anything compiles, from the times held
    (a form with no times held yet decides nothing, and the form outdone then is not compiled unless the other does
    not compile: `compile_stranded`); else among the forms that now run fused (compiled, and faster than their
    steps)."""
    for narrow, wide in forms:
        if narrow.held is None or wide.held is None:
            continue
        saved = [_saved(form) if held or form.runs_fused else 0.0 for form in (narrow, wide)]
        if max(saved) <= 0:
            continue
        winner, loser = (wide, narrow) if saved[1] > saved[0] else (narrow, wide)
        loser.outdone = f"{OUTDONE} ({_saved(winner):.1f} us saved against {_saved(loser):.1f} us)"
        loser.why, loser.function = loser.outdone, None


def _saved(form: Decision) -> float:
    """The microseconds `form`'s fused tactic saves against its steps, as its times say (negative where it is
    slower)."""
    assert form.held is not None
    return form.held[1] - form.held[0]


def _precision(output: Any) -> str:
    """A region's precision word: that of the value its fused step holds (fp16 where that is not a float tensor)."""
    return DTYPE_WORDS.get(output.dtype, "fp16") if isinstance(output, TensorSpec) else "fp16"


def _time_both(timer: Timer, function: Callable[..., Any], sub: Subgraph, scratch: list[torch.Tensor],
               engine: CudnnEngine, indices: list[int], constants: dict[str, Any]) -> tuple[float, float]:
    """The fused function's and the engine's steps' microseconds on the same scratch tensors (the steps also read
    the region's `constants`, which the function holds written in)."""
    values = {**engine.consts, **constants, **dict(zip(sub.inputs, scratch, strict=True))}
    runners = [engine.runners[k] for k in indices]

    def unfused() -> object:
        env = dict(values)
        for step, run in runners:
            env[step.node] = run(env)
        return env[runners[-1][0].node]

    with torch.no_grad():
        return timer(INDUCTOR, lambda: function(*scratch, *sub.tensors)), timer(ENGINE_STEPS, unfused)


def fusion_reason(fused: Tactic, unfused: Tactic) -> str | None:
    """Why the region keeps the engine's steps (they are at least as fast as the fused tactic: a tie keeps them, no
    generated code runs for nothing), or None where the fused tactic is faster and runs."""
    if fused.time_us < unfused.time_us:
        return None
    return (f"{CHOSEN_UNFUSED}: {unfused.time_us:.1f} us against {fused.time_us:.1f} us for Inductor's fused kernels "
            f"({fused.time_us / max(unfused.time_us, 1e-9):.2f}x)")


def _keep_fusion(decision: Decision, layers: list[Layer]) -> None:
    """Each layer of a region that keeps the engine's steps records the fused tactic it was timed against, or why it
    was offered none."""
    record = fusion_record(decision)
    for layer in layers:
        layer.attrs["fusion"] = record


def fusion_record(decision: Decision) -> dict[str, Any]:
    """A region's fused tactic as its layers' `attrs["fusion"]` holds it: the region, both tactics timed (library,
    precision, output, time, the signature as the fused tactic's plan), the one that runs and why, where the times
    came from; or why none was offered."""
    record: dict[str, Any] = {"region": decision.region.kind, "layers": len(decision.indices)}
    if decision.fused is None or decision.unfused is None:
        return {**record, "offered": False, "why": decision.why}
    reason = fusion_reason(decision.fused, decision.unfused) or decision.why
    record.update(tactics=[decision.fused.record(), decision.unfused.record()],
                  chosen=INDUCTOR if decision.runs_fused else ENGINE_STEPS, times=decision.source)
    return {**record, "why": reason} if reason else record


def fused_layer(decision: Decision, layers: list[Layer], other: Decision | None = None) -> Layer:
    """The one layer a fused region runs as (its kernels are launched in one range): named as TensorRT names a fused
    layer, `layers`' names joined by ' + ', each of them listed with its kind and tactic (and, for one its recipe
    asked for in FP8, its record: `sessions.documents.covers`); where the region had another form (`other`: narrower
    or wider), that form's record under `attrs["fusion"]["other form"]`."""
    assert decision.fused is not None
    kind = REGION_KINDS.get(decision.region.kind, POINTWISE_KIND)
    layer = Layer(name=" + ".join(inner.name for inner in layers), kind=f"{kind} ({decision.fused.precision})",
                  op="elementwise", precision=decision.fused.precision,  # type: ignore[arg-type]
                  tactic=f"{COMPILE_WORDS}: {decision.fused.plan}")
    record = fusion_record(decision)
    if other is not None:
        record["other form"] = fusion_record(other)
    layer.attrs = {"asked": "fp16", "fusion": record,
                   COVERS: [cover(inner, decision.fused.library) for inner in layers]}
    return layer


def _code_origins(tactics: FusedTactics) -> str:
    """How many signatures have compiled code this study, by where it came from ("10 signatures' code: 10 loaded
    from the timing cache"; "1 signature's code: ...")."""
    made = list(tactics.origins.values())
    counts = ", ".join(f"{made.count(origin)} {origin}" for origin in (FROM_CACHE, FROM_WORKERS, COMPILED_HERE)
                       if origin in made)
    owner = "signature's" if len(made) == 1 else "signatures'"
    return f"{len(made)} {owner} code" + (f": {counts}" if counts else "")


def notes(tactics: FusedTactics, decisions: list[Decision], forms: list[tuple[Decision, Decision]]) -> list[str]:
    """The variant's notes on fused tactics, each region counted once (by the form that runs, else by its own form
    where that is not outdone, else by the other): regions by kind and how many run fused, where the times came from,
    what compiling cost this study so far against its budget, the regions the budget left to the engine's steps (how
    many, how many steps), why other regions were offered none (the first reason); and of the regions offered in
    two forms (`forms`: narrower, wider), which form runs fused."""
    wider = {id(narrow): wide for narrow, wide in forms}
    wides = {id(wide) for _, wide in forms}
    leads = [_lead(decision, wider.get(id(decision))) for decision in decisions if id(decision) not in wides]
    offered = [d for d in leads if d.fused is not None]
    lines = []
    if offered:
        kinds = ", ".join(f"{sum(d.region.kind == k for d in offered)} {k}" for k in sorted({d.region.kind
                                                                                           for d in offered}))
        sources = ", ".join(f"{sum(d.source == s for d in offered)} {s}" for s in (TIMED, EARLIER, CACHED)
                            if any(d.source == s for d in offered))
        lines.append(f"fused tactics ({COMPILE_WORDS}) against the engine's steps for {kinds} "
                     f"regions: {sum(d.runs_fused for d in offered)} run fused, "
                     f"{sum(not d.runs_fused for d in offered)} the engine's steps (times: {sources}); "
                     f"{_code_origins(tactics)} in {tactics.compile_s:.1f} s so far this study "
                     f"(budget {tactics.budget_s:.0f} s)")
    unfused = [d for d in leads if not d.runs_fused and (d.why or "").startswith(NOT_COMPILED)]
    if unfused:
        lines.append(f"{len(unfused)} regions ({sum(len(d.indices) for d in unfused)} steps) keep the engine's steps: "
                     f"{unfused[0].why}")
    left = {id(d) for d in unfused}
    unoffered = [d for d in leads if d.fused is None and id(d) not in left]
    if unoffered:
        lines.append(f"{len(unoffered)} regions were offered no fused tactic: {unoffered[0].why}")
    failed = [d for d in offered if not d.runs_fused and d.why and id(d) not in left]
    if failed:
        lines.append(f"{len(failed)} regions whose fused tactic timed faster keep the engine's steps: {failed[0].why}")
    if forms:
        wide = sum(pair[1].runs_fused for pair in forms)
        narrow = sum(pair[0].runs_fused for pair in forms)
        lines.append(f"{len(forms)} regions were also offered wider, with the convolutions before or after them: "
                     f"{wide} run wider, {narrow} as they are, {len(forms) - wide - narrow} keep their steps")
    return lines


def _lead(narrow: Decision, wide: Decision | None) -> Decision:
    """The form that counts a region in the notes: the one that runs fused, else the narrower where it is not
    outdone, else the wider."""
    if wide is None or narrow.runs_fused or (not wide.runs_fused and not narrow.outdone):
        return narrow
    return wide
