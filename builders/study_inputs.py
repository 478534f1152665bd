"""A study's inputs: the model with seeded random weights or a checkpoint, and real images through its transform."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from builders.models.info import ModelInfo
from sessions.documents.errors import InputError
from sessions.documents.plan import StudyPlan


@dataclass
class StudyInputs:
    model: ModelInfo
    image_source: str  # where the images come from, and how calibration and quality images were chosen
    quality_batches: list[Any]  # every quality image, in batches of the study's size
    static_input: Any  # the timed and traced batch
    calibration: Any  # `calib_count` images
    masks: list[Any] = field(default_factory=list)  # label maps of the quality images, where the folder has them
    stress: list[tuple[str, Any]] = field(default_factory=list)  # named single-sample inputs checked for NaN/Inf

    @property
    def image_count(self) -> int:
        return sum(len(batch) for batch in self.quality_batches)


@dataclass(frozen=True)
class InputChoice:
    """What a study's inputs are made of, whoever asks (a study's plan, the probe, `onnx`): the model and its
    weights, the images and how they are split, the batch the timed input has."""

    model: str
    batch: int
    calib_count: int
    images: str | None
    checkpoint: str | None
    seed: int  # torch's seed before the model is built: its random weights where no checkpoint is given
    eval_count: int | None = None  # None: quality on every image (calibration images included); else disjoint
    stress_count: int | None = None  # None: every stress input
    threads: int | None = None  # torch CPU threads; None: torch's default

    @classmethod
    def of_plan(cls, plan: StudyPlan) -> InputChoice:
        return cls(plan.model, plan.batch, plan.calib_count, plan.images, plan.checkpoint, plan.seed, plan.eval_count,
                   plan.stress_count, plan.threads)


# A model loaded before the study for the same plan (inspector.cpu_defaults times it), taken by the study once
# instead of building it again (what a build cost: docs/evidence.md ("Grounds of rules in the code")). One at a time.
_KEPT: dict[tuple[str, str | None, int], Any] = {}


def _model_key(choice: StudyPlan | InputChoice) -> tuple[str, str | None, int]:
    return choice.model, choice.checkpoint, choice.seed


def keep_model(plan: StudyPlan, model: Any) -> None:
    """Hand `model` (`build_model` of `plan`'s model, checkpoint and seed, weights unchanged) to the next
    `load_study_inputs` of a plan with those three."""
    _KEPT.clear()
    _KEPT[_model_key(plan)] = model


def build_model(model: str, checkpoint: str | None, seed: int) -> Any:
    """builders.models.catalog.load_model right after torch.manual_seed(seed): the checkpoint's weights, else seeded
    random weights (kept between studies by builders.models.seeded_weights); torch's CPU generator is left as that
    leaves it."""
    from builders.models.seeded_weights import SeededWeights

    return SeededWeights().load(model, seed, Path(checkpoint) if checkpoint else None)


def load_study_inputs(plan: StudyPlan) -> StudyInputs:
    return load_inputs(InputChoice.of_plan(plan))


def load_inputs(choice: InputChoice) -> StudyInputs:
    """The model (a kept one, else `build_model`) and the images through its transform."""
    import torch

    from profilers.images import image_paths, load_images, split, stress_inputs

    if choice.threads is not None:
        torch.set_num_threads(choice.threads)
    model = _KEPT.pop(_model_key(choice), None) or build_model(choice.model, choice.checkpoint, choice.seed)
    if model.transform is None:
        raise InputError(f"{model.name}: no input transform known; real images cannot be fed to it")
    stress = [(name, torch.from_numpy(array)[None])
              for name, array in stress_inputs(tuple(model.input_size), choice.stress_count)]
    folder = Path(choice.images) if choice.images else None
    if choice.eval_count is None:
        images = load_images(folder)
        pixels = torch.stack([model.transform(image) for image in images.images])
        source = f"{images.source}: {len(pixels)} images, calibration cycling through the same images"
        return StudyInputs(model, source, list(pixels.split(choice.batch)), _cycle(pixels, choice.batch),
                           _cycle(pixels, choice.calib_count), images.masks, stress)
    available = len(image_paths(folder)[0]) if folder else len(load_images(None).images)
    chosen = split(available, choice.calib_count, choice.eval_count)
    calib = load_images(folder, indices=chosen.calibration) if folder else _pick(load_images(None), chosen.calibration)
    held = load_images(folder, indices=chosen.evaluation) if folder else _pick(load_images(None), chosen.evaluation)
    calib_pixels = torch.stack([model.transform(image) for image in calib.images])
    pixels = torch.stack([model.transform(image) for image in held.images])
    return StudyInputs(model, f"{held.source}: {chosen.describe()}", list(pixels.split(choice.batch)),
                       _cycle(pixels, choice.batch), calib_pixels, held.masks, stress)


def _pick(images: Any, indices: list[int]) -> Any:
    from profilers.images import ImageSet

    return ImageSet(images.source, [images.images[i] for i in indices], [images.labels[i] for i in indices])


def _cycle(pixels: Any, count: int) -> Any:
    import torch

    reps = -(-count // len(pixels))
    return torch.cat([pixels] * reps)[:count].contiguous()
