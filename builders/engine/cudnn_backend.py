"""The cuDNN / cuBLASLt engine: a model lowered into fused cuDNN convolution graphs, cuBLASLt FP8 GEMMs,
quantize layers and fp16 PyTorch ops (builders.engine.lowering), in fp16 or FP8 per recipe, run eagerly or
as one CUDA graph. Real FP8 kernels end to end, built from the same calibration as the simulated variant;
never TensorRT: tactics are the plans cuDNN and cuBLASLt offer, and nothing fuses beyond a convolution's
epilogue.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import copy
import dataclasses
import time
from collections.abc import Callable, Iterator

import torch

from builders.backend import Backend, BackendContext, BuildResult, Capabilities, register_backend
from builders.engine.build import (
    BuildContext,
    build_engine,
    first_round_graphs,
    foresee,
    foreseen_scale_keys,
    mark_unforeseen,
    recorded_shapes,
    send_first_round_ahead,
)
from builders.engine.compiler import PlanCompiler, close_early_workers, start_workers_early
from builders.engine.fused_tactics import FusedTactics
from builders.engine.graph import TracedModel, trace
from builders.engine.kernels import engine_timing_cache, engine_timing_cache_exists
from builders.engine.plans import PLANS_PER_OPT_LEVEL, UNASKED
from builders.engine.region_artifacts import hash_triton_in_background, import_loader
from builders.engine.twin import Twin, TwinCache, TwinFit, host_digest, host_tensors, tensors_digest, twin_key
from builders.engine.weight_residency import gpu_l2_bytes, weights_cold
from builders.fp8.format import gpu_problem as fp8_gpu_problem
from builders.fp8.quantizer import Quantizer, make_quantizer
from builders.models.plain_layers import PlainLayer, plain_layers_notes
from builders.models.structure import ModelStructure
from builders.pytorch.inductor_workers import begin_ending_compile_workers, end_compile_workers
from builders.pytorch.variant_modules import (
    Calibrations,
    VariantModule,
    fold_into_weights,
    unquantized_note,
    variant_module,
)
from builders.recipes.fp8 import get_recipe, variant_selection
from profilers.device import study_device
from sessions.documents.covers import covered_records
from sessions.documents.errors import InputError, MissingEnvironment, first_line
from sessions.documents.model import Layer, Recipe, Variant
from sessions.documents.plan import StudyPlan, VariantPlan
from sessions.documents.vocab import STRUCTURE_ROLE

ENGINE_LABEL = "cuDNN / cuBLASLt engine (not TensorRT)"


def engine_problem() -> str | None:
    """Why the engine cannot run here, or None."""
    problem = fp8_gpu_problem()
    if problem is not None:
        return f"the cuDNN / cuBLASLt engine: {problem}"
    from builders.engine.cudnn_library import import_cudnn

    try:
        import_cudnn()
    except MissingEnvironment as exc:
        return f"the cuDNN / cuBLASLt engine: {exc.message}"
    return None


@register_backend
class CudnnBackend(Backend):
    name = "cudnn"
    label = "cuDNN / cuBLASLt engine"
    capabilities = Capabilities(range_kinds=frozenset({"nvtx", "annotation"}), devices=frozenset({"cuda"}))
    plan_options = ("fp8_layers",)
    variant_precisions = ("fp16", "fp8")  # cudnn-fp16, cudnn-fp8-<recipe> beside PyTorch's variants

    @classmethod
    @contextlib.contextmanager
    def prepared(cls, plan: StudyPlan) -> Iterator[None]:
        """While the study loads its model: Triton's files hashed on a thread (`hash_triton_in_background`: the first
        build's first region load asks for that hash); and where this GPU and cuDNN have no timing cache yet, so that
        the first build compiles every graph, the compile workers started (`start_workers_early`); those no build took
        are ended once the builds are done (`builds_done`), or when the study ends where it ends before them."""
        from builders.engine.cudnn_library import import_cudnn

        hash_triton_in_background()
        device = torch.cuda.current_device()
        if not engine_timing_cache_exists(import_cudnn()):
            start_workers_early(device)
        try:
            yield
        finally:
            close_early_workers(device)

    @classmethod
    def unavailable(cls, device: str) -> str | None:
        if not study_device(device).gpu:
            return "the cuDNN / cuBLASLt engine runs on CUDA GPUs only"
        return engine_problem()

    def __init__(self, context: BackendContext) -> None:
        from builders.engine.cudnn_library import import_cudnn
        from builders.models.catalog import torch_module
        from builders.models.structure import model_structure

        model = context.model
        self._reference = torch_module(model).to(device="cuda", dtype=torch.float32).eval()
        self.plan = context.plan
        cudnn = import_cudnn()
        self.structure = model_structure(self._reference, context.static_input[:1].to("cuda"))
        compiler = PlanCompiler(torch.cuda.current_device())
        self.context = BuildContext(cudnn, cudnn.create_handle(), context.static_input,
                                    PLANS_PER_OPT_LEVEL[self.plan.opt_level], engine_timing_cache(cudnn), compiler,
                                    self._make_quantizer, self.plan.fp8_layers,
                                    fusion=FusedTactics(workers=compiler.submit_regions,
                                                        workers_hung=compiler.break_pool,
                                                        workers_answering=compiler.pause_foreseen,
                                                        while_compiling=self._while_regions_compile,
                                                        ask_workers_to_end=_compiles_end(compiler)),
                                    cold_weights=weights_cold(self._reference, gpu_l2_bytes()))
        self._quantizer: Quantizer | None = None
        self._calibrations = Calibrations()
        self._twins = TwinCache()
        self._builds_foreseen = False  # whether a build has sent every build's first round to the workers
        self._foreseen_builds: set[str] = set()  # the builds whose first round `_foresee_builds` sent
        self._premade: dict[str, tuple[Twin, float]] = {}  # later FP8 builds' twins made early, and their seconds
        self._twins_meanwhile: TwinsMeanwhile | None = None  # those a build makes while its regions compile
        self._built: set[str] = set()  # the builds that succeeded
        planned_fp8 = any(variant.precision == "fp8" for variant in self.plan.variants)
        self._model_digest = _digest_in_background(self._reference) if planned_fp8 else None

    @torch.no_grad()
    def reference(self, batch: torch.Tensor) -> torch.Tensor:
        return self._reference(batch.to("cuda")).float().cpu()

    def describe(self) -> dict[str, str]:
        cudnn = self.context.cudnn
        return {"engine": ENGINE_LABEL, "cudnn-frontend": str(getattr(cudnn, "__version__", "unknown")),
                "cudnn-backend": str(cudnn.backend_version())}

    def engine(self) -> str:
        return f"{self.label} (cuDNN {self.context.cudnn.backend_version()})"

    def builds_ending(self) -> None:
        """The plan compiler's and Inductor's worker processes told to end once the last build is done, while its
        variant's quality and trace run (`builds_done` waits for them: 0.77-0.80 s of a first run, where they ran:
        benchmarks/results/h100/driver-kernel-cache/{coldsampled,freshsampled}/). Raises nothing: where either cannot
        begin (no thread to be had), `builds_done` ends them, waiting."""
        try:
            self.context.compiler.begin_close()
            begin_ending_compile_workers()
        except Exception:  # noqa: BLE001, S110  (builds_done ends whatever this could not)
            pass

    def builds_done(self) -> None:
        """The plan compiler's and Inductor's worker processes end once every variant is built (the fused tactics
        ask Inductor's to end after their compiles, and the engine's timer waits for them): none is alive while the
        rows are timed. Where every build foreseen succeeded, the graphs foreseen that no build asked for are marked
        so in the timing cache (`mark_unforeseen`), so that a later run does not foresee them again; not where one
        failed or never ran (an interrupted study): it would have asked for its own. A twin made early for a build
        that never took it (`_premake_twins`: that build failed before it) is let go."""
        unasked = self.context.compiler.close()
        close_early_workers(self.context.compiler.device)  # where no build took them (the first failed before it sent)
        end_compile_workers()
        self._premade.clear()
        if self._foreseen_builds <= self._built:
            mark_unforeseen(self.context, unasked, UNASKED)
            self.context.cache.save()

    def build(self, variant: VariantPlan, calibration: torch.Tensor) -> BuildResult:
        """`variant` built (`_build`), counted among the builds that succeeded; a build that fails, however, leaves
        nothing it sent ahead queued for the next."""
        try:
            result = self._build(variant, calibration)
        except BaseException:
            self.context.compiler.withdraw_ahead()
            raise
        self._built.add(variant.name)
        return result

    def _build(self, variant: VariantPlan, calibration: torch.Tensor) -> BuildResult:
        if variant.precision not in ("fp16", "fp8"):
            raise InputError(f"the cuDNN engine builds fp16 and fp8 variants, not {variant.precision}")
        start = time.perf_counter()
        with _as_build_failure(variant):
            plain, made_plain = self._plain()
            traced = trace(plain, self.context.static_input)
            value_shapes = recorded_shapes(self.context, traced)
        first = not self._builds_foreseen  # this backend's first build
        if first:
            self._builds_foreseen = True
            self._foresee_builds(variant, traced, plain, value_shapes)
        fp8 = variant.precision == "fp8"
        if fp8 and self.context.compiler.running:  # a first build's pool: busy while ModelOpt calibrates
            self._send_ahead_of_calibration(variant, traced, plain, value_shapes)
        # its own twin before the later builds': the calibration their recipes share is the first FP8 build's
        twin, twin_premade_s = self._twin_for(variant, calibration)
        premade_s = 0.0  # seconds this build spent on later builds' twins (theirs, not its own)
        if first and self.context.compiler.running:  # the workers compile: the later builds' twins meanwhile
            later = self._later_fp8_builds(variant)
            premade_s = self._premake_twins(later[:1], calibration)  # while the foreseen graphs compile
            self._twins_meanwhile = TwinsMeanwhile(later[1:], calibration)  # while this build's regions compile
        refused_before = len(self._quantizer.refused) if self._quantizer else 0
        with _as_build_failure(variant):
            try:
                engine, layers, notes = build_engine(self.context, traced, plain, twin, value_shapes)
            finally:
                meanwhile, self._twins_meanwhile = self._twins_meanwhile, None
            if meanwhile is not None:  # those its regions' compiles left (none sent, or the build had none) now
                premade_s += meanwhile.seconds + self._premake_twins(meanwhile.variants, calibration)
            _structure_roles(layers, self.structure)
            engine.run_once()  # a lowering that cannot run fails here, as the build, not later in a measurement
            torch.cuda.synchronize()
        self.context.cache.save()
        refused = self._quantizer.refused[refused_before:] if self._quantizer else []
        notes.extend(plain_layers_notes(made_plain))
        if refused:  # shapes are static: a call refused once is refused on every run
            notes.append(f"{len(refused)} quantize call(s) of a run ran PyTorch's eager kernels instead of the Triton "
                         f"kernel their layers' tactic names: {refused[0]}")
        if twin is not None:
            twin.park()
            notes.extend(twin_notes(twin, plain))
        torch.cuda.synchronize()
        versions = self.describe()
        label = (f"{ENGINE_LABEL}: real {'FP8' if twin else 'fp16'} kernels; cuDNN {versions['cudnn-backend']}, "
                 f"frontend {versions['cudnn-frontend']}")
        if twin is not None:
            notes.insert(0, f"layers the recipe quantizes: --fp8-layers {self.plan.fp8_layers}")
        result = Variant(
            name=variant.name, backend=self.name, precision=variant.precision, device="cuda", simulated=False,
            recipe=_real_recipe(twin), build_s=time.perf_counter() - start - premade_s + twin_premade_s,
            artifact_bytes=sum(t.numel() * t.element_size() for t in plain.state_dict().values()),
            notes=[label, *notes], layers=layers,
        )
        return BuildResult(engine, result)

    def _twin(self, variant: VariantPlan, calibration: torch.Tensor) -> Twin:
        """The simulated variant of `variant`'s recipe as the engine uses it: from the FP8 calibration cache where it
        holds this model, recipe and calibration, else calibrated by ModelOpt now (and kept there)."""
        if self._model_digest is None:
            self._model_digest = _digest_in_background(self._reference)
        recipe = dataclasses.asdict(get_recipe(variant.recipe or "all"))
        key = twin_key(self._model_digest.result(), recipe, variant.exclude,
                       tensors_digest([calibration]), torch.float16)

        def make() -> VariantModule:
            return variant_module(self._reference, VariantPlan("fp8", variant.recipe, variant.exclude), calibration,
                                  torch.float16, self._calibrations)

        sample = tuple(self.reference(self.context.static_input[:1]).shape[1:])  # one image's output, as the twin's
        twin = self._twins.load(key, make, TwinFit.of(self._reference, sample), "cuda")
        if twin is None:
            twin = Twin.of(key, make())
            self._twins.save(twin)
        twin.saved = self._twins.save
        return twin

    def _twin_for(self, variant: VariantPlan, calibration: torch.Tensor) -> tuple[Twin | None, float]:
        """`variant`'s twin and the seconds an earlier build spent making it: the one made early
        (`_premake_twins`), its scales moved to the engine's device, else made now (`_twin`; 0 s), or None for an fp16
        build."""
        premade, seconds = self._premade.pop(variant.name, (None, 0.0))
        if premade is not None:
            premade.scales_to("cuda")
            return premade, seconds
        return (self._twin(variant, calibration) if variant.precision == "fp8" else None), 0.0

    def _premake_twins(self, variants: list[VariantPlan], calibration: torch.Tensor) -> float:
        """The twin of each of `variants` (later FP8 builds of the study on this backend), made now (`_twin`:
        ModelOpt calibrates) and parked in host memory, its scales too (`Twin.park`, `Twin.scales_to`), for that
        build to take (`_premade`): a first run's first build calibrates the first of them while the workers compile
        the graphs it foresaw, the others while they compile its fused regions (`_while_regions_compile`), instead
        of waiting for them, and nothing of a later variant stays in this build's device memory. Returns the seconds
        it took; each build counts its own twin's (`Variant.build_s`). Speculative work: a twin that cannot be made is
        left to its build, which says why where it fails again."""
        started = time.perf_counter()
        for variant in variants:
            made = time.perf_counter()
            try:
                twin = self._twin(variant, calibration)
                twin.park()
                twin.scales_to("cpu")
            except Exception:  # noqa: BLE001, S112  (an optimisation must not fail a build)
                continue
            self._premade[variant.name] = (twin, time.perf_counter() - made)
        return time.perf_counter() - started

    def _while_regions_compile(self) -> None:
        """What a build's process does once its fused regions' compiles are sent to the workers, before it waits for
        them (`FusedTactics.while_compiling`): Inductor's loader imported (`region_artifacts.import_loader`: their
        code loads next), and the later builds' twins queued for this wait (`_twins_meanwhile`) made, their seconds
        kept there. Speculative work: an import that fails is left to the loading, which then compiles the regions."""
        try:
            import_loader()
        except Exception:  # noqa: BLE001, S110  (an optimisation must not fail a build)
            pass
        meanwhile = self._twins_meanwhile
        if meanwhile is not None and meanwhile.variants:
            meanwhile.seconds += self._premake_twins(meanwhile.variants, meanwhile.calibration)
            meanwhile.variants = []

    def _later_fp8_builds(self, first: VariantPlan) -> list[VariantPlan]:
        """The FP8 builds of the study on this backend after `first` (the one starting), in the plan's order."""
        return [variant for variant in self._later_builds(first)[1:] if variant.precision == "fp8"]

    def _later_builds(self, first: VariantPlan) -> list[VariantPlan]:
        """The builds of the study on this backend from `first` (the one starting) on, in the plan's order."""
        builds = [v for v in self.plan.variants
                  if (v.backend or self.plan.backend) == self.name and v.precision in self.variant_precisions]
        return builds[builds.index(first):] if first in builds else [first]

    def _plain(self) -> tuple[torch.nn.Module, list[PlainLayer]]:
        """The model in fp16 with BatchNorm folded into the convolutions (as every FP8 recipe's calibration folds it:
        `variant_modules`), its layers of derived classes that compute their base class's operation made plain first
        (`fold_into_weights`, as the FP8 calibration makes them: the scales are of the weight they compute); and those
        layers."""
        module = copy.deepcopy(self._reference)
        made_plain, _ = fold_into_weights(module, self.structure.conv_bn)
        return module.to(dtype=torch.float16).eval(), made_plain

    def _send_ahead_of_calibration(self, variant: VariantPlan, traced: TracedModel, plain: torch.nn.Module,
                                   value_shapes: dict[str, tuple[int, ...]]) -> None:
        """The first round of `variant`'s graphs sent to the running pool (`send_first_round_ahead`), foreseen from
        the layers its recipe selects in the model's structure (`_foreseen_fp8`), so that they compile while ModelOpt
        calibrates (those a first build foresaw, `_foresee_builds`, are then this build's). Speculative work: where
        foreseeing fails, what it sent is withdrawn and the build goes on, its own lowering (the same code, on the
        calibrated scales) saying why where it fails too."""
        try:
            send_first_round_ahead(self.context, traced, plain, *self._foreseen_fp8(variant), value_shapes)
        except Exception:  # noqa: BLE001  (an optimisation must not fail the build)
            self.context.compiler.withdraw_ahead()

    def _foresee_builds(self, first: VariantPlan, traced: TracedModel, plain: torch.nn.Module,
                        value_shapes: dict[str, tuple[int, ...]]) -> None:
        """The first round of each build of the study on this backend from `first` (the one starting) on, in the
        plan's order, sent to the compile workers as foreseen (`build.foresee`: a pool started for them where they
        are enough to spread), each FP8 build's layers and scale keys foreseen (`_foreseen_fp8`), so that a later
        build's graphs compile while the builds before it run (an engine's fp16 build, ModelOpt calibrating). All
        from `first`'s model: every build lowers the same folded fp16 model (`_plain`). Speculative work: a build
        whose round cannot be foreseen is left out, and what was sent ends with the pool (`PlanCompiler.close`)."""
        rounds = []
        for variant in self._later_builds(first):
            try:
                rounds.append(first_round_graphs(self.context, traced, plain, *self._foreseen_fp8(variant),
                                                 value_shapes))
            except Exception:  # noqa: BLE001, S112  (an optimisation must not fail a build)
                continue
            self._foreseen_builds.add(variant.name)
        foresee(self.context, rounds)

    def _foreseen_fp8(self, variant: VariantPlan) -> tuple[set[str], dict[str, object]]:
        """The layers `variant` runs in FP8 as foreseen before it calibrates (its recipe's selection in the model's
        structure; none for fp16) and their input-scale keys (`foreseen_scale_keys`)."""
        if variant.precision != "fp8":
            return set(), {}
        fp8 = set(variant_selection(self.structure, variant).quantized)
        reads = {layer.path: layer.input_key for layer in self.structure.layers}
        return fp8, foreseen_scale_keys(fp8, reads)

    def _make_quantizer(self) -> Quantizer:
        if self._quantizer is None:
            self._quantizer = make_quantizer()
        return self._quantizer


