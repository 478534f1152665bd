"""A study interrupted or failing half-way keeps what it measured, in a valid file."""

import pytest

from inspector.request import StudyRequest
from inspector.resolve import resolve
from inspector.study import run_study
from sessions.documents import storage


def options(out, **extra):
    request = StudyRequest(
        model="test_resnet", device="cpu", variants="fp32,bf16,fp16", rounds=1, iters=1, warmup_s=0,
        calib_count=2, out=str(out), **extra,
    )
    return resolve(request).plan


@pytest.mark.slow
def test_interrupt_after_the_first_variant_keeps_it(tmp_path):
    out = tmp_path / "s.json"

    def report(progress):
        if progress.phase == "build" and progress.done == 1 and progress.message.endswith("traced"):
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_study(options(out), ["trt-inspect"], report)
    session = storage.load(out)
    assert [v.name for v in session.variants] == ["fp32"]
    assert session.variants[0].trace.records > 0 and session.variants[0].quality is not None
    assert not list(tmp_path.glob(".*.tmp"))


@pytest.mark.slow
def test_a_failing_build_is_recorded_and_the_rest_goes_on(tmp_path, monkeypatch):
    from builders.pytorch import torch_backend

    real_build = torch_backend.TorchBackend.build

    def build(self, spec, calibration):
        if spec.name == "bf16":
            raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB\nmore detail")
        return real_build(self, spec, calibration)

    monkeypatch.setattr(torch_backend.TorchBackend, "build", build)
    session, path = run_study(options(tmp_path / "s.json"), ["trt-inspect"], lambda p: None)
    failed = session.variant("bf16")
    assert failed.status == "failed" and failed.error == "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB"
    assert session.variant("fp16").latency is not None
    assert storage.load(path).variant("bf16").status == "failed"
