"""Quality figures: per-pixel agreement with fp32 and fp16, mIoU, stress inputs, the disjoint image split."""

import numpy as np
import pytest

from profilers.images import split, stress_inputs
from profilers.quality import compare, mean_iou, predicted_classes, stress_check
from sessions.documents.errors import InputError


def logits_for(classes: np.ndarray, num_classes: int = 3) -> np.ndarray:
    """N x C x H x W logits whose argmax is `classes` (N x H x W)."""
    return np.moveaxis(np.eye(num_classes)[classes], -1, 1) * 5.0


def test_segmentation_agreement_with_fp32_and_fp16_per_pixel():
    fp32 = np.zeros((2, 4, 4), int)
    fp16 = fp32.copy()
    fp16[0, 0, 0] = 1  # one pixel of 32 differs from fp32
    fp8 = fp32.copy()
    fp8[1, :2, :] = 2  # 8 pixels differ from fp32, 9 from fp16
    quality = compare(logits_for(fp32), logits_for(fp8), "fp32", "test", 2,
                      ("fp16", predicted_classes(logits_for(fp16))))
    assert quality.task == "segmentation"
    assert quality.top1_agreement == pytest.approx(24 / 32)
    assert quality.baseline == "fp16" and quality.agreement_baseline == pytest.approx(23 / 32)


def test_miou_against_label_maps_ignores_255_and_resizes_predictions():
    predicted = np.array([[[0, 1], [1, 1]]])  # 2 x 2 output, labels at 4 x 4
    mask = np.array([[0, 0, 1, 1], [0, 0, 1, 1], [1, 1, 1, 1], [255, 255, 1, 1]])
    # class 0: 4 predicted, 4 labelled, 4 shared -> 1; class 1: 10 predicted (2 ignored), 10 labelled -> 1
    assert mean_iou(predicted, [mask], 3) == pytest.approx(1.0)
    mask2 = mask.copy()
    mask2[0, 0] = 1  # one class-0 pixel labelled 1: class 0 IoU 3/4, class 1 IoU 10/11
    assert mean_iou(predicted, [mask2], 3) == pytest.approx((3 / 4 + 10 / 11) / 2)
    labelled = compare(logits_for(predicted), logits_for(predicted), "fp32", "t", 1, masks=[mask2])
    assert labelled.miou == pytest.approx((3 / 4 + 10 / 11) / 2) and labelled.labelled_images == 1


def test_stress_inputs_cover_the_kinds_and_nonfinite_outputs_are_named():
    inputs = stress_inputs((3, 8, 8))
    names = [name for name, _ in inputs]
    assert {"zeros", "saturated low", "saturated high", "extreme +-65504", "noise sigma 100"} <= set(names)
    assert all(array.shape == (3, 8, 8) and array.dtype == np.float32 for _, array in inputs)
    with np.errstate(over="ignore"):
        overflow = stress_check(lambda x: np.asarray(x, np.float16) * np.float16(2), inputs)  # fp16 overflows at 65504
    assert overflow == ["extreme +-65504"]


def test_split_is_disjoint_at_a_fixed_stride():
    chosen = split(2000, 500, 1500)  # the SENet study's numbers: stride 1
    assert chosen.stride == 1 and len(chosen.calibration) == 500 and len(chosen.evaluation) == 1500
    assert not set(chosen.calibration) & set(chosen.evaluation)
    wide = split(50000, 500, 1500)
    assert wide.stride == 25 and sorted(wide.calibration + wide.evaluation) == list(range(0, 50000, 25))
    assert wide.calibration[:2] == [75, 175]  # spread over the whole set, not its first quarter
    with pytest.raises(InputError, match="only 18 are available"):
        split(18, 16, 4)