@dataclasses.dataclass
class TwinsMeanwhile:
    """The later FP8 builds whose twins a first build makes while the workers compile its fused regions
    (`CudnnBackend._while_regions_compile`), the calibration they take, and the seconds those made so far took."""

    variants: list[VariantPlan]
    calibration: torch.Tensor
    seconds: float = 0.0


def _compiles_end(compiler: PlanCompiler) -> Callable[[], None]:
    """What a build's fused tactics call before they time their regions (`FusedTactics.ask_workers_to_end`):
    Inductor's compile workers asked to end, and the foreseen plan compiles held until the build resumes them
    (`PlanCompiler.hold_foreseen`; `build_engine` resumes them), so no worker compiles while regions are timed."""
    def end() -> None:
        begin_ending_compile_workers()
        compiler.hold_foreseen()

    return end


@contextlib.contextmanager
def _as_build_failure(variant: VariantPlan) -> Iterator[None]:
    """An exception of the block becomes the variant's one-line failure (the study goes on), but for bad input and a
    missing environment, which keep their own words."""
    try:
        yield
    except (InputError, MissingEnvironment):
        raise
    except Exception as exc:  # noqa: BLE001  (the variant fails with one line; the study goes on)
        raise RuntimeError(f"the cuDNN engine could not build {variant.name}: {type(exc).__name__}: "
                           f"{first_line(exc)}") from None


