"""A study's inputs: the model with seeded random weights or a checkpoint, and real images through its transform."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from builders.model_info import ModelInfo
from sessions.errors import InputError
from sessions.plan import StudyPlan


@dataclass
class StudyInputs:
    model: ModelInfo
    image_source: str
    quality_batches: list[Any]  # every image, in batches of the study's size
    static_input: Any  # the timed and traced batch
    calibration: Any  # `calib_count` images

    @property
    def image_count(self) -> int:
        return sum(len(batch) for batch in self.quality_batches)


def load_study_inputs(plan: StudyPlan) -> StudyInputs:
    import torch

    from builders.models import load_model
    from profilers.images import load_images

    torch.manual_seed(plan.seed)
    model = load_model(plan.model, Path(plan.checkpoint) if plan.checkpoint else None)
    images = load_images(Path(plan.images) if plan.images else None)
    if model.transform is None:
        raise InputError(f"{model.name}: no input transform known; real images cannot be fed to it")
    pixels = torch.stack([model.transform(image) for image in images.images])
    return StudyInputs(model, images.source, list(pixels.split(plan.batch)), _cycle(pixels, plan.batch),
                       _cycle(pixels, plan.calib_count))


def _cycle(pixels: Any, count: int) -> Any:
    import torch

    reps = -(-count // len(pixels))
    return torch.cat([pixels] * reps)[:count].contiguous()
