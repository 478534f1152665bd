"""A session from files that TensorRT tools wrote: layer information, profile, times and trtexec metadata.

Imported variants carry what the files hold and nothing more: layers, tactics, formats, per-layer
times, latency, and what trtexec's options and device block say. A fact no file gives is stored as
unknown (None), never as a default. The files hold no kernel launches, so imported variants have
no kernel table.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from profilers.trt_import import documents
from profilers.trt_import.documents import read_json
from profilers.trt_import.kinds import LAYERS, METADATA, PROFILE, ImportFiles, roles
from profilers.trt_import.layer_info import LayerInfo, parse_layer_info
from profilers.trt_import.metadata import RunFacts, companions, engine_name, facts_from, model_name
from profilers.trt_import.myelin_kernels import fold_myelin_kernels
from profilers.trt_import.profile import Profile, layers_from_profile, pair_profile, parse_profile
from profilers.trt_import.summary import latency_of
from profilers.trt_import.text_layers import forget_log, is_text, is_trtexec_log, read_text_layers
from profilers.trt_import.text_profile import parse_text_profile, with_unrun_layers
from profilers.trt_import.trtexec_log import apply_logged, logged_layers, repeated_lines_note
from sessions.documents import document
from sessions.documents.errors import InputError
from sessions.documents.gc_pause import gc_paused
from sessions.documents.model import Environment, GpuInfo, Layer, Session, TimingMethod, Variant
from sessions.documents.options import default

PRECISION_ORDER = ("fp8", "int8", "bf16", "fp16", "fp32")
FLOAT_PRECISIONS = ("fp16", "bf16")  # a build option that allows one asks for it (fp16 first: trtexec's --best
# allows both); a quantized one (int8, fp8) counts only where a layer ran it
MOVES_DATA = ("reformat", "shuffle", "noop", "quantize", "dequantize")


def dominant_precision(variant_layers: list[Layer], build_precision: str | None = None) -> str:
    """The variant's precision: the lowest that any computing layer runs in; where every one ran fp32, the 16-bit
    float precision trtexec's build option allowed (what the build asked for: an `--fp16` build whose every layer kept
    fp32 is an fp16 build whose layers kept fp32; fp16 before bf16); where no layer says (names-only files), the
    lowest the option allowed. A quantized format (int8, fp8) the option allowed counts only where a layer ran it,
    or no layer says: a `--best` build (`FP32+FP16+BF16+INT8`) whose layers ran fp16 is fp16.

    Layers that only move or convert data (reformats, shuffles, Q/DQ, no-ops) do not count: an fp16 input
    binding's reformat does not make a TF32 engine fp16.
    """
    seen = {layer.precision for layer in variant_layers if layer.op not in MOVES_DATA} or {
        layer.precision for layer in variant_layers}
    words = (build_precision or "").lower()
    ran = next((p for p in PRECISION_ORDER if p in seen), None)
    if ran is None:  # names-only layers: the build's option is all there is
        return next((p for p in PRECISION_ORDER if p in words), "unknown")
    if ran != "fp32":
        return ran
    return next((p for p in FLOAT_PRECISIONS if p in words), ran)


@dataclass
class Reading:
    """What an import has read when a role's `apply` runs: the variant (layers, precision, name), the run's facts
    from trtexec's metadata, the files, the file that names the engine (the layer file, else the profile), and the
    variant's notes so far (an `apply` adds its own). An `apply` that gives the variant its latency says in
    `timed_by` what timed it (the method's timed region), None where trtexec's GPU compute time did."""

    variant: Variant
    facts: RunFacts
    files: ImportFiles
    named: Path | None
    notes: list[str]
    timed_by: str | None = None


@dataclass
class Imported:
    variant: Variant
    model: str
    batch: int | None
    input_shape: list[int]  # one sample, without the batch dimension
    facts: RunFacts
    per_layer: str  # what each layer's time is, in words
    timed_by: str | None = None  # what timed the latency where not trtexec's GPU compute time (Reading.timed_by)


SYNCHRONISED = ("measured under per-layer synchronisation: includes profiling overhead, and their sum is not the "
                "latency")


def per_layer_words(profile: Profile | None, dumped: bool = False) -> str:
    """What each layer's time is, in words; `dumped` for a profile read from a `--dumpProfile` table."""
    if profile is not None and dumped:
        return ("IProfiler layer times from trtexec --dumpProfile's table in the log (average per iteration), "
                f"{SYNCHRONISED}")
    if profile is not None and profile.records[0].samples is not None:
        return (f"IProfiler layer times over up to {profile.count} runs, written by the TensorRT API: "
                f"each layer's median, with p10 and p90, {SYNCHRONISED}")
    if profile is not None:
        return f"IProfiler layer times from trtexec --exportProfile (averageMs per inference), {SYNCHRONISED}"
    return "no per-layer times imported (--profile)"


def _apply_log(logs: list[Path], info: LayerInfo, notes: list[str]) -> None:
    """Types, tactics and tensors from a verbose trtexec log (--metadata, or the log given as the profile), for
    names-only layers."""
    if info.detailed:
        return
    for path in logs:
        logged, repeated = logged_layers(path)
        if logged:
            typed = apply_logged(info.layers, logged)
            notes.append(f"layer types, tactics and tensors of {typed} of {len(info.layers)} layers "
                         f"from the log {path.name}")
            notes.extend(repeated_lines_note(path.name, repeated))
            if typed == len(info.layers):
                info.detailed = True
                info.notes = [note for note in info.notes if not note.startswith("names-only")]
            if typed:
                io = ({t.name for layer in info.layers for t in layer.inputs}
                      - {t.name for layer in info.layers for t in layer.outputs})
                info.io_tensors = info.io_tensors or sorted(io)
            return


def _log_layer_names(path: Path) -> set[str]:
    """The names of the layers a trtexec log lists (its layer information block, else its `Layer(...)` lines)."""
    try:
        return {layer.name for layer in read_text_layers(path).layers}
    except InputError:
        return set(logged_layers(path)[0])


def _foreign_logs(paths: list[Path], layer_file: Path | None, info: LayerInfo) -> dict[Path, str]:
    """The logs of `paths` that list a layer this engine (`info`, read from `layer_file`) does not have: another
    engine's run, whose facts (GPU, version, summary) are not this engine's; each with why. A log listing some of
    this engine's layers and no other (a cut log) is this engine's."""
    mine = {layer.name for layer in info.layers}
    foreign: dict[Path, str] = {}
    for path in paths:
        if layer_file is None or path == layer_file or not is_text(path):
            continue
        theirs = _log_layer_names(path)
        if theirs - mine:
            foreign[path] = (f"another engine's log: {len(theirs - mine)} of its {len(theirs)} layers are not among "
                             f"the {len(mine)} of {layer_file.name}, so its run facts are not taken")
    return foreign


def _layers(files: ImportFiles, notes: list[str]) -> tuple[LayerInfo, Profile | None]:
    """The engine's layers (from the layer file, else from the profile) and the profile, paired with them."""
    layers_path, profile_path = files.one(LAYERS), files.one(PROFILE)
    profile = _profile(profile_path, notes) if profile_path else None
    if profile is not None and profile.count is not None:
        notes.append(f"profile over {profile.count} {'runs' if profile.records[0].samples else 'inferences'}")
    if layers_path is None:
        if profile is None:
            raise InputError("give --layers, --profile or both")
        notes.append("layers named by the profile alone: no types, tactics or formats (add --layers for those)")
        return LayerInfo(layers_from_profile(profile), [], detailed=False), profile
    if is_text(layers_path):
        info = read_text_layers(layers_path)
    else:
        info = parse_layer_info(read_json(layers_path, "layer information file"), str(layers_path))
    if profile is not None:
        folded = fold_myelin_kernels(profile, info.layers)
        profile = folded.profile
        if folded.kernels:
            notes.append(f"{sum(map(len, folded.kernels.values()))} kernel records "
                         f"of {len(folded.kernels)} Myelin layers "
                         "summed into their layer (a record `..._myl<i>_<k>` is kernel k of engine layer i): "
                         + "; ".join(f"{name[:80]!r} <- {_listed(rows)}" for name, rows in folded.kernels.items()))
        if profile_path is not None and is_text(profile_path):
            profile, unrun = with_unrun_layers(profile, [layer.name for layer in info.layers])
            if unrun:
                notes.append(f"{len(unrun)} layers have no row in the --dumpProfile table "
                             "(trtexec prints none for a layer "
                             f"that did not run): 0 ms, as --exportProfile writes them ({_listed(unrun)})")
        pairing = pair_profile(info.layers, profile, str(profile_path))
        notes.append(f"profile paired {'by position' if pairing.by_position else 'by name'}: "
                     f"{pairing.matched} of {len(info.layers)} layers")
        if pairing.unmatched_layers or pairing.unmatched_records:
            notes.append(f"partial pairing: {len(pairing.unmatched_layers)} layers without a record, "
                         f"{len(pairing.unmatched_records)} records without a layer")
        if pairing.unmatched_layers:
            notes.append(f"layers without a profile record (no time): {_listed(pairing.unmatched_layers)}")
        if pairing.unmatched_records:
            unpaired = {r.name: r.average_ms for r in profile.records if r.name in set(pairing.unmatched_records)}
            notes.append(f"profile records without a layer, not joined to any ({sum(unpaired.values()):.4g} ms per "
                         f"inference left out of the layers' times): {_listed(pairing.unmatched_records)}")
    return info, profile


UNPAIRED_LISTED = 12  # names a note lists before it counts the rest


def _repeated_names(layers: list[Layer], paired: bool) -> list[str]:
    """A note where layer names repeat (none otherwise): what reads layers by name (a diff) cannot tell those layers
    apart; where a profile was paired with a layer file (`paired`), its records of such a name went to them in order
    (`profile.pair_profile`)."""
    counts = Counter(layer.name for layer in layers)
    repeated = [name for name, count in counts.items() if count > 1]
    if not repeated:
        return []
    pairing = "; a profile's records of such a name are paired with them in order" if paired else ""
    note = (f"layer names given to more than one layer (a diff by name cannot tell those layers apart{pairing}): "
            f"{len(repeated)} names, {sum(counts[name] for name in repeated)} layers: {_listed(repeated)}")
    return [note]


def _listed(names: list[str]) -> str:
    shown = ", ".join(repr(name[:80]) for name in names[:UNPAIRED_LISTED])
    return shown + (f" and {len(names) - UNPAIRED_LISTED} more" if len(names) > UNPAIRED_LISTED else "")


def _profile(path: Path, notes: list[str]) -> Profile:
    """A profile file: trtexec's --exportProfile JSON or IProfiler samples, or a log with a --dumpProfile table."""
    if not is_text(path):
        return parse_profile(read_json(path, "profile file"), str(path))
    found = parse_text_profile(documents.read_text(path, "trtexec log"), str(path))
    total = f", Total row {found.total_ms:.2f} ms" if found.total_ms is not None else ""
    notes.append(f"profile from the --dumpProfile table of {path.name} ({found.layout}{total})")
    return found.profile


def _input_shape(info: LayerInfo) -> list[int] | None:
    """The shape of the engine's first input: a binding that a layer reads, else the first layer's input."""
    bindings = set(info.io_tensors)
    for layer in info.layers:
        for tensor in layer.inputs:
            if tensor.shape and tensor.name in bindings:
                return list(tensor.shape)
    first = info.layers[0].inputs if info.layers else []
    return list(first[0].shape) if first and first[0].shape else None


def _model(files: ImportFiles, facts: RunFacts, model: str | None, notes: list[str], folder_model: str | None) -> str:
    if model:
        return model
    if facts.model:
        notes.append(f"model name from trtexec's {facts.model_from} option: {facts.model}")
        return model_name(facts.model)
    if folder_model:
        notes.append(f"model name {folder_model!r}: the part every engine's file name in the folder shares")
        return folder_model
    source = files.one(LAYERS) or files.one(PROFILE)
    assert source is not None
    stem = engine_name(source)
    notes.append(f"model name from the file name {source.name!r} "
                 "(no trtexec metadata names the model; --model sets it)")
    return stem


@gc_paused()
def import_variant(files: ImportFiles, name: str | None = None, model: str | None = None, batch: int | None = None,
                   folder_model: str | None = None) -> Imported:
    """One variant from `files`; `name`, `model` and `batch` where given override what the files say;
    `folder_model` names the model where no trtexec option does (a folder's engines' shared name). The log read
    last is let go of (`forget_log`) once the variant is read."""
    notes: list[str] = []
    source = files.one(LAYERS) or files.one(PROFILE)
    metadata = files.every(METADATA)
    found = companions(source) if files.find_metadata and source is not None else []
    logs = list(dict.fromkeys(p for p in (files.one(LAYERS), files.one(PROFILE)) if p is not None and p not in metadata
                              and is_trtexec_log(p)))
    candidates = [*metadata, *logs, *(p for p in found if p not in metadata)]
    layer_notes: list[str] = []
    info, profile = _layers(files, layer_notes)
    foreign = _foreign_logs(candidates, files.one(LAYERS), info)
    facts = facts_from([p for p in candidates if p not in foreign])
    if facts.sources:
        notes.append(f"trtexec metadata: {', '.join(Path(s).name for s in facts.sources)}")
    notes.extend(f"{path.name} left: {why}" for path, why in foreign.items())
    if facts.unfinished:
        notes.append(f"{', '.join(facts.unfinished)}: the log opens a trtexec run and lacks its closing '&&&& PASSED' "
                     "(or FAILED) line: cut, or the run did not finish; what it holds may be partial")
    notes.extend(layer_notes)
    _apply_log([*metadata, *logs], info, notes)
    notes.extend(info.notes)
    notes.extend(_repeated_names(info.layers, files.one(LAYERS) is not None and profile is not None))
    dla = sum(1 for layer in info.layers if layer.attrs.get("device") == "dla")
    if dla:
        notes.append(f"{dla} layers run on (or move data to) the DLA")
    precision = dominant_precision(info.layers, facts.precision)
    if precision == "unknown":
        notes.append("precision unknown: names-only files hold no types "
                     "(trtexec metadata or a log with --metadata gives it)")
    by_trtexec = any(files.every(role.name) for role in roles() if role.by_trtexec)
    variant = Variant(
        name=name or (engine_name(source) if source else "variant"),
        backend=("trtexec" if facts.sources or by_trtexec or (profile and not profile.records[0].samples)
                 else "tensorrt"),
        precision=precision,  # type: ignore[arg-type]  # a PRECISION_ORDER word or "unknown"
        device="cuda",
        layers=info.layers,
    )
    reading = Reading(variant, facts, files, source, notes)
    for role in roles():  # the roles the core above does not read: each puts its files into the variant
        if role.apply is not None and files.every(role.name):
            role.apply(files.every(role.name), reading)
    _apply_summary(variant, facts, notes)
    if reading.timed_by is None:
        _check_latency_against_layers(variant, notes)
    found_batch, shape = _batch(info, facts, batch, notes)
    variant.notes = notes
    profile_path = files.one(PROFILE)
    forget_log()
    return Imported(variant, _model(files, facts, model, notes, folder_model), found_batch,
                    list(shape[1:]) if shape else [], facts,
                    per_layer_words(profile, profile_path is not None and is_text(profile_path)), reading.timed_by)


def _batch(info: LayerInfo, facts: RunFacts, batch: int | None,
           notes: list[str]) -> tuple[int | None, list[int] | None]:
    """The batch (the first input's leading dimension, else trtexec's shape options, else `batch`, given) and the
    input shape. Raises InputError where `batch` is given and the files state another: --batch fills a gap, it never
    overrides what the files say ran."""
    layered = _input_shape(info)
    dynamic = layered is not None and layered[0] <= 0  # a dynamic dimension: the run's shape says what ran
    from_options = facts.input_shape is not None and (layered is None or dynamic)
    shape = facts.input_shape if from_options else layered
    stated = shape[0] if shape and shape[0] > 0 else None
    if batch is not None and stated is not None and batch != stated:
        raise InputError(f"--batch {batch}: the files give batch {stated} (input shape "
                         f"{'x'.join(map(str, shape or []))}); --batch applies only where they give none")
    found = stated or batch
    if batch is None and found is not None and from_options:
        notes.append(f"batch {found} from trtexec's {facts.shape_from} option")
    if found is None:
        notes.append("batch unknown: the files give no input shape (pass --batch N); stored as 1")
    return found, shape


def _apply_summary(variant: Variant, facts: RunFacts, notes: list[str]) -> None:
    """The latency from trtexec's performance summary where no per-inference times gave one; the summary kept beside
    it with the summed layer times, which are measured under per-layer synchronisation and never the latency."""
    summary = facts.summary
    timed = [layer.time_ms for layer in variant.layers if layer.time_ms is not None]
    if summary is None:
        return
    summary.layer_sum_ms = sum(timed) if timed else None
    variant.performance = summary
    gpu = summary.gpu_compute
    queries = f" over {summary.queries} queries" if summary.queries else ""
    if variant.latency is None:
        variant.latency = latency_of(summary)
        notes.append(f"latency: the GPU Compute Time of trtexec's performance summary in {summary.source}{queries} "
                     f"(median {gpu.median_ms:.4g} ms, mean {gpu.mean_ms:.4g} ms)")
    else:
        notes.append(f"latency from the per-inference times; trtexec's summary in {summary.source} states a GPU "
                     f"compute median of {gpu.median_ms:.4g} ms{queries}")
    if summary.layer_sum_ms is not None:
        times = f": {summary.layer_sum_ms / gpu.median_ms:.2f}x the GPU compute median" if gpu.median_ms > 0 else ""
        notes.append(f"summed layer times {summary.layer_sum_ms:.4g} ms ({SYNCHRONISED}){times}")
    for other in facts.summaries[1:]:
        # every GPU compute statistic the same to the digit: one run's summary written twice (a log and trex's JSON)
        queries_agree = None in (other.queries, summary.queries) or other.queries == summary.queries
        if other.gpu_compute == summary.gpu_compute and queries_agree:
            notes.append(f"the performance summary in {other.source} repeats {summary.source}'s (the same run)")
            continue
        notes.append(f"the performance summary in {other.source} (GPU compute median {other.gpu_compute.median_ms:.4g} "
                     f"ms) is another run of this engine: not the latency, the first file's is")


LAYER_SUM_FLOOR = 0.8  # of trtexec's GPU compute median: summed layer times under it, and the two are of two runs


def _check_latency_against_layers(variant: Variant, notes: list[str]) -> None:
    """A note, saying it plainly, where the summed layer times fall under LAYER_SUM_FLOOR of a latency trtexec's GPU
    compute time gave (its ratio the summed times over the latency, as the summed-times note states it): each
    profiled layer's time includes profiling overhead, so in every public set the sum is
    above that latency (1.02x to 2.55x in the 13 sets of ../shared that hold both, 1.64x in one more public set;
    0.35x where one engine's layers were given another's times), and a sum far under it means the latency and the
    layers were measured on different engines or input shapes (the figures are kept: the files may be right and the
    pairing wrong)."""
    timed = [layer.time_ms for layer in variant.layers if layer.time_ms is not None]
    if not timed or variant.latency is None or variant.latency.median_ms <= 0:
        return
    summed, latency = sum(timed), variant.latency.median_ms
    if summed < LAYER_SUM_FLOOR * latency:
        notes.append(f"the latency may not be these layers' engine's: the summed layer times ({summed:.4g} ms) are "
                     f"{summed / latency:.2f}x the latency's median ({latency:.4g} ms), where the layers of one "
                     "trtexec run of one engine add up to more than its latency: check that the times (or the "
                     "summary) and the layer profile were written for the same engine and input shape")


def environment_of(facts: RunFacts) -> Environment:
    gpu = None
    if facts.gpu:
        gpu = GpuInfo(name=facts.gpu, compute_capability=facts.compute_capability,
                      multiprocessors=facts.multiprocessors, memory_mib=facts.memory_mib,
                      sm_clock_mhz=facts.sm_clock_mhz, mem_clock_mhz=facts.mem_clock_mhz)
    return Environment(host="unknown (imported files)", os="", cpu="", cpu_count=0, python="",
                       versions={name: version for name, version in (("tensorrt", facts.tensorrt), ("cuda", facts.cuda))
                                 if version}, gpu=gpu)


GRAPH_WORDS = {True: "the CUDA-graph launch", False: "enqueue (no CUDA graph)",
               None: "enqueue or a CUDA-graph launch (not recorded)"}
TRANSFER_WORDS = {True: "trtexec ran with data transfers enabled; GPU compute time leaves them out",
                  False: "trtexec ran with data transfers disabled", None: "data transfers not recorded"}


def method_of(facts: RunFacts, imported: Imported) -> TimingMethod:
    """The method the files state: what was timed, how often, and what each per-layer figure is."""
    latency = imported.variant.latency
    stated = latency is not None and not latency.samples_ms
    where = f"trtexec's performance summary in {facts.summary.source}" if stated and facts.summary else "--exportTimes"
    if latency is not None and imported.timed_by:
        region = imported.timed_by
    elif latency is not None:
        region = (f"trtexec GPU compute time per inference (CUDA events around {GRAPH_WORDS[facts.cuda_graph]}), "
                  f"from {where}, warm-up already discarded by trtexec; {TRANSFER_WORDS[facts.transfers]}")
    else:
        region = ("no per-inference times or performance summary imported; latency columns show the sum of per-layer "
                  f"times ({SYNCHRONISED}); {TRANSFER_WORDS[facts.transfers]}")
    return TimingMethod(
        timer="trtexec" if latency is not None and not imported.timed_by else "unknown",
        timed_region=region,
        cuda_graph=facts.cuda_graph,
        warmup_s=facts.warmup_s,
        rounds=1 if latency is not None else None,
        # the inferences the times file holds, or the summary's queries
        iters=(facts.summary.queries if stated and facts.summary else len(latency.samples_ms)) if latency else None,
        interleaved=False,
        transfers_included=False,  # GPU compute time and IProfiler layer times never hold the copies
        static_inputs=True,
        per_layer=imported.per_layer,
        kernels="not in TensorRT's files: layer information names one tactic per layer, not the kernels launched",
    )


def new_session(imported: Imported, command: list[str]) -> Session:
    return document.new_session(
        model=imported.model,
        source="trtexec",
        input_shape=imported.input_shape,
        batch=imported.batch or default("batch"),
        command=command,
        backend=imported.variant.backend,
        device="cuda",
        weights="from the engine",
        engine=f"trtexec files (TensorRT {imported.facts.tensorrt})" if imported.facts.tensorrt else "trtexec files",
        engine_options=dict(imported.facts.build_flags),
        environment=environment_of(imported.facts),
        method=method_of(imported.facts, imported),
    )


def check_joinable(session: Session, imported: Imported, force: bool) -> None:
    """`--into` adds a variant of the same model and batch; anything else needs --force."""
    problems = []
    if session.study.model != imported.model:
        problems.append(f"model {imported.model!r}, the session's is {session.study.model!r} (--model names it)")
    if imported.batch is not None and session.study.batch != imported.batch:
        problems.append(f"batch {imported.batch}, the session's is {session.study.batch}")
    gpu = session.environment.gpu.name if session.environment.gpu else None
    if gpu and imported.facts.gpu and gpu != imported.facts.gpu:
        problems.append(f"GPU {imported.facts.gpu}, the session's is {gpu}")
    if problems and not force:
        raise InputError(f"these files are of {'; '.join(problems)}: pass --force to join them anyway")
    if problems:
        imported.variant.notes.append(f"joined with --force: {'; '.join(problems)}")
