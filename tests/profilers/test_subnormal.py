"""A time taken on subnormal values said wherever the speed-ups are: hf:mobilevit with random weights read "bf16 is
10.31x faster than fp32" while its fp32 activations fell to 1e-30..1e-41 (842 ms a forward, 73 ms with denormals
flushed). Stand-ins: a linear stack whose activations shrink into fp32's subnormals, and a fake study whose fp32
outputs are subnormal. Expected counts from the values written down here (fp32's smallest normal, 2^-126)."""

from __future__ import annotations

import numpy as np
import orjson
import torch

import tests.fake_backend
from builders.pytorch.torch_backend import TorchEngine
from inspector.cli import main
from inspector.study import run_study
from profilers.subnormal import Sampler
from sessions.analyses import subnormals
from sessions.documents import storage
from sessions.documents.model import SubnormalValues, Variant
from tests.inspector.test_study_fake import fake_plan

FP32_SMALLEST_NORMAL = 2.0 ** -126  # 1.1754944e-38


def shrinking(factor: float, layers: int = 3, width: int = 16) -> torch.nn.Module:
    """Linear layers each multiplying its input by `factor` (a scaled identity, no bias)."""
    stack = []
    for _ in range(layers):
        linear = torch.nn.Linear(width, width, bias=False)
        linear.weight.data = torch.eye(width) * factor
        stack.append(linear)
    return torch.nn.Sequential(*stack).eval()


def sampled(module: torch.nn.Module, batch: torch.Tensor) -> SubnormalValues | None:
    engine = TorchEngine(module, "cpu", torch.float32, batch)
    sampler = Sampler()
    with engine.layer_outputs(sampler.visit):
        engine.infer(batch)
    return sampler.result()


def test_the_layer_outputs_of_a_model_whose_activations_shrink_are_counted_subnormal():
    batch = torch.linspace(0.5, 1.0, 32).reshape(2, 16)
    counts = sampled(shrinking(1e-13), batch)  # layer outputs about 1e-13, 1e-26, 1e-39
    expected = batch.double() * 1e-39
    assert counts is not None and counts.tensors == 3 and counts.values == 3 * 32
    assert counts.subnormal == int((expected.abs() < FP32_SMALLEST_NORMAL).sum()) == 32
    assert counts.smallest_normal == FP32_SMALLEST_NORMAL and counts.dtype == "float32"
    assert subnormals.timed_on_subnormals(Variant("fp32", "torch", "fp32", "cpu", subnormal_values=counts))
    healthy = sampled(shrinking(1.0), batch)
    assert healthy is not None and healthy.subnormal == 0 and healthy.values == 3 * 32
    assert not subnormals.timed_on_subnormals(Variant("fp32", "torch", "fp32", "cpu", subnormal_values=healthy))
    on_gpu = Variant("fp32", "torch", "fp32", "cuda", subnormal_values=counts)  # a GPU computes them at full speed
    assert not subnormals.timed_on_subnormals(on_gpu)


def test_a_variant_timed_on_subnormal_outputs_is_said_so_by_show_and_its_verdict(tmp_path, monkeypatch, capsys):
    infer = tests.fake_backend.FakeEngine.infer
    monkeypatch.setattr(tests.fake_backend.FakeEngine, "infer",  # float32 as engines give; fp32 (scale 1) about 1e-40
                        lambda self, batch: (infer(self, batch) * (1e-40 if self.scale == 1.0 else 1.0))
                        .astype(np.float32))
    _, path = run_study(fake_plan(tmp_path), [], lambda p: None)
    raw = {v["name"]: v["subnormal_values"] for v in orjson.loads(path.read_bytes())["variants"]}
    images = np.linspace(-1, 1, 40)  # the fake's quality rows: none zero, all below 2^-126 once times 1e-40
    assert raw["fp32"]["values"] == raw["fp32"]["subnormal"] == int((np.abs(images * 1e-40) > 0).sum()) == 40
    assert raw["fp16"]["subnormal"] == 0
    capsys.readouterr()
    assert main(["show", str(path)]) == 0
    out = capsys.readouterr().out.splitlines()
    line = ("fp32 timed on subnormal values: 100.0 % of the nonzero values sampled from its activations lie below "
            "float32's smallest normal (1.18e-38), which a CPU computes many times slower, so its time and the "
            "speed-ups against it say little; random weights shrink the activations; --checkpoint gives trained "
            "weights")
    assert line in out  # a note under the table, read back from the saved session
    verdicts = [row for row in out if row.startswith("fp32 is ")]
    assert len(verdicts) == 1 and verdicts[0].endswith("; " + line)
    assert not any(row.startswith("fp16 timed on subnormal") for row in out)
    assert storage.load(path).variant("fp32").subnormal_values.subnormal == 40


class NoHooks:
    """An engine whose layer hooks must not be asked for (they copy every layer's output to the host)."""

    def infer(self, batch):
        return np.ones((len(batch), 3), dtype=np.float32)

    def layer_outputs(self, visit):
        raise AssertionError("sampled on a GPU")


def test_a_gpu_variants_outputs_are_not_sampled(tmp_path):
    from inspector.study import quality_outputs

    class Inputs:
        quality_batches = (torch.ones(2, 4), torch.ones(1, 4))

    for device, sampled_here in (("cuda", False), ("cpu", True)):
        variant = Variant("fp16", "torch", "fp16", device)
        engine = NoHooks() if not sampled_here else TorchEngine(shrinking(1.0, width=4), "cpu", torch.float32,
                                                                torch.zeros(2, 4))
        outputs = quality_outputs(variant, engine, Inputs())
        assert outputs.shape[0] == 3 and (variant.subnormal_values is not None) == sampled_here


def test_fp16_values_below_fp16s_smallest_normal_are_not_slow_on_a_cpu_that_computes_them_in_fp32():
    """6e-6 is below fp16's smallest normal (2^-14, about 6.1e-5) and far above fp32's (2^-126): a CPU widens fp16
    to fp32, where it is a normal value."""
    values = torch.full((64,), 6e-6, dtype=torch.float16)
    assert 0 < float(values[0]) < 2.0 ** -14  # the premise: an fp16 subnormal
    for tensor in (values, values.numpy()):
        sampler = Sampler()
        sampler.visit(tensor)
        counts = sampler.result()
        assert counts.values == 64 and counts.subnormal == 0 and counts.smallest_normal == FP32_SMALLEST_NORMAL


def test_a_float64_subnormal_is_counted_as_one():
    """1e-310 is below float64's smallest normal (2.2e-308): converting the sample to float32 first would make it 0
    and count nothing."""
    sampler = Sampler()
    sampler.visit(torch.tensor([1e-310, 1.0, 2.0], dtype=torch.float64))
    counted = sampler.result()
    assert counted is not None and (counted.values, counted.subnormal) == (3, 1)
    assert counted.smallest_normal == torch.finfo(torch.float64).tiny
