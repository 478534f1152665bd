"""Binding a lowered program to kernels: cuDNN graphs (shared by signature, plans chosen by timing) or, where timed
faster, the plan of another graph of the same convolution (scaled by ones, or a 1x1 convolution as a matmul), or a
convolution's tactic of another library (a cuBLASLt GEMM, ATen's depthwise dispatch), FP8 GEMMs, quantize kernels and
the fp16 PyTorch ops, re-lowering where cuDNN refuses; and the engine's layer table."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

import torch
import torch.fx

from builders.engine.compiler import PlanCompiler
from builders.engine.conv_tactics import (
    LIBRARY_KINDS,
    companions,
    library_conv,
    offered,
    time_library,
)
from builders.engine.fused_tactics import FusedTactics, fuse_regions
from builders.engine.graph import TracedModel, record_run
from builders.engine.kernels import (
    CAPTURED_TIMING,
    ConvGraph,
    ConvLayer,
    ConvSignature,
    Fp8Linear,
    build_graph,
    time_captured,
)
from builders.engine.lowering import Program, Step, lower
from builders.engine.plans import QUANTIZE_PREFIX, REFUSED, UNASKED, TimingCache
from builders.engine.runtime import CudnnEngine
from builders.engine.tactics import (
    CUDNN,
    GRAPH_LIBRARIES,
    QUANTIZE_LAYER,
    Tactic,
    fastest,
    input_reason,
    output_reason,
    precision_reason,
)
from builders.fp8.quantizer import Quantizer
from sessions.documents.errors import joined_message
from sessions.documents.model import Layer
from sessions.documents.options import FP8_LAYERS_TIMED
from sessions.documents.vocab import FP16_BY_TIMING, FP16_REFUSED, precision_as_run

if TYPE_CHECKING:
    from builders.engine.twin import Twin

Runner = Callable[[dict[str, Any]], Any]
# re-lowerings after refusals (FP8 -> fp16 -> PyTorch op, FP8 output -> quantize layer) and choices by timing
LOWERING_ROUNDS = 10
Timed = dict[str, dict[tuple[str, str, str], dict[str, Any]]]  # layer -> (library, precision, output) -> tactic


@dataclass
class BuildContext:
    """What binding needs from the backend: cuDNN, the graphs built so far (shared by the variants), the plans'
    cache and count, the workers that compile plans, one workspace for every graph (layers run one at a time), the
    quantize kernel, how layers a recipe quantizes get their precision (`--fp8-layers`: timed or kept), and the
    tactics of other libraries timed so far by signature and library (microseconds, or why it did not run)."""

    cudnn: Any
    handle: Any
    static_input: torch.Tensor
    plan_limit: int
    cache: TimingCache
    compiler: PlanCompiler
    quantizer: Callable[[], Quantizer]
    fp8_layers: str = FP8_LAYERS_TIMED
    graphs: dict[ConvSignature, ConvGraph | str] = field(default_factory=dict)
    workspace: list[torch.Tensor] = field(default_factory=list)
    quantize_us: dict[tuple[int, ...], float] = field(default_factory=dict)  # the quantize layer's time by shape
    library_us: dict[tuple[ConvSignature, str], float | str] = field(default_factory=dict)
    fusion: FusedTactics = field(default_factory=FusedTactics)  # fused tactics: compiled functions, times
    # whether convolutions' tactics are timed with their weights read from memory (`weight_residency.weights_cold`
    # of the model: one answer for every variant of a study), in their signatures (`ConvSignature.cold_weights`)
    cold_weights: bool = False


def static_refusals(plain: torch.nn.Module, fp8: set[str]) -> dict[str, str]:
    """Layers without an FP8 (or any cuDNN) kernel, known before any graph is built."""
    refused: dict[str, str] = {}
    for path, module in plain.named_modules():
        if isinstance(module, torch.nn.Conv2d):
            if module.padding_mode != "zeros" or isinstance(module.padding, str):
                reason = f"padding {module.padding_mode} / {module.padding!r} is not a cuDNN convolution padding"
                refused[path] = refused[f"{path}@fp16"] = reason
        elif (isinstance(module, torch.nn.Linear) and path in fp8
              and (module.in_features % 16 or module.out_features % 16)):
            refused[path] = (f"torch._scaled_mm needs in and out features divisible by 16 "
                                 f"(got {module.in_features} -> {module.out_features})")
        elif isinstance(module, torch.nn.modules.conv._ConvNd) and path in fp8:  # a convolution, not a Conv2d
            refused[path] = (f"a {type(module).__name__}, not a Conv2d: the engine's convolutions are Conv2d's, as "
                             "cuDNN graphs; it runs as a PyTorch op")
    return refused


def unexplained_fp16(program: Program, fp8: set[str]) -> list[str]:
    """Recipe layers that would run in fp16 without a recorded reason: the engine refuses to build with any."""
    steps = {s.name: s for s in program.steps if s.kind in ("conv", "linear", "torch")}
    return sorted(path for path in fp8 if path in steps and steps[path].precision != "fp8" and not steps[path].fallback)


def unlowered(program: Program, fp8: set[str]) -> list[str]:
    """Recipe layers with no step of their own (inside a module run as one PyTorch call), sorted: not a conv or
    linear step, nor a PyTorch op asked for in FP8 (a recipe layer the engine runs as one says why)."""
    lowered = {s.name for s in program.steps if s.kind in ("conv", "linear") or s.asked == "fp8"}
    return sorted(fp8 - lowered)


def _fp16_by_choice(program: Program) -> list[Step]:
    """The layers asked for in FP8 that run fp16 because their fp16 tactic timed faster."""
    return [s for s in program.steps if precision_as_run(s.asked, s.precision, s.fallback) == FP16_BY_TIMING]


def build_engine(backend: BuildContext, traced: TracedModel, plain: torch.nn.Module, twin: Twin | None,
                 value_shapes: dict[str, tuple[int, ...]]) -> tuple[CudnnEngine, list[Layer], list[str]]:
    """The engine of `plain` (fp16, BatchNorm folded as the recipe folds it; `traced` its graph, `value_shapes` its
    values' shapes: `recorded_shapes`), FP8 where `twin` (the simulated variant of its recipe) quantizes, with its
    scales; its layer table and notes. Regions the engine runs as several steps (squeeze-excitation blocks,
    pointwise chains) run Inductor's fused kernels where those time faster (`builders.engine.fused_tactics`).

    With `backend.fp8_layers` timed (the default), a quantized convolution whose fp16 tactic is faster than its best
    FP8 tactic runs fp16; with either, a convolution writes FP8 for its readers only where that is faster than
    writing fp16 and quantizing apart (`builders.engine.tactics`); every tactic timed for a choice is in its layer's
    `tactics`."""
    fp8 = set(twin.quantized) if twin is not None else set()
    scales = twin.scales if twin is not None else {}
    graphs_before = dataclasses.replace(backend.compiler.ledger)
    keys: dict[str, object] = {path: round(scale[0], 12) for path, scale in scales.items()}
    refused = static_refusals(plain, fp8)
    timed_before = set(backend.library_us)  # the context is shared by the study's variants: this one's are the rest
    shapes = conv_input_shapes(traced, value_shapes)
    program, timed, output_refused = lower_and_choose(backend, traced, plain, fp8, keys, refused, shapes,
                                                      value_shapes=value_shapes)
    runners, layers = _bind(backend, program, traced, plain, scales, shapes)
    for layer in layers:
        if layer.name in timed:
            layer.attrs["tactics"] = list(timed[layer.name].values())
        if layer.name in output_refused:
            layer.attrs["output_choice"] = output_refused[layer.name]
    consts = constants(traced, program)
    notes = [f"{path}: run as one PyTorch call, not traced into ({reason})" for path, reason in traced.leaves.items()]
    silent = unexplained_fp16(program, fp8)
    if silent:
        raise RuntimeError(f"{len(silent)} FP8 layers would run in fp16 without a reason: {', '.join(silent[:5])}")
    hidden = unlowered(program, fp8)
    if hidden:
        notes.append(f"{len(hidden)} of {len(fp8)} layers the recipe quantizes were not lowered (inside modules run as "
                     f"one PyTorch call, in fp16): {', '.join(hidden[:8])}{' ...' if len(hidden) > 8 else ''}")
    chosen = _fp16_by_choice(program)
    if chosen:
        notes.append(f"{len(chosen)} of {len(fp8)} layers the recipe quantizes run fp16: their fp16 tactic timed "
                     f"faster than their best FP8 one (--fp8-layers kept runs them in FP8)")
    fallbacks = [s for s in program.steps if precision_as_run(s.asked, s.precision, s.fallback) == FP16_REFUSED]
    if fallbacks:
        notes.append(f"{len(fallbacks)} layers asked for in FP8 ran in fp16 (each layer says why)")
    notes += library_notes(backend, timed_before)
    made = backend.compiler.ledger.since(graphs_before).words()
    notes += [made] if made else []
    engine = CudnnEngine(runners, program, consts, _frees(program, traced), backend.static_input, layers,
                         twin)
    try:
        fused = fuse_regions(backend.fusion, backend.plan_limit, backend.cache, traced, engine, layers)
    finally:  # the foreseen compiles its timing held (`cudnn_backend._compiles_end`)
        backend.compiler.resume_foreseen()
    if fused is not None:
        engine.rebind(fused.program, fused.runners, _frees(fused.program, traced), fused.layers)
        layers, notes = fused.layers, notes + fused.notes
    return engine, layers, notes


def recorded_shapes(backend: BuildContext, traced: TracedModel) -> dict[str, tuple[int, ...]]:
    """The shape of each value of `traced` (`graph.record_run`), run once on the engine's static input in fp16."""
    return record_run(traced, backend.static_input.to(device="cuda", dtype=torch.float16)).shapes


def foreseen_scale_keys(fp8: set[str], reads: Mapping[str, Hashable]) -> dict[str, object]:
    """The input-scale key (`lowering.lower`'s `scale_keys`) of each of `fp8` before calibration: layers that read
    one tensor (`reads`: layer -> the tensor it reads, as `ModelStructure` keys it) calibrate one amax from it, and
    the recipe's shared input scale gives them one too, so they share a key; every other layer has its own."""
    return {path: ("reads", reads[path]) if path in reads else ("layer", path) for path in fp8}


def first_round_graphs(backend: BuildContext, traced: TracedModel, plain: torch.nn.Module, fp8: set[str],
                       scale_keys: Mapping[str, object],
                       value_shapes: dict[str, tuple[int, ...]]) -> list[ConvSignature]:
    """The graphs the first round of lowering `plain` (`traced`) with `fp8` asks for (`round_graphs`), in order.
    `scale_keys`: as foreseen before calibration (`foreseen_scale_keys`)."""
    program = lower(traced.nodes, fp8, scale_keys, static_refusals(plain, fp8), {}, value_shapes)
    sigs = _conv_signatures(program, plain, conv_input_shapes(traced, value_shapes), backend.cold_weights)
    return round_graphs(sigs.values(), backend.plan_limit, backend.fp8_layers, backend.graphs)


def send_first_round_ahead(backend: BuildContext, traced: TracedModel, plain: torch.nn.Module, fp8: set[str],
                           scale_keys: Mapping[str, object], value_shapes: dict[str, tuple[int, ...]]) -> None:
    """The first round's graphs (`first_round_graphs`) sent to a running pool now (`_send_ahead`), so that they
    compile during what a build does before it lowers (an FP8 build's calibration). A graph sent that the build,
    lowering with its calibrated keys, never asks for is withdrawn when its graphs are made (`lower_and_choose`) and
    counted in the ledger. A graph marked as not to be foreseen (`mark_unforeseen`) is not sent."""
    _send_ahead(backend, _foreseeable(backend, first_round_graphs(backend, traced, plain, fp8, scale_keys,
                                                                   value_shapes)))


def foresee(backend: BuildContext, rounds: Iterable[list[ConvSignature]]) -> None:
    """The graphs of `rounds` (the first rounds of the study's builds, `first_round_graphs`, in the order they will be
    built) neither made nor in the timing cache, nor marked there as not to be foreseen (`mark_unforeseen`), sent to
    the workers as foreseen (`PlanCompiler.foresee`: a pool started where they are enough to spread), so that a later
    build's graphs compile while the builds before it run; a run whose graphs are all cached sends none."""
    sigs = _foreseeable(backend, [sig for graphs in rounds for sig in graphs])
    backend.compiler.foresee(_to_compile(backend, sigs), backend.plan_limit)


def _foreseeable(backend: BuildContext, sigs: list[ConvSignature]) -> list[ConvSignature]:
    """Those of `sigs` the timing cache does not mark as not to be foreseen (`mark_unforeseen`), in order."""
    return [sig for sig in sigs if not backend.cache.unforeseen(sig.key())]


def mark_unforeseen(backend: BuildContext, sigs: Iterable[ConvSignature], why: str) -> None:
    """Each of `sigs` marked in the timing cache as not to be foreseen, and why (`TimingCache.put_unforeseen`): a
    graph cuDNN refused (REFUSED), or one sent ahead that no build of a study that built its variants asked for
    (UNASKED). Neither holds a plan, so foresight would otherwise send it to the workers in every run."""
    for sig in sigs:
        backend.cache.put_unforeseen(sig.key(), why)


def library_notes(backend: BuildContext, timed_before: set[tuple[ConvSignature, str]]) -> list[str]:
    """The variant's note on the tactics of other libraries than cuDNN that its build timed and that did not run
    (the first reason); `timed_before`: the tactics an earlier variant of the study had timed (theirs, not this
    one's). How many layers each library runs is no note: the views count it from the layers the session holds
    (`sessions.analyses.precision_choice.library_line`)."""
    failed = sorted({reason for key, reason in backend.library_us.items()
                     if isinstance(reason, str) and key not in timed_before})
    return [f"{len(failed)} tactics of other libraries than cuDNN did not run: {failed[0]}"] if failed else []


def lower_and_choose(backend: BuildContext, traced: TracedModel, plain: torch.nn.Module, fp8: set[str],
                     keys: dict[str, object], refused: dict[str, str],
                     shapes: dict[str, tuple[int, ...]], *,
                     value_shapes: dict[str, tuple[int, ...]]) -> tuple[Program, Timed, dict[str, str]]:
    """The program the engine runs: lowered, its graphs built (a layer cuDNN refuses is lowered again without it),
    then lowered again after each round of choices by timing until none changes (each layer's precision with
    `backend.fp8_layers` timed; where a convolution writes FP8 for its readers, with either).
    Returns it with the tactics timed for each layer (its library's choice included, where other libraries than
    cuDNN offer one) and why each conv that could write FP8 writes fp16. `shapes`: each convolution's input shape;
    `value_shapes`: each node's (`graph.record_run`), so that an add that broadcasts is not fused."""
    output_refused: dict[str, str] = {}
    timed: Timed = {}
    try:
        for _ in range(LOWERING_ROUNDS):
            program = lower(traced.nodes, fp8, keys, refused, output_refused, value_shapes)
            sigs = _send_round_ahead(backend, program, plain, shapes)
            if _build_graphs(backend, program, sigs, refused, output_refused):
                continue
            if not _choose_by_timing(backend, program, plain, shapes, refused, output_refused, timed):
                break
    except BaseException:  # a build that fails leaves nothing queued for the next
        backend.compiler.withdraw_ahead()
        raise
    mark_unforeseen(backend, backend.compiler.withdraw_ahead(), UNASKED)
    for name, sig in _conv_signatures(program, plain, shapes, backend.cold_weights).items():
        tactics = _tactics(backend, sig)
        if len(tactics) > 1:
            _keep_tactics(timed, name, *tactics)
    return program, timed, output_refused


def constants(traced: TracedModel, program: Program) -> dict[str, Any]:
    """What every forward starts from besides the input: attributes the graph reads, optional inputs' defaults."""
    graph = traced.module.graph.nodes
    consts = {node.name: _fetch(traced.module, str(node.target)) for node in graph if node.op == "get_attr"}
    consts.update({node.name: node.args[0] if node.args else None for node in graph
                   if node.op == "placeholder" and node.name != program.input})
    return consts


def _fetch(module: torch.nn.Module, target: str) -> Any:
    value: Any = module
    for part in target.split("."):
        value = getattr(value, part)
    return value


def conv_input_shapes(traced: TracedModel, value_shapes: dict[str, tuple[int, ...]]) -> dict[str, tuple[int, ...]]:
    """The input shape of every convolution the graph calls (a module called twice: its first call's), read from the
    value shapes of one run of the traced graph (`graph.record_run`)."""
    modules = dict(traced.module.named_modules())
    shapes: dict[str, tuple[int, ...]] = {}
    for node in traced.module.graph.nodes:
        if (node.op == "call_module" and isinstance(modules.get(str(node.target)), torch.nn.Conv2d)
                and node.args and isinstance(node.args[0], torch.fx.Node)):
            shapes.setdefault(str(node.target), value_shapes[node.args[0].name])
    return shapes


def _signature(step: Step, conv: torch.nn.Conv2d, shape: tuple[int, ...], cold_weights: bool) -> ConvSignature:
    pair = cast(Callable[[Any], tuple[int, int]], tuple)
    return ConvSignature(step.precision, cast(tuple[int, int, int, int], tuple(shape)), conv.out_channels,
                         pair(conv.kernel_size), pair(conv.stride), pair(conv.padding), pair(conv.dilation),
                         conv.groups, step.epilogue, step.output_fp8, cold_weights=cold_weights)


def _build_graphs(backend: BuildContext, program: Program, sigs: dict[str, ConvSignature], refused: dict[str, str],
                  output_refused: dict[str, str]) -> bool:
    """Every conv step's graph (`sigs`: by step), built once per signature (the plans the cache does not hold sent
    to the workers and taken back in order: `CompileJobs.take`); False where nothing was refused (the program
    stands)."""
    make_graphs(backend, sigs.values())
    changed = False
    for step in program.steps:
        if step.kind != "conv":
            continue
        found = backend.graphs[sigs[step.name]]
        if isinstance(found, str):
            changed = True
            if step.output_fp8:
                output_refused[step.name] = f"FP8 output not fused: {found}"
            elif step.precision == "fp8":
                refused[step.name] = found
            else:
                refused[f"{step.name}@fp16"] = found
    return changed


def _conv_signatures(program: Program, plain: torch.nn.Module, shapes: dict[str, tuple[int, ...]],
                     cold_weights: bool) -> dict[str, ConvSignature]:
    return {step.name: _signature(step, cast(torch.nn.Conv2d, plain.get_submodule(step.name)), shapes[step.name],
                                  cold_weights) for step in program.steps if step.kind == "conv"}


def companions_of(sigs: Iterable[ConvSignature], plan_limit: int,
                  graphs: Mapping[ConvSignature, object]) -> list[ConvSignature]:
    """The companions (`companions`) of `sigs`, in order, as `make_graphs` asks for them: none of a signature whose
    graph cuDNN refused (a reason in `graphs`), whose companions are never asked for."""
    return [companion for sig in dict.fromkeys(sigs) if not isinstance(graphs.get(sig), str)
            for companion in companions(sig, plan_limit).values()]


def with_companions(sigs: Iterable[ConvSignature], plan_limit: int,
                    graphs: Mapping[ConvSignature, object]) -> list[ConvSignature]:
    """`sigs` (each once, in order), then their companions (`companions_of`)."""
    asked = list(dict.fromkeys(sigs))
    return [*asked, *companions_of(asked, plan_limit, graphs)]


def round_graphs(program_sigs: Iterable[ConvSignature], plan_limit: int, fp8_layers: str,
                 graphs: Mapping[ConvSignature, object]) -> list[ConvSignature]:
    """The graphs a round of lowering asks for when cuDNN refuses none, in the order it asks: the program's
    convolutions (`program_sigs`) with their companions, then, with `fp8_layers` timed, each FP8 one in fp16 with
    its companions (`_choose_precisions`), then each of the program's convolutions that writes FP8 writing fp16
    instead, with its companions (`_build_fp16_writers`: what the round asks for where its precisions stand, and
    the graph a later round asks for where a layer keeps FP8 and its readers turn fp16); `graphs`: those made so far
    (`with_companions`)."""
    asked = list(dict.fromkeys(program_sigs))
    in_fp16 = [dataclasses.replace(sig, precision="fp16") for sig in asked if sig.precision == "fp8"]
    precisions_timed = fp8_layers == FP8_LAYERS_TIMED
    return [*with_companions(asked, plan_limit, graphs),
            *(with_companions(in_fp16, plan_limit, graphs) if precisions_timed else []),
            *with_companions(fp16_writers(asked), plan_limit, graphs)]


def fp16_writers(sigs: Iterable[ConvSignature]) -> list[ConvSignature]:
    """Each of `sigs` that writes FP8, writing fp16 instead (each once, in order)."""
    return list(dict.fromkeys(dataclasses.replace(sig, output_fp8=False) for sig in sigs if sig.output_fp8))


def _send_round_ahead(backend: BuildContext, program: Program, plain: torch.nn.Module,
                      shapes: dict[str, tuple[int, ...]]) -> dict[str, ConvSignature]:
    """The signature of each conv step of `program` (by step; `shapes`: each convolution's input shape), its round's
    graphs (`round_graphs`) sent ahead to a running pool (`_send_ahead`)."""
    sigs = _conv_signatures(program, plain, shapes, backend.cold_weights)
    _send_ahead(backend, round_graphs(sigs.values(), backend.plan_limit, backend.fp8_layers, backend.graphs))
    return sigs


def _send_ahead(backend: BuildContext, sigs: list[ConvSignature]) -> None:
    """Those of `sigs` neither made (built or refused) nor in the timing cache sent to the workers at once, in order
    (`PlanCompiler.send_ahead`), so that they compile while the build loads and times the graphs before them."""
    new = _to_compile(backend, sigs)
    if new:
        backend.compiler.send_ahead(new, backend.plan_limit)


def _to_compile(backend: BuildContext, sigs: list[ConvSignature]) -> list[ConvSignature]:
    """Those of `sigs` neither made (built or refused) nor held in the timing cache: the ones workers would compile."""
    return [sig for sig in sigs if sig not in backend.graphs and not backend.cache.holds_plan(sig.key())]


def make_graphs(backend: BuildContext, signatures: Iterable[ConvSignature]) -> None:
    """The graph of every signature not built yet, then the companions (`companions`: scaled, matmul) of each whose
    graph cuDNN built (a refused graph's layer runs elsewhere: its companions would never run), in `backend.graphs`
    (or cuDNN's reason it has none)."""
    asked = list(dict.fromkeys(signatures))
    _build_new(backend, asked, then=companions_of(asked, backend.plan_limit, backend.graphs))
    _build_new(backend, companions_of(asked, backend.plan_limit, backend.graphs))  # every asked graph is made now


def _build_new(backend: BuildContext, signatures: list[ConvSignature], then: list[ConvSignature] | None = None) -> None:
    """The graphs of `signatures` not built yet: the plans the cache does not hold sent to the workers and taken
    back in order (`CompileJobs.take`). `then`: graphs a later step asks for, sent ahead right after these
    (`_send_ahead`; the submit may have just started the pool), so that they compile while these are timed."""
    new = [sig for sig in dict.fromkeys(signatures) if sig not in backend.graphs]
    if not new:
        return
    jobs = backend.compiler.submit(_to_compile(backend, new), backend.plan_limit)
    _send_ahead(backend, then or [])
    for sig in new:
        answer = jobs.take(sig)
        started = time.perf_counter()
        try:
            backend.graphs[sig], seconds, source = build_graph(sig, backend.cudnn, backend.handle, backend.plan_limit,
                                                               backend.cache, answer)
            backend.compiler.ledger.record(source, seconds)
        except RuntimeError as exc:
            backend.graphs[sig] = str(exc)
            backend.compiler.ledger.record("refused", time.perf_counter() - started)
            mark_unforeseen(backend, [sig], REFUSED)


def _choose_by_timing(backend: BuildContext, program: Program, plain: torch.nn.Module,
                      shapes: dict[str, tuple[int, ...]], refused: dict[str, str], output_refused: dict[str, str],
                      timed: Timed) -> bool:
    """One round of choices by timing. With `backend.fp8_layers` timed, first each FP8 convolution against the same
    convolution in fp16 (the layer then reads the dequantized tensor) and each FP8 input against what its readers
    save; where no precision changes (and always with FP8 kept, whose layers keep their precision), each convolution
    that writes FP8 against writing fp16 plus a quantize layer. The tactics timed go to `timed`; True where a choice
    changed the program."""
    sigs = _conv_signatures(program, plain, shapes, backend.cold_weights)
    if backend.fp8_layers == FP8_LAYERS_TIMED and _choose_precisions(backend, program, sigs, refused, timed):
        return True
    _build_fp16_writers(backend, sigs.values())
    changed = False
    for name, sig in sigs.items():
        written = _write_tactics(backend, sig) if sig.output_fp8 and name not in output_refused else None
        if written is None:
            continue
        fused, apart = written
        quantize = _quantize_tactic(backend, sig.output_shape())
        _keep_tactics(timed, name, *fused, *apart, quantize)
        reason = output_reason(fastest(fused), fastest(apart), quantize.time_us)
        if reason is not None:
            output_refused[name], changed = reason, True
    return changed


def _choose_precisions(backend: BuildContext, program: Program, sigs: dict[str, ConvSignature],
                       refused: dict[str, str], timed: Timed) -> bool:
    """Each FP8 convolution against the same convolution in fp16, then each FP8 input against what its readers save
    (`_fp8_input_pays`); a layer that runs fp16 by timing gets its reason in `refused`. True where one changed."""
    steps = {step.name: step for step in program.steps if step.name in sigs}
    fp8 = {name: sig for name, sig in sigs.items() if steps[name].precision == "fp8"}
    fp16 = {name: dataclasses.replace(sig, precision="fp16") for name, sig in fp8.items()}
    make_graphs(backend, fp16.values())
    changed = False
    for name, sig in fp8.items():
        fp8_tactics, fp16_tactics = _tactics(backend, sig), _tactics(backend, fp16[name])
        if not (fp8_tactics and fp16_tactics):
            continue
        _keep_tactics(timed, name, *fp8_tactics, *fp16_tactics)
        reason = precision_reason(fastest(fp8_tactics), fastest(fp16_tactics))
        if reason is not None:
            refused[name], changed = reason, True
    return changed or _fp8_input_pays(backend, program, sigs, fp8, fp16, refused, timed)


def _fp8_input_pays(backend: BuildContext, program: Program, sigs: dict[str, ConvSignature],
                    fp8: dict[str, ConvSignature], fp16: dict[str, ConvSignature], refused: dict[str, str],
                    timed: Timed) -> bool:
    """Each FP8 input against what its FP8 readers save. An input a quantize layer makes costs that layer (a Q/DQ
    pair TensorRT cannot fuse runs as a layer of its own, a Reformat of `Origin: QDQ`; that its builder weighs its
    cost is this engine's rule); one a convolution writes in FP8 (its output quantize fused) costs what writing FP8
    adds to that convolution's best tactic writing fp16, or the quantize layer where that is less (the output choice
    then takes it). Where the readers' best FP8 tactics together save less than that (against their best fp16 ones),
    they run fp16 and the input goes (`input_reason`). Only inputs whose readers are all FP8 convolutions timed here;
    True where a choice changed the program."""
    _build_fp16_writers(backend, sigs.values())
    changed = False
    for step in program.steps:
        fp8_writer = step.kind == "conv" and step.output_fp8
        if step.kind != "quantize" and not fp8_writer:
            continue
        value = step.node if fp8_writer else step.name
        readers = [reader.name for reader in program.steps if value in reader.inputs]
        if not readers or any(name not in fp8 for name in readers):
            continue
        best = [(_tactics(backend, fp8[name]), _tactics(backend, fp16[name])) for name in readers]
        if not all(fp8_tactics and fp16_tactics for fp8_tactics, fp16_tactics in best):
            continue
        quantize = _quantize_tactic(backend, fp8[readers[0]].input_shape)
        cost_words, cost_us, decided = "the quantize layer's", quantize.time_us, [quantize]
        written = _write_tactics(backend, sigs[step.name]) if fp8_writer else None
        if written is not None:
            writes_fp8, writes_fp16 = (fastest(tactics) for tactics in written)
            if writes_fp8.time_us - writes_fp16.time_us < quantize.time_us:
                # the writer's tactics are another layer's: its words name them, the readers' records do not hold them
                cost_us, decided = max(0.0, writes_fp8.time_us - writes_fp16.time_us), []
                cost_words = (f"what writing it in FP8 adds to {step.name} ({writes_fp8.library} "
                              f"{writes_fp8.time_us:.1f} us against {writes_fp16.library} {writes_fp16.time_us:.1f} "
                              f"us writing fp16):")
        saved = sum(fastest(fp16_tactics).time_us - fastest(fp8_tactics).time_us for fp8_tactics, fp16_tactics in best)
        reason = input_reason(saved, cost_us, len(readers), cost_words)
        if reason is not None:  # a quantize layer's time recorded where it decided
            for name in readers:
                _keep_tactics(timed, name, *decided)
                refused[name], changed = reason, True
    return changed


def _build_fp16_writers(backend: BuildContext, sigs: Iterable[ConvSignature]) -> None:
    """The graph of each convolution of `sigs` that writes FP8, writing fp16 instead, built together (the workers
    compile them side by side) where not built yet."""
    make_graphs(backend, fp16_writers(sigs))


def _write_tactics(backend: BuildContext, sig: ConvSignature) -> tuple[list[Tactic], list[Tactic]] | None:
    """The tactics of `sig` (a convolution writing FP8) and of the same convolution writing fp16 (its graph built
    before, with the others', by `_build_fp16_writers`), or None where either has none."""
    fused, unfused = _tactics(backend, sig), _tactics(backend, dataclasses.replace(sig, output_fp8=False))
    return (fused, unfused) if fused and unfused else None


def _quantize_tactic(backend: BuildContext, shape: tuple[int, ...]) -> Tactic:
    """A quantize layer of a tensor of `shape`, as a tactic: its time (`_quantize_us`) and implementation."""
    return Tactic(QUANTIZE_LAYER, "fp16", "fp8", _quantize_us(backend, shape), backend.quantizer().implementation)


def _tactics(backend: BuildContext, sig: ConvSignature) -> list[Tactic]:
    """`sig`'s tactics: its graph's chosen cuDNN plan first, then each companion's where cuDNN built it
    (`companions`: scaled, matmul; its plan and time are the companion's own cache entry), then each other library's
    tactic offered (`offered`: bounded by `--opt-level` as plans are) that ran, each timed once per signature and kept
    in the timing cache with the winner where any is offered; [] where cuDNN has no graph for `sig` (it refused it)."""
    graph = backend.graphs.get(sig)
    if not isinstance(graph, ConvGraph):
        return []
    output = "fp8" if sig.output_fp8 else "fp16"
    tactics = [Tactic(CUDNN, sig.precision, output, graph.time_us(), graph.choice.name)]
    for library, companion in companions(sig, backend.plan_limit).items():
        graph = backend.graphs.get(companion)
        if isinstance(graph, ConvGraph):
            tactics.append(Tactic(library, sig.precision, output, graph.time_us(), graph.choice.name))
    libraries = offered(sig, backend.plan_limit)
    if not libraries:
        return tactics
    held = backend.cache.library_times(sig.key(), CAPTURED_TIMING) if backend.cache is not None else {}
    for library in libraries:
        if (sig, library) not in backend.library_us:
            backend.library_us[sig, library] = held[library] if library in held else _time_library(backend, sig,
                                                                                                  library)
        time_us = backend.library_us[sig, library]
        if not isinstance(time_us, str):
            tactics.append(Tactic(library, sig.precision, output, time_us))
    if backend.cache is not None:
        others = {t.library: t.time_us for t in tactics if t.library not in GRAPH_LIBRARIES}
        backend.cache.put_libraries(sig.key(), others, fastest(tactics).library, CAPTURED_TIMING)
    return tactics


def conv_library(backend: BuildContext, sig: ConvSignature) -> str:
    """The library whose tactic runs `sig`'s convolution (cuDNN has its graph): the fastest of its tactics."""
    return fastest(_tactics(backend, sig)).library


def library_graph(backend: BuildContext, sig: ConvSignature, library: str) -> ConvGraph:
    """The cuDNN graph that runs `sig`'s convolution where `library` (one of GRAPH_LIBRARIES, as `conv_library`
    chose it) is cuDNN's: `sig`'s own, or that companion's (`companions`). ValueError for another library,
    LookupError for a graph not built."""
    if library not in GRAPH_LIBRARIES:
        raise ValueError(f"{library} runs no cuDNN graph")
    companion = sig if library == CUDNN else companions(sig, backend.plan_limit).get(library)
    graph = backend.graphs.get(companion) if companion is not None else None
    if isinstance(graph, ConvGraph):
        return graph
    raise LookupError(f"no {library} graph built for {sig.key()}")


def _time_library(backend: BuildContext, sig: ConvSignature, library: str) -> float | str:
    """Microseconds of `library`'s tactic for `sig` on the GPU (`time_library`), or why it did not run."""
    try:
        return time_library(library, sig, backend.quantizer)
    except Exception as exc:  # noqa: BLE001  (a tactic that does not run is not offered; the variant says why)
        return f"{library} for {sig.key()}: {joined_message(exc, 200)}"


def _keep_tactics(timed: Timed, layer: str, *tactics: Tactic) -> None:
    """Each of `tactics` kept as timed for `layer`, by library, precision and output format (a later one of the same
    three replaces an earlier)."""
    for tactic in tactics:
        timed.setdefault(layer, {})[(tactic.library, tactic.precision, tactic.output)] = tactic.record()


def _quantize_us(backend: BuildContext, shape: tuple[int, ...], device: str = "cuda") -> float:
    """Microseconds of the quantize layer on an fp16 NHWC tensor of `shape` (NCHW) on `device` (the GPU; the CPU only
    where a test stands in for the timer), as the engine runs it (`time_captured`: replays of a captured CUDA graph;
    timed eagerly, the host's launches would be timed): timed once per shape and implementation and kept in the
    timing cache with how it was timed, so a later build weighs it as the first did and makes the same choices (timed
    again in every process, it can turn a layer's precision over between reruns); a time held from another way of
    timing is timed again. What eager timing and timing in every process did on the H200: docs/evidence.md ("Grounds
    of rules in the code")."""
    if shape not in backend.quantize_us:
        quantizer = backend.quantizer()
        key = f"{QUANTIZE_PREFIX}{'x'.join(map(str, shape))} {quantizer.implementation}"
        held = backend.cache.quantize_time(key, CAPTURED_TIMING) if backend.cache is not None else None
        if held is None:
            x = torch.randn(shape, device=device, dtype=torch.float16).contiguous(memory_format=torch.channels_last)
            inverse = torch.ones((), device=device)
            held = time_captured(lambda: quantizer.run(x, inverse, True))
            if backend.cache is not None:
                backend.cache.put_quantize(key, held, CAPTURED_TIMING)
        backend.quantize_us[shape] = held
    return backend.quantize_us[shape]


def _bind(backend: BuildContext, program: Program, traced: TracedModel, plain: torch.nn.Module,
          scales: dict[str, tuple[float, torch.Tensor]],
          shapes: dict[str, tuple[int, ...]]) -> tuple[list[tuple[Step, Runner]], list[Layer]]:
    nodes = {node.name: node for node in traced.module.graph.nodes}
    alias = {n.name: n.args[0] for n in traced.nodes if n.kind == "noop" and n.args}
    runners: list[tuple[Step, Runner]] = []
    layers: list[Layer] = []
    for step in program.steps:
        layer = _layer(step)
        if step.kind == "conv":
            conv = cast(torch.nn.Conv2d, plain.get_submodule(step.name))
            sig = _signature(step, conv, shapes[step.name], backend.cold_weights)
            library = conv_library(backend, sig)
            graph = library_graph(backend, sig, library if library in GRAPH_LIBRARIES else CUDNN)
            _describe_conv(layer, conv, graph, library)
            if library in GRAPH_LIBRARIES:
                runner = _conv_runner(backend, step, conv, graph, scales)
            else:
                runner = _library_runner(backend, step, conv, sig, library, scales, layer)
        elif step.kind == "linear" and step.precision == "fp8":
            linear = cast(torch.nn.Linear, plain.get_submodule(step.name))
            gemm = Fp8Linear(linear.weight, linear.bias, *scales[step.name])
            runner = _unary(gemm, step.inputs[0])
            layer.kind, layer.tactic = "cuBLASLt FP8 GEMM", gemm.path
            layer.in_channels, layer.out_channels = linear.in_features, linear.out_features
        elif step.kind == "quantize":
            runner = _quantize_runner(backend, step, scales, program)
            layer.kind, layer.tactic = "quantize", backend.quantizer().implementation
        else:
            runner = _torch_runner(traced.module, nodes.get(step.node), step, alias)
            layer.kind = f"PyTorch {step.op} (fp16)"
        runners.append((step, runner))
        layers.append(layer)
    return runners, layers


def _layer(step: Step) -> Layer:
    layer = Layer(name=step.name, kind=step.kind, op=step.op, precision=step.precision,  # type: ignore[arg-type]
                  quantized=step.precision == "fp8")
    layer.attrs = {"asked": step.asked, "fused": list(step.absorbed), "epilogue": list(step.epilogue)}
    if step.fallback:
        layer.attrs["fallback"] = step.fallback
    if step.output_fp8:
        layer.attrs["output"] = f"fp8 (quantized with {step.output_scale_of}'s input scale)"
    return layer


def _describe_conv(layer: Layer, conv: torch.nn.Conv2d, graph: ConvGraph, library: str) -> None:
    """The layer as `graph` runs it (the plan chosen, the signature) and `library`, whose tactic runs it (cuDNN's
    word for `graph`, its own or a companion's, or another library's); `_library_runner` renames the kind and
    tactic where another library's tactic runs instead, and the plan fields stay as what cuDNN's graph would run."""
    layer.kind, layer.attrs["library"] = graph.sig.graph_words(), library
    layer.groups, layer.kernel_shape = conv.groups, list(conv.kernel_size)
    layer.in_channels, layer.out_channels, layer.stride = conv.in_channels, conv.out_channels, list(conv.stride)
    choice = graph.choice
    if choice is not None:
        layer.tactic = choice.name
        layer.attrs.update(plans_tried=choice.tried, plans_offered=choice.offered, plan_cached=choice.cached,
                           plan_index=choice.index, plan_time_us=choice.time_us, signature=graph.sig.key())


def _conv_scales(step: Step, conv: torch.nn.Conv2d, scales: dict[str, tuple[float, torch.Tensor]]
                 ) -> tuple[float | None, torch.Tensor | None, float | None]:
    """A conv step's input scale and per-output-channel weight scales (FP8 only, else None) and its output scale
    (where it writes FP8 for its readers)."""
    x_scale, w_scale = scales.get(step.name, (None, None)) if step.precision == "fp8" else (None, None)
    if w_scale is not None and w_scale.numel() == 1:
        w_scale = w_scale.expand(conv.out_channels)
    return x_scale, w_scale, scales[step.output_scale_of][0] if step.output_scale_of else None


def _library_runner(backend: BuildContext, step: Step, conv: torch.nn.Conv2d, sig: ConvSignature, library: str,
                    scales: dict[str, tuple[float, torch.Tensor]], layer: Layer) -> Runner:
    """The runner of a conv step whose tactic of `library` (not cuDNN) timed fastest; names it in `layer`."""
    run = library_conv(library, sig, conv.weight, conv.bias, *_conv_scales(step, conv, scales), backend.quantizer)
    layer.kind, layer.tactic = f"{LIBRARY_KINDS[library]} ({sig.precision})", run.path
    layer.attrs["library"] = library
    return _conv_call(run, step)


def _conv_runner(backend: BuildContext, step: Step, conv: torch.nn.Conv2d, graph: ConvGraph,
                 scales: dict[str, tuple[float, torch.Tensor]]) -> Runner:
    if not backend.workspace or graph.workspace_bytes > backend.workspace[0].numel():
        backend.workspace[:1] = [torch.empty(max(graph.workspace_bytes, 1), dtype=torch.uint8, device="cuda")]
    layer = ConvLayer(graph, conv.weight, conv.bias, *_conv_scales(step, conv, scales), backend.workspace)
    return _conv_call(layer, step)


def _conv_call(layer: Callable[..., Any], step: Step) -> Runner:
    """A conv step's runner: `layer` on its input, and its residual where its epilogue adds one."""
    source, residual = step.inputs[0], step.residual
    if residual is not None:
        return lambda env: layer(env[source], env[residual])
    return lambda env: layer(env[source])


def _unary(fn: Callable[[Any], Any], source: str) -> Runner:
    return lambda env: fn(env[source])


def _quantize_runner(backend: BuildContext, step: Step, scales: dict[str, tuple[float, torch.Tensor]],
                     program: Program) -> Runner:
    assert step.scale_of is not None
    inverse = torch.tensor(1.0 / scales[step.scale_of][0], device="cuda")
    channels_last = next(s.kind == "conv" for s in program.steps if s.name == step.scale_of)
    quantizer = backend.quantizer()
    source = step.inputs[0]
    return lambda env: quantizer.run(env[source], inverse, channels_last)


def _torch_runner(module: torch.fx.GraphModule, node: torch.fx.Node | None, step: Step,
                  alias: dict[str, str]) -> Runner:
    """An fp16 PyTorch op: the traced node, called with its arguments from the environment."""
    if node is None:  # a conv without a cuDNN graph: its module, on its one input
        return _unary(module.get_submodule(step.name), step.inputs[0])

    def root(name: str) -> str:
        while name in alias:
            name = alias[name]
        return name

    target = node.target

    def run(env: dict[str, Any]) -> Any:
        args = torch.fx.node.map_arg(node.args, lambda n: env[root(n.name)])
        kwargs = torch.fx.node.map_arg(node.kwargs, lambda n: env[root(n.name)])
        if node.op == "call_module":
            return module.get_submodule(str(target))(*args, **kwargs)
        if node.op == "call_method":
            return getattr(args[0], str(target))(*args[1:], **kwargs)
        return target(*args, **kwargs)  # type: ignore[operator]

    return run


def _frees(program: Program, traced: TracedModel) -> list[list[str]]:
    """After each step, the values no later step reads (freed, so memory stays at the live set)."""
    alias = {n.name: n.args[0] for n in traced.nodes if n.kind == "noop" and n.args}
    nodes = {node.name: node for node in traced.module.graph.nodes}

    def root(name: str) -> str:
        while name in alias:
            name = alias[name]
        return name

    last: dict[str, int] = {}
    for index, step in enumerate(program.steps):
        reads = list(step.inputs)
        if step.kind == "torch" and step.node in nodes:
            reads += [n.name for n in nodes[step.node].all_input_nodes]
        for name in reads:
            last[root(name)] = index
    last[root(program.output)] = len(program.steps)
    frees: list[list[str]] = [[] for _ in program.steps]
    for name, index in last.items():
        if index < len(program.steps):
            frees[index].append(name)
    return frees
