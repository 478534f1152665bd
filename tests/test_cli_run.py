"""The CLI run end to end on the CPU, as a user runs it: a fresh process, real model code, real images."""

import re

import orjson
import pytest

from sessions.documents import storage
from tests.conftest import run_cli_process

FAST = ["--device", "cpu", "--rounds", "2", "--iters", "2", "--warmup", "0", "--calib-count", "2"]


@pytest.fixture(scope="module")
def resnet_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("run") / "resnet.json"
    result = run_cli_process("run", "test_resnet", *FAST, "--variants", "fp32,bf16,fp8", "--fp8-layout", "all",
                             "--json", "--out", str(out))
    return result, out


@pytest.mark.slow
def test_json_summary_on_stdout_progress_on_stderr(resnet_run):
    result, _out = resnet_run
    assert result.returncode == 0, result.stderr
    summary = orjson.loads(result.stdout)
    assert [v["name"] for v in summary["variants"]] == ["fp32", "bf16", "fp8-all"]
    assert summary["baseline"] == "fp32" and summary["device"] == "cpu"
    assert re.search(r"\[timing \d+\.\d s\]", result.stderr) and "[timing" not in result.stdout


@pytest.mark.slow
def test_session_holds_every_measurement(resnet_run):
    _, out = resnet_run
    session = storage.load(out)
    assert session.study.command[:3] == ["trt-inspect", "run", "test_resnet"]
    assert session.study.weights == "random (pretrained=False, seed 0)"
    assert not session.method.cuda_graph and "perf_counter" in session.method.timed_region
    for variant in session.variants:
        assert variant.status == "ok"
        assert len(variant.latency.samples_ms) == 4  # 2 rounds x 2 iterations
        assert variant.trace.tracer == "cpu-ops" and variant.trace.unattributed == 0
        assert variant.trace.records == len(variant.kernels) > 0
        # the CPU policy may hold images back for quality apart from calibration (inspector/cpu_defaults.py)
        assert variant.quality.images == (session.study.plan.eval_count or 18) and variant.quality.nonfinite == 0
    fp8 = session.variant("fp8-all")
    assert fp8.simulated and fp8.recipe.quantized and fp8.recipe.calibration_count == 2
    assert fp8.recipe.calibration_source.startswith("scikit-image sample photographs: ")
    simulated = [layer for layer in fp8.layers if layer.attrs.get("simulates") == "fp8"]
    assert simulated and {layer.name for layer in simulated} <= set(fp8.recipe.quantized)
    assert {layer.precision for layer in simulated} == {"fp32"}  # what their kernels compute in
    assert {v.batchnorm_folded for v in session.variants} == {fp8.batchnorm_folded} and fp8.batchnorm_folded > 0
    # the fake-quant ops are attributed to the quantizer modules, so FP8 has more ops per call
    assert fp8.trace.records > session.variant("fp32").trace.records
    # timm zero-initialises each residual branch's last BatchNorm: the convN its bnN reads outputs zeros in any
    # precision, and the FP8 variant says how many of its quantized layers are such (found here by timm's names)
    import timm
    import torch

    modules = dict(timm.create_model("test_resnet", pretrained=False).named_modules())
    zeroed = [name for name, m in modules.items() if isinstance(m, torch.nn.BatchNorm2d) and not m.weight.any()]
    constant = {name.replace(".bn", ".conv") for name in zeroed} & set(fp8.recipe.quantized)
    assert constant and (f"{len(constant)} of the {len(fp8.recipe.quantized)} layers its recipe quantizes have "
                         "all-zero weights") in " ".join(fp8.notes)
    assert not any("all-zero weights" in note for note in session.variant("fp32").notes)


@pytest.mark.slow
def test_text_output_and_show(resnet_run):
    _, out = resnet_run
    result = run_cli_process("show", str(out))
    assert result.returncode == 0
    assert "fp8-all (simulated)" in result.stdout and "median ms" in result.stdout