def test_classification_figures_image_by_image_equal_the_whole_batch_formulas():
    rng = np.random.default_rng(0)
    ref, cand = rng.normal(size=(5, 7)), rng.normal(size=(5, 7))
    cand[2, 3] = np.nan
    quality = compare(ref, cand, "fp32", "t", 5)
    clean = np.nan_to_num(cand)
    log_p = ref - np.log(np.exp(ref).sum(1, keepdims=True))
    log_q = clean - np.log(np.exp(clean).sum(1, keepdims=True))
    assert quality.top1_agreement == pytest.approx((ref.argmax(1) == clean.argmax(1)).mean())
    assert quality.mean_kl == pytest.approx((np.exp(log_p) * (log_p - log_q)).sum(1).mean())
    assert quality.max_abs_logit_error == pytest.approx(np.abs(ref - clean).max())
    assert quality.nonfinite == 1 and quality.task == "classification"


def test_real_fp8_segmentation_says_pixel_agreement_with_fp32_and_with_the_simulated_variant() -> None:
    from sessions.analyses.summary import simulation_lines
    from sessions.documents.model import Session, Study, Variant

    fp32 = np.zeros((2, 4, 4), int)
    real = fp32.copy()
    real[0, :1, :] = 1  # 4 of 32 pixels differ from fp32
    simulated = real.copy()
    simulated[1, 3, 3] = 2  # 1 of 32 pixels differs from the real engine
    variant = Variant(name="cudnn-fp8-encoder-linears", backend="cudnn", precision="fp8", device="cuda")
    variant.quality = compare(logits_for(fp32), logits_for(real), "fp32 (PyTorch)", "test", 2)
    variant.simulation = compare(logits_for(simulated), logits_for(real), "fp8-encoder-linears simulated", "test", 2)
    study = Study(model="m", source="hf", input_shape=[3, 16, 16], batch=1, command=[], created="", backend="torch",
                  device="cuda", tool_version="0")
    session = Session(study=study, environment=None, method=None, variants=[variant])  # type: ignore[arg-type]
    assert simulation_lines(session) == [
        ("cudnn-fp8-encoder-linears (real FP8): pixel agreement 87.50 % with fp32 (PyTorch), 96.88 % with "
         "fp8-encoder-linears simulated, over pixels of 2 images; largest logit difference from the simulated 5")]


def test_real_fp8_that_ran_layers_in_higher_precision_says_the_simulation_differs_by_construction() -> None:
    """The simulation quantizes every layer of the recipe; where the engine ran some of them fp16 (by timing or
    refused), the line says how many of how many, counted here from the layers as the test builds them."""
    from sessions.analyses.summary import simulation_lines
    from sessions.documents.model import Layer, Session, Study, Variant

    logits = logits_for(np.zeros((2, 4, 4), int))
    variant = Variant(name="cudnn-fp8-all", backend="cudnn", precision="fp8", device="cuda")
    variant.simulation = compare(logits, logits, "fp8-all simulated", "test", 2)
    variant.layers = [Layer(name=f"conv{i}", kind="conv", precision=precision, attrs={"asked": "fp8"})
                      for i, precision in enumerate(["fp8", "fp16", "fp16", "fp8", "fp8"])]
    variant.layers.append(Layer(name="conv0.input_quantizer", kind="quantize", op="quantize", precision="fp8",
                                attrs={"asked": "fp8"}))
    variant.layers.append(Layer(name="stem", kind="conv", precision="fp16", attrs={"asked": "fp16"}))
    study = Study(model="m", source="hf", input_shape=[3, 16, 16], batch=1, command=[], created="", backend="torch",
                  device="cuda", tool_version="0")
    session = Session(study=study, environment=None, method=None, variants=[variant])  # type: ignore[arg-type]
    (line,) = simulation_lines(session)
    assert line.endswith("the engine ran 2 of those 5 in higher precision (by timing or refused), so they differ "
                         "by construction")
    variant.layers = [layer for layer in variant.layers if layer.precision == "fp8" or layer.name == "stem"]
    (line,) = simulation_lines(session)
    assert "differ by construction" not in line
