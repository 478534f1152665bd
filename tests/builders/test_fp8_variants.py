"""FP8 variant modules: per-channel scales of the BatchNorm-folded kernel, shared input scales, weight bytes."""

import pytest
import torch

from builders.pytorch.variant_modules import share_input_scales, variant_module
from sessions.documents.plan import VariantPlan
from tests.models import resnet_with_random_batchnorm

pytest.importorskip("modelopt")


@pytest.fixture(scope="module")
def reference():
    return resnet_with_random_batchnorm()


def folded_kernel(conv: torch.nn.Conv2d, bn: torch.nn.BatchNorm2d) -> torch.Tensor:
    factor = bn.weight / torch.sqrt(bn.running_var + bn.eps)
    return conv.weight * factor.reshape(-1, 1, 1, 1)


def test_per_channel_scales_are_amax_over_448_of_the_folded_kernel(reference):
    calib = torch.randn(4, 3, 64, 64, generator=torch.Generator().manual_seed(1))
    built = variant_module(reference, VariantPlan("fp8", "all"), calib, torch.float32)
    assert built.recipe.weights == "per-channel" and built.recipe.batchnorm_folded
    ref = dict(reference.named_modules())
    got = dict(built.module.named_modules())
    checked = 0
    for conv_path in built.quantized:
        bn_path = conv_path.replace("conv", "bn")  # test_resnet's pairs: conv1/bn1, conv2/bn2
        if not isinstance(ref.get(bn_path), torch.nn.BatchNorm2d):
            continue
        # amax floored at 448 x 2^-14 (scale 2^-14, the ONNX graph's floor): random gammas make some channels tiny
        expected = folded_kernel(ref[conv_path], ref[bn_path]).abs().amax(dim=(1, 2, 3)).clamp(min=448 * 2.0**-14) / 448
        scale = got[conv_path].weight_quantizer.amax.reshape(-1) / 448
        torch.testing.assert_close(scale, expected.detach(), rtol=1e-5, atol=1e-7)
        assert isinstance(got[bn_path], torch.nn.Identity)
        checked += 1
    assert checked >= 4
    assert built.recipe.weight_bytes_fp8 < built.recipe.weight_bytes_base


def test_folded_fp8_variant_still_computes_the_model(reference):
    calib = torch.randn(4, 3, 64, 64, generator=torch.Generator().manual_seed(2))
    built = variant_module(reference, VariantPlan("fp8", "all"), calib, torch.float32)
    with torch.no_grad():
        want, got = reference(calib), built.module(calib)
    assert torch.corrcoef(torch.stack([want.flatten(), got.flatten()]))[0, 1] > 0.95