@pytest.mark.parametrize(
    "args, code, message",
    [
        (["run", "resnet19", "--device", "cpu"], 2, "did you mean"),
        (["run", "test_resnet", "--device", "cpu", "--variants", "fp7"], 2, "unknown variant"),
        (["run", "test_resnet", "--device", "cpu", "--batch", "0"], 2, "--batch must be between 1 and 65536, not 0"),
        (["run", "test_resnet", "--backend", "tensorrt"], 3, "TensorRT is not installed"),
        (["run", "test_resnet", "--device", "cuda"], 3, "no CUDA GPU"),
        (["run", "test_resnet", "--device", "cpu", "--images", "/nonexistent"], 2, "no such folder"),
        (["run", "missing.onnx"], 2, "no such ONNX file"),
        (["show", "/nonexistent.json"], 2, "no such session"),
        (["run", "test_resnet", "--device", "cpu", "--checkpoint", "/nonexistent.pt"], 2, "no such checkpoint"),
    ],
)
def test_bad_input_gets_one_line_and_an_exit_code(args, code, message):
    result = run_cli_process(*args)
    assert result.returncode == code, result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("trt-inspect: error")]
    assert len(errors) == 1 and message in errors[0]
    assert "Traceback" not in result.stderr


def test_no_arguments_without_a_terminal_prints_help():
    result = run_cli_process()
    assert result.returncode == 2 and "usage:" in result.stderr


@pytest.mark.slow
def test_tracing_several_calls_keeps_the_per_call_count(resnet_run, tmp_path):
    _, single = resnet_run
    out = tmp_path / "three.json"
    # the same variants as the single-call run, so the same graph: BatchNorm folded in every variant, as FP8 folds it
    result = run_cli_process("run", "test_resnet", *FAST, "--variants", "fp32,bf16,fp8", "--fp8-layout", "all",
                             "--trace-calls", "3", "--out", str(out))
    assert result.returncode == 0, result.stderr
    three = storage.load(out).variant("fp32")
    one = storage.load(single).variant("fp32")
    assert three.trace.calls == 3 and three.trace.records * one.trace.calls == 3 * one.trace.records
    assert three.trace.per_call == one.trace.per_call and "call ranges" not in three.trace.note
    assert sorted(set(three.kernels.call)) == [0, 1, 2]


@pytest.mark.slow
def test_rerun_replays_the_stored_plan_exactly(resnet_run, tmp_path):
    import dataclasses

    _, out = resnet_run
    again = tmp_path / "again.json"
    result = run_cli_process("rerun", str(out), "--out", str(again))
    assert result.returncode in (0, 1), result.stderr  # 1: the CPU's noise can read as a regression
    assert "variants compared: fp32, bf16, fp8-all" in result.stdout, result.stdout
    old, new = storage.load(out).study.plan, storage.load(again).study.plan
    assert new == dataclasses.replace(old, out=str(again))
    assert storage.load(again).study.command == storage.load(out).study.command


def test_an_onnx_file_on_the_cpu_is_one_line_not_a_traceback(tmp_path):
    """An ONNX file has no PyTorch module: the CPU plan's sizing, the first to need one, says so in one line."""
    import onnx
    from onnx import TensorProto, helper

    shape = [1, 3, 8, 8]
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "relu",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)])
    path = tmp_path / "relu.onnx"
    onnx.save(helper.make_model(graph), str(path))
    for extra in ((), ("--backend", "torch")):
        result = run_cli_process("run", str(path), "--device", "cpu", *extra)
        errors = [line for line in result.stderr.splitlines() if line.startswith("trt-inspect: error")]
        assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
        assert len(errors) == 1 and "an ONNX file runs on TensorRT only" in errors[0]


def test_onnx_leaves_out_a_default_recipe_the_model_gives_nothing_to_and_writes_the_rest(tmp_path):
    """test_resnet has no squeeze-excitation: the default `no-se` recipe would quantize what `all` does, so it is left
    out with a note before any file is written, as a study leaves it out; named, it is refused before any work."""
    import timm

    modules = timm.create_model("test_resnet", pretrained=False).named_modules()
    assert not any(name.endswith(".se") for name, _ in modules)  # the premise
    result = run_cli_process("onnx", "test_resnet", "--out", str(tmp_path / "files"))
    assert result.returncode == 0, result.stderr
    assert "left out: fp8-no-se" in result.stderr
    written = sorted(p.name for p in (tmp_path / "files").iterdir())
    assert written == ["test_resnet-fp16.onnx", "test_resnet-fp8-all.onnx"]
    named = run_cli_process("onnx", "test_resnet", "--fp8-recipe", "no-se", "--out", str(tmp_path / "named"))
    assert named.returncode == 2 and "no squeeze-excitation" in named.stderr and not (tmp_path / "named").exists()
