"""The recipe preflight reads the model's structure without building its weights (the study loads them)."""

from contextlib import nullcontext

import torch

from builders.models import catalog as models
from builders.recipes import fp8 as fp8_recipes
from sessions.documents.plan import parse_variants


def _recording_loads(monkeypatch) -> list[str]:
    fp8_recipes._structure_of.cache_clear()  # one structure per model and process: these tests count the loads
    devices: list[str] = []
    real = models.load_model

    def load(name, checkpoint=None, construct=nullcontext):
        model = real(name, checkpoint, construct)
        devices.append(next(model.module.parameters()).device.type)
        return model

    monkeypatch.setattr(models, "load_model", load)
    return devices


def test_the_preflight_builds_the_model_on_the_meta_device(monkeypatch):
    devices = _recording_loads(monkeypatch)
    variants, _ = fp8_recipes.preflight("resnet18", None, parse_variants("fp16,fp8", ["all"], []), {"fp8-all"})
    assert devices == ["meta"]
    assert [v.name for v in variants] == ["fp16", "fp8-all"]


def test_a_model_that_cannot_run_on_meta_is_loaded_for_real(monkeypatch):
    devices = _recording_loads(monkeypatch)
    from builders.models import structure as model_structure

    real = model_structure.model_structure

    def structure(module, example):
        if example.is_meta:
            raise NotImplementedError("no meta kernel")
        return real(module, example)

    monkeypatch.setattr(model_structure, "model_structure", structure)
    variants, _ = fp8_recipes.preflight("resnet18", None, parse_variants("fp8", ["all"], []), {"fp8-all"})
    assert devices == ["meta", "cpu"]
    assert [v.name for v in variants] == ["fp8-all"]
    assert torch.get_default_device().type == "cpu"
