"""A module's copy on a device (`module_copy`) and the calibrated modules a study's recipes share (`Calibrations`)."""

import copy

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from builders.pytorch.variant_modules import Calibrated, Calibrations, module_copy


class _Tied(torch.nn.Module):
    """A convolution, a BatchNorm, an LSTM, one linear in two places, a frozen weight, a buffer that views a
    parameter, two buffers that view one tensor, an expanded, a strided, a transposed and a sparse buffer, buffers
    with a gradient and with an attribute, and a tensor attribute that is neither a parameter nor a buffer."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3)
        self.bn = torch.nn.BatchNorm2d(4)
        self.lstm = torch.nn.LSTM(4, 4)
        self.shared = torch.nn.Linear(4, 4)
        self.again = self.shared
        self.conv.weight.requires_grad_(False)
        self.register_buffer("view", self.shared.weight.detach()[0])
        halves = torch.arange(6.0)
        self.register_buffer("head", halves[:3])
        self.register_buffer("tail", halves[3:])
        self.register_buffer("spread", torch.ones(1).expand(1000))
        self.register_buffer("every_other", torch.arange(8.0)[::2])
        self.register_buffer("transposed", torch.randn(3, 5).t())
        self.register_buffer("sparse", torch.eye(3).to_sparse())
        self.register_buffer("graded", torch.zeros(3))
        self.graded.grad = torch.ones(3)
        self.register_buffer("noted", torch.zeros(2))
        self.noted.note = "kept by deepcopy"
        self.loose = torch.arange(3.0)


class _Ops(TorchDispatchMode):
    """The ATen operations run while it is active, with the device of their first tensor argument."""

    def __init__(self):
        super().__init__()
        self.seen = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        first = next((a for a in args if isinstance(a, torch.Tensor)), None)
        self.seen.append((func.overloadpacket.__name__, None if first is None else first.device.type))
        return func(*args, **(kwargs or {}))


def _copied(module, device):
    with _Ops() as ops:
        duplicate = module_copy(module, device)
    return duplicate, ops.seen


def test_every_parameter_and_buffer_lands_on_the_device_and_what_was_shared_stays_shared():
    model = _Tied()
    duplicate, _ = _copied(model, torch.device("meta"))
    assert {t.device.type for t in (*duplicate.parameters(), *duplicate.buffers())} == {"meta"}
    assert duplicate.again is duplicate.shared and duplicate.again.weight is duplicate.shared.weight
    assert isinstance(duplicate.conv.weight, torch.nn.Parameter) and not duplicate.conv.weight.requires_grad
    assert duplicate.bn.weight.requires_grad
    assert duplicate.lstm._flat_weights[0] is duplicate.lstm.weight_ih_l0  # the RNN runs on the copy's own


def _sharing(module):
    """The pairs of (strided) state entries whose tensors share one storage."""
    state = [(name, t) for name, t in module.state_dict(keep_vars=True).items() if t.layout == torch.strided]
    return {(a, b) for i, (a, x) in enumerate(state) for b, y in state[i + 1:]
            if x.untyped_storage().data_ptr() == y.untyped_storage().data_ptr()}


def test_the_copy_is_what_deepcopy_then_to_makes_without_the_original_storage():
    torch.manual_seed(0)
    model = _Tied()
    duplicate, _ = _copied(model, torch.device("cpu"))
    expected = copy.deepcopy(model).to(torch.device("cpu"))
    for (name, mine), theirs, made in zip(model.state_dict(keep_vars=True).items(),
                                          duplicate.state_dict(keep_vars=True).values(),
                                          expected.state_dict(keep_vars=True).values(), strict=True):
        assert (type(theirs), theirs.requires_grad) == (type(made), made.requires_grad), name
        assert theirs.layout == made.layout, name
        assert (None if theirs.grad is None else theirs.grad.tolist()) == (None if made.grad is None else
                                                                           made.grad.tolist()), name
        assert vars(theirs) == vars(made), name
        torch.testing.assert_close(theirs, made, rtol=0, atol=0, msg=name)
        if theirs.layout == torch.strided:
            assert theirs.stride() == made.stride(), name
            assert theirs.untyped_storage().nbytes() == made.untyped_storage().nbytes(), name
        if theirs.layout == torch.strided:
            assert theirs.untyped_storage().data_ptr() != mine.untyped_storage().data_ptr(), name
    assert _sharing(duplicate) == _sharing(expected)
    with torch.no_grad():
        duplicate.shared.weight.add_(1.0)
        duplicate.loose.add_(1.0)
    assert not torch.equal(duplicate.shared.weight, model.shared.weight)
    assert torch.equal(model.loose, torch.arange(3.0))


def test_each_weight_is_copied_once_straight_to_the_device_never_cloned_where_it_was():
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.BatchNorm2d(8), torch.nn.Linear(8, 2))
    _, seen = _copied(model, torch.device("meta"))
    on_host = [op for op, device in seen if device == "cpu" and op not in ("_to_copy", "detach", "alias")]
    assert on_host == []  # `copy.deepcopy(model).to(device)` clones each tensor on the host first
    copies = [op for op, device in seen if op == "_to_copy" and device == "cpu"]
    assert len(copies) == len([*model.parameters(), *model.buffers()])


def _calibrated(module):
    return Calibrated(module=module, folded=1, dtype=torch.float32)


def test_the_first_ask_takes_the_made_module_and_every_later_one_a_copy_the_cache_does_not_share():
    torch.manual_seed(1)
    made = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.BatchNorm1d(4))
    expected = {name: tensor.clone() for name, tensor in made.state_dict().items()}
    calls = []
    calibrations = Calibrations()

    def make():
        calls.append(1)
        return _calibrated(made)

    first = calibrations.calibrated(("key",), make)
    assert first.module is made and first.folded == 1
    with torch.no_grad():  # what a variant does to its module (quantizers turned off, scales shared)
        first.module[0].weight.zero_()
    second = calibrations.calibrated(("key",), make)
    third = calibrations.calibrated(("key",), make)
    assert calls == [1]
    assert second.module is not made and third.module is not second.module
    for got in (second, third):
        for name, tensor in got.module.state_dict().items():
            torch.testing.assert_close(tensor, expected[name], rtol=0, atol=0, msg=name)
    with torch.no_grad():
        second.module[1].running_mean.add_(5.0)
    torch.testing.assert_close(third.module[1].running_mean, expected["1.running_mean"], rtol=0, atol=0)


def test_a_calibrated_module_keeps_its_amax_computes_as_before_and_no_calibrator_holds_a_tensor(monkeypatch):
    pytest.importorskip("modelopt")
    from builders.pytorch import variant_modules
    from sessions.documents.plan import VariantPlan
    from tests.models import resnet_with_random_batchnorm

    reference = resnet_with_random_batchnorm()
    calib = torch.randn(2, 3, 32, 32, generator=torch.Generator().manual_seed(2))
    plan = VariantPlan("fp8", "all")
    calibrations = variant_modules.Calibrations()
    asked = [variant_modules.variant_module(reference, plan, calib, torch.float32, calibrations) for _ in range(2)]
    monkeypatch.setattr(variant_modules, "release_calibrators", lambda module: None)
    monkeypatch.setattr(variant_modules, "module_copy", None)  # without a cache, the calibrated module is not copied
    unreleased = variant_modules.variant_module(reference, plan, calib, torch.float32)
    for built in asked:
        quantizers = [sub for sub in built.module.modules() if hasattr(sub, "_calibrator")]
        held = [name for sub in quantizers for name, value in vars(sub._calibrator).items()
                if isinstance(value, torch.Tensor)]
        assert quantizers and held == []
        modules = dict(built.module.named_modules())
        assert built.quantized == unreleased.quantized and built.quantized
        assert all(modules[path].input_quantizer.amax is not None and modules[path].weight_quantizer.amax is not None
                   for path in built.quantized)
        with torch.no_grad():
            torch.testing.assert_close(built.module(calib), unreleased.module(calib), rtol=0, atol=0)
    assert any(isinstance(value, torch.Tensor) for sub in unreleased.module.modules() if hasattr(sub, "_calibrator")
               for value in vars(sub._calibrator).values())