def _digest_in_background(module: torch.nn.Module) -> concurrent.futures.Future[str]:
    """`model_digest(module)`: its tensors copied to the host here, hashed on a thread of its own (hashing lets go of
    the interpreter lock) while the engine's first builds go on. The thread makes no CUDA call: one made while this
    thread captures a CUDA graph breaks the capture."""
    structure, tensors = repr(module), host_tensors(module)
    pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="model-digest")
    try:
        return pool.submit(host_digest, structure, tensors)
    finally:
        pool.shutdown(wait=False)


def _structure_roles(layers: list[Layer], structure: ModelStructure) -> None:
    """Each engine layer named by the modules it runs (fused ones joined by " + "), and each record of a layer asked
    for in FP8 that a fused one covers (`covered_records`), given the role the model's structure gives them
    (`attrs[STRUCTURE_ROLE]`); a layer named by a function's node keeps none."""
    for layer in layers:
        for attrs, name in [(layer.attrs, layer.name), *((r["attrs"], r["name"]) for r in covered_records(layer))]:
            role = structure.structure_role(name)
            if role is not None:
                attrs[STRUCTURE_ROLE] = role


def twin_notes(twin: Twin, plain: torch.nn.Module) -> list[str]:
    """The FP8 variant's notes on what it took from `twin` (`plain`: the model the engine built): the layers its
    recipe selects that ModelOpt gave no quantizer, as the simulated variant says, and whether the scales came from
    the FP8 calibration cache."""
    notes = []
    if twin.recipe.unquantized:
        notes.append(unquantized_note(twin.recipe.unquantized, dict(plain.named_modules()), torch.float16))
    if twin.cached:
        notes.append("scales and the simulated variant's outputs from the FP8 calibration cache "
                     "(same model weights, recipe and calibration images)")
    return notes


def _real_recipe(twin: Twin | None) -> Recipe | None:
    if twin is None:
        return None
    recipe = copy.deepcopy(twin.recipe)
    recipe.number_format = "fp8 e4m3 (real kernels: cuDNN, cuBLASLt)"
    recipe.method = "scales from " + recipe.method
    return recipe
