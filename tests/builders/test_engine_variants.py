"""Variants of the cuDNN / cuBLASLt engine beside PyTorch's in one plan, and where the engine cannot run."""

from __future__ import annotations

import pytest

from builders.backend import backend_class, backend_names
from sessions.documents.errors import MissingEnvironment
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
    torch_cls, engine_cls = backend_class("torch"), backend_class("cudnn")
    assert torch_cls.default_variants("cpu") == "fp32,bf16,fp8"
    monkeypatch.setattr(engine_cls, "unavailable", classmethod(lambda cls, device: "no cuDNN frontend here"))
    assert torch_cls.default_variants("cuda") == "fp32,fp16,fp8"
    monkeypatch.setattr(engine_cls, "unavailable", classmethod(lambda cls, device: None))
    assert torch_cls.default_variants("cuda") == "fp16,cudnn-fp16,cudnn-fp8"
    assert torch_cls.default_variants("cpu") == "fp32,bf16,fp8"  # the engine's variants on a GPU only
    monkeypatch.setattr(engine_cls, "variant_prefix", classmethod(lambda cls: "engine:"))
    assert torch_cls.default_variants("cuda") == "fp16,engine:fp16,engine:fp8"  # named as the engine names them
    assert backend_class("tensorrt").default_variants("cuda") == "fp32,fp16,fp8"
    assert backend_class("compile").default_variants("cuda") == "fp32,fp16,fp8"  # no engine beside it


@pytest.mark.parametrize("refusal", ["OSError: libcudnn.so.9: cannot open shared object file",
                                     "the frontend 1.0 is too old for cuDNN 9.10"])
def test_no_engine_variants_by_default_where_the_engine_refuses_to_run(monkeypatch, refusal):
    """The engine's own check decides, not whether its package can be found: on an FP8 GPU where the frontend is
    installed (it is on this machine) but refuses to load, a study asked for no variants still resolves, its FP8
    simulated, and the engine is asked to build nothing."""
    from builders.engine import cudnn_backend, cudnn_library
    from builders.fp8 import format as fp8_format

    def refused():
        raise MissingEnvironment(refusal)

    monkeypatch.setattr(fp8_format, "gpu_problem", lambda: None)  # an FP8 GPU, for every check that asks
    monkeypatch.setattr(cudnn_backend, "fp8_gpu_problem", lambda: None)
    monkeypatch.setattr(cudnn_library, "import_cudnn", refused)
    variants = parse_variants(backend_class("torch").default_variants("cuda"), ["all"], [])
    assert [(v.name, v.backend) for v in variants] == [("fp32", None), ("fp16", None), ("fp8-all", None)]


@pytest.mark.slow
def test_asking_for_the_engine_where_it_cannot_run_is_one_line_and_exit_3(tmp_path):
    result = run_cli_process("run", "resnet18", "--device", "cpu", "--variants", "fp32,cudnn-fp8-all",
                             env={"TRT_INSPECT_HOME": str(tmp_path)})
    errors = [line for line in result.stderr.splitlines() if "error" in line]
    assert result.returncode == 3 and errors == [
        "trt-inspect: error: the cuDNN / cuBLASLt engine runs on CUDA GPUs only"]
    assert "Traceback" not in result.stderr