def test_shared_input_scale_for_layers_reading_one_tensor():
    class KeyValue(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.norm = torch.nn.LayerNorm(8)
            self.key = torch.nn.Linear(8, 8)
            self.value = torch.nn.Linear(8, 8)
            self.out = torch.nn.Linear(8, 8)

        def forward(self, x):
            h = self.norm(x)
            return self.out(self.key(h) * self.value(h))

    model = KeyValue().eval()
    calib = torch.randn(8, 4, 8, generator=torch.Generator().manual_seed(3))
    built = variant_module(model, VariantPlan("fp8", "encoder-linears"), calib, torch.float32)
    assert built.quantized == {"key", "value", "out"}
    key, value = built.module.key.input_quantizer.amax, built.module.value.input_quantizer.amax
    assert float(key) == float(value) > 0
    built.module.key.input_quantizer.amax = torch.tensor(1.0)
    built.module.value.input_quantizer.amax = torch.tensor(3.0)
    assert share_input_scales(built.module, [["key", "value"]]) == 1
    assert float(built.module.key.input_quantizer.amax) == float(built.module.value.input_quantizer.amax) == 3.0
    assert built.recipe.weights == "per-tensor" and built.module.key.weight_quantizer.amax.numel() == 1


def test_only_the_selected_layers_quantize_and_inputs_calibrate_over_every_chunk(reference):
    from modelopt.torch.quantization.nn import TensorQuantizer

    from builders.pytorch.variant_modules import CALIBRATION_CHUNK

    calib = torch.randn(CALIBRATION_CHUNK + 3, 3, 64, 64, generator=torch.Generator().manual_seed(4))
    calib[-1] *= 50  # the largest input is in the last chunk
    built = variant_module(reference, VariantPlan("fp8", "all"), calib, torch.float32)
    enabled = {name for name, q in built.module.named_modules() if isinstance(q, TensorQuantizer) and q.is_enabled}
    assert enabled == {f"{path}.{kind}" for path in built.quantized for kind in ("weight_quantizer", "input_quantizer")}
    assert sorted(built.quantized) == sorted(built.recipe.quantized) and "conv1.0" in built.recipe.excluded
    layer = built.module.get_submodule("layer1.0.conv1")  # nothing quantized upstream
    seen: list[float] = []
    hook = layer.register_forward_pre_hook(lambda _, args: seen.append(float(args[0].abs().max())))
    with torch.no_grad():
        built.module(calib)
    hook.remove()
    assert layer.input_quantizer.num_bits == (4, 3) and layer.input_quantizer.axis is None
    assert layer.weight_quantizer.axis == 0  # per-channel weights for convolutions
    assert float(layer.input_quantizer.amax) == pytest.approx(max(seen), rel=1e-5)


@pytest.mark.slow
def test_modelopt_imports_without_the_plugins_of_libraries_not_in_use():
    import subprocess
    import sys

    script = (
        "import sys, torch\n"
        "from builders.pytorch.variant_modules import UNUSED_MODELOPT_PLUGINS, _modelopt\n"
        "_modelopt()\n"
        "print(sorted(name for name in UNUSED_MODELOPT_PLUGINS if name in sys.modules))\n"
        "import transformers\n"  # hidden only while ModelOpt imported
        "print(type(transformers.PretrainedConfig).__name__)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], check=False, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["[]", "type"]


def test_absent_hides_only_libraries_not_imported_yet_and_always_restores():
    import sys

    import transformers

    from builders.pytorch.variant_modules import _absent

    with _absent(("transformers", "a_library_not_imported_yet")):
        assert sys.modules["transformers"] is transformers  # imported before: its ModelOpt plugin stays
        with pytest.raises(ModuleNotFoundError):
            import a_library_not_imported_yet  # noqa: F401
    assert "a_library_not_imported_yet" not in sys.modules
    with pytest.raises(KeyboardInterrupt), _absent(("a_library_not_imported_yet",)):
        raise KeyboardInterrupt  # Ctrl-C, or the TUI stopping a study, while ModelOpt imports
    assert "a_library_not_imported_yet" not in sys.modules


def _input_amax_by_hooks(model: torch.nn.Module, paths: set[str], batch: torch.Tensor) -> dict[str, float]:
    """The largest |input| each layer at `paths` sees on `batch`, from forward hooks on the plain model."""
    seen: dict[str, float] = {}
    modules = dict(model.named_modules())
    handles = [modules[path].register_forward_hook(
        lambda m, args, out, path=path: seen.__setitem__(path, max(seen.get(path, 0.0), float(args[0].abs().max()))))
        for path in paths]
    with torch.no_grad():
        model(batch)
    for handle in handles:
        handle.remove()
    return seen


def test_recipes_of_a_study_share_one_calibration_and_keep_only_their_own_quantizers(reference, monkeypatch):
    import modelopt.torch.quantization as mtq

    from builders.pytorch.variant_modules import Calibrations

    calls = []
    calibrate = mtq.calibrate
    monkeypatch.setattr(mtq, "calibrate", lambda *a, **k: (calls.append(1), calibrate(*a, **k))[1])
    calib = torch.randn(4, 3, 64, 64, generator=torch.Generator().manual_seed(3))
    calibrations = Calibrations()
    every = variant_module(reference, VariantPlan("fp8", "all"), calib, torch.float32, calibrations)
    pointwise = variant_module(reference, VariantPlan("fp8", "pointwise"), calib, torch.float32, calibrations)
    assert len(calls) == 1
    pointwise_layers = {path for path, m in reference.named_modules()
                        if isinstance(m, torch.nn.Conv2d) and m.kernel_size == (1, 1)}
    assert pointwise.quantized == pointwise_layers and pointwise_layers < every.quantized
    modules = dict(pointwise.module.named_modules())
    for path in every.quantized:
        enabled = modules[path].input_quantizer.is_enabled and modules[path].weight_quantizer.is_enabled
        assert enabled == (path in pointwise_layers), path
    expected = _input_amax_by_hooks(reference, pointwise_layers, calib)
    for path in pointwise_layers:
        got = float(modules[path].input_quantizer.amax)
        assert got == pytest.approx(max(expected[path], 448 * 2.0**-14), rel=1e-4), path
    alone = variant_module(reference, VariantPlan("fp8", "pointwise"), calib, torch.float32)
    with torch.no_grad():
        torch.testing.assert_close(pointwise.module(calib), alone.module(calib), rtol=0, atol=0)


class _Recurrent(torch.nn.Module):
    """Two convolutions and a linear over their pixels, an LSTM over those, a pooling layer and a linear head."""

    def __init__(self):
        super().__init__()
        self.stem = torch.nn.Conv2d(3, 8, 3)
        self.conv = torch.nn.Conv2d(8, 8, 3, padding=1)
        self.lstm = torch.nn.LSTM(8, 8, batch_first=True)
        self.pool = torch.nn.AdaptiveAvgPool1d(1)
        self.fc = torch.nn.Linear(8, 8)
        self.head = torch.nn.Linear(8, 4)

    def features(self, x):
        return self.fc(self.conv(self.stem(x)).flatten(2).transpose(1, 2))

    def forward(self, x):
        y, _ = self.lstm(self.features(x))
        return self.head(self.pool(y.transpose(1, 2)).flatten(1))


def test_only_the_layers_a_recipe_can_select_are_converted_so_recurrent_models_calibrate_and_copy():
    from builders.pytorch.variant_modules import Calibrations

    torch.manual_seed(5)
    model = _Recurrent().eval()
    calib = torch.randn(4, 3, 8, 8, generator=torch.Generator().manual_seed(6))
    calibrations = Calibrations()
    built = [variant_module(model, VariantPlan("fp8", "all"), calib, torch.float32, calibrations) for _ in range(2)]
    for one in built:
        assert one.quantized == {"conv", "fc"}
        assert type(one.module.lstm) is torch.nn.LSTM and type(one.module.pool) is torch.nn.AdaptiveAvgPool1d
        with torch.no_grad():
            pixels = one.module.features(calib)
            torch.testing.assert_close(one.module.lstm(pixels)[0], model.lstm(pixels)[0], rtol=0, atol=0)
    assert built[0].module is not built[1].module


def test_converting_only_holds_out_the_outermost_modules_without_a_selected_layer_and_puts_them_back():
    from builders.pytorch.variant_modules import _converting_only

    conv = torch.nn.Sequential(torch.nn.Conv2d(3, 3, 1), torch.nn.ReLU())
    inner = torch.nn.Sequential(conv, torch.nn.LSTM(3, 3), torch.nn.Sequential(torch.nn.ReLU()))
    model = torch.nn.Sequential(inner, torch.nn.Linear(3, 3), torch.nn.Sequential(torch.nn.GRU(3, 3)))
    before = dict(model.named_modules())
    with _converting_only(model, ["0.0.0", "1"]):
        inside = {path: type(sub).__name__ for path, sub in model.named_modules()}
    assert inside == {"": "Sequential", "0": "Sequential", "0.0": "Sequential", "0.0.0": "Conv2d",
                      "0.0.1": "Identity", "0.1": "Identity", "0.2": "Identity", "1": "Linear", "2": "Identity"}
    assert dict(model.named_modules()) == before
