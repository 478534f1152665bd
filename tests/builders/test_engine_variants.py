"""Variants of the cuDNN / cuBLASLt engine beside PyTorch's in one plan, and where the engine cannot run."""

from __future__ import annotations

import pytest

from builders.backend import backend_class, backend_names
from sessions.documents.plan import VariantPlan, parse_variants
from tests.conftest import run_cli_process


def test_engine_variants_name_their_backend_and_expand_recipes():
    plans = parse_variants("fp32,fp16,cudnn-fp16,cudnn-fp8", ["all", "pointwise"], [])
    assert [p.name for p in plans] == ["fp32", "fp16", "cudnn-fp16", "cudnn-fp8-all", "cudnn-fp8-pointwise"]
    assert [p.backend for p in plans] == [None, None, "cudnn", "cudnn", "cudnn"]
    assert parse_variants("cudnn-fp8-no-se", [], [])[0] == VariantPlan("fp8", "no-se", (), "cudnn")
    assert "cudnn-fp16, cudnn-fp8" in backend_class("cudnn").variant_problem(parse_variants("cudnn-fp32", [], [])[0])
    assert "cudnn" in backend_names()


def test_defaults_keep_simulated_fp8_off_fp8_gpus(monkeypatch):
    from builders.pytorch import torch_backend

    torch_cls = backend_class("torch")
    assert torch_cls.default_variants("cpu") == "fp32,bf16,fp8"
    monkeypatch.setattr(torch_backend, "fp8_engine_here", lambda: False)
    assert torch_cls.default_variants("cuda") == "fp32,fp16,fp8"
    monkeypatch.setattr(torch_backend, "fp8_engine_here", lambda: True)
    assert torch_cls.default_variants("cuda") == "fp32,fp16,cudnn-fp16,cudnn-fp8"
    assert backend_class("tensorrt").default_variants("cuda") == "fp32,fp16,fp8"
    assert backend_class("compile").default_variants("cuda") == "fp32,fp16,fp8"  # no engine beside it


@pytest.mark.slow
def test_asking_for_the_engine_where_it_cannot_run_is_one_line_and_exit_3(tmp_path):
    result = run_cli_process("run", "resnet18", "--device", "cpu", "--variants", "fp32,cudnn-fp8-all",
                             env={"TRT_INSPECT_HOME": str(tmp_path)})
    errors = [line for line in result.stderr.splitlines() if "error" in line]
    assert result.returncode == 3 and errors == [
        "trt-inspect: error: the cuDNN / cuBLASLt engine runs on CUDA GPUs only"]
    assert "Traceback" not in result.stderr
