"""Quality that means something: the error over the reference's scale beside the absolute error,
and a warning where the reference's logits are degenerate. Expected figures from plain Python loops over the values."""

from __future__ import annotations

import math

import numpy as np
import pytest

from profilers.quality import compare


def logits(images: int = 8, classes: int = 10, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).normal(0.0, 3.0, (images, classes)).astype(np.float32)


def largest_abs(values: np.ndarray) -> float:
    return max(abs(float(v)) for v in values.ravel().tolist())


def test_relative_error_is_the_largest_error_over_the_references_largest_logit():
    ref = logits()
    cand = ref + np.random.default_rng(1).normal(0.0, 0.05, ref.shape).astype(np.float32)
    quality = compare(ref, cand, "fp32", "test", len(ref))
    error = max(abs(float(a) - float(b)) for a, b in zip(ref.ravel().tolist(), cand.ravel().tolist(), strict=False))
    assert quality.max_abs_logit_error == pytest.approx(error)
    assert quality.reference_scale == pytest.approx(largest_abs(ref))
    assert quality.relative_error == pytest.approx(error / largest_abs(ref))
    assert quality.reference_warnings == []  # class scores of a working network: nothing to warn of


def test_huge_logits_are_named_and_their_relative_error_stays_readable():
    """The issue's case: random weights, logits of 1e12, an absolute error of 5.8e10 that says nothing alone."""
    ref = logits() * np.float32(1e12 / 9.0)
    cand = ref * np.float32(1.058)
    quality = compare(ref, cand, "fp32 (PyTorch)", "test", len(ref))
    assert quality.max_abs_logit_error > 1e10
    assert quality.relative_error == pytest.approx(0.058, rel=1e-3)  # cand = ref x 1.058: 5.8 % of the scale
    assert quality.reference_warnings == [
        f"fp32 (PyTorch) logits reach {largest_abs(ref):.3g}, past fp16's largest value 65504"]


def test_logits_the_same_for_every_class_are_named_with_the_images_they_hold_on():
    ref = logits()
    ref[[1, 4, 6]] = 7.25  # three images whose logits do not tell the classes apart
    quality = compare(ref, ref.copy(), "fp32", "test", len(ref))
    assert quality.reference_warnings == ["fp32 logits are the same for every class on 3 of 8 images"]


def test_logits_the_same_for_every_image_are_named():
    ref = np.tile(logits(1), (6, 1))  # one answer whatever the image
    ref[3] += np.float32(1e-6)  # fp32 rounding of the same computation stays "the same"
    quality = compare(ref, ref.copy(), "fp32", "test", len(ref))
    assert quality.reference_warnings == [
        "fp32 logits are the same for all 6 images: the output does not depend on the input"]
    one = compare(ref[:1], ref[:1].copy(), "fp32", "test", 1)
    assert one.reference_warnings == []  # one image is not "the same for every image"


def test_a_reference_with_nonfinite_logits_is_named_and_its_scale_is_of_the_finite_ones():
    ref = logits()
    ref[2, 3] = np.inf
    ref[5, 0] = np.nan
    quality = compare(ref, logits(seed=3), "fp32", "test", len(ref))
    finite = ref[np.isfinite(ref)]
    assert quality.reference_scale == pytest.approx(largest_abs(finite))
    assert quality.reference_warnings == ["fp32 holds 2 NaN/Inf logits"]


def test_a_reference_of_nan_only_is_named_as_such_not_as_the_same_for_every_class_or_image():
    """fp32 itself overflowed (weights past its range): NaN everywhere, which is not logits that tie."""
    ref = np.full((5, 4), np.nan, np.float32)
    ref[2] = np.inf
    quality = compare(ref, logits(5, 4), "fp32", "test", 5)
    assert quality.reference_warnings == ["fp32 holds 20 NaN/Inf logits"]
    partly = np.tile(logits(1, 4), (3, 1))
    partly[:, 0] = 0.0
    partly[1, 0] = np.nan  # two finite images alike, one not finite (zero where finite): not "the same for all"
    assert compare(partly, partly.copy(), "fp32", "test", 3).reference_warnings == ["fp32 holds 1 NaN/Inf logits"]


def test_an_all_zero_reference_has_no_relative_error_and_is_named_twice():
    ref = np.zeros((4, 5), np.float32)
    quality = compare(ref, logits(4, 5), "fp32", "test", 4)
    assert quality.reference_scale == 0.0 and quality.relative_error is None
    assert quality.reference_warnings == ["fp32 logits are the same for every class on 4 of 4 images",
                                          ("fp32 logits are the same for all 4 images: the output does not depend "
                                           "on the input")]


def test_segmentation_counts_constant_pixels():
    rng = np.random.default_rng(4)
    ref = rng.normal(0.0, 2.0, (2, 3, 4, 4)).astype(np.float32)  # 2 images, 3 classes, 16 pixels each
    ref[0, :, 0, :2] = 1.5  # two pixels of image 0 whose classes tie
    quality = compare(ref, ref.copy(), "fp32", "test", 2)
    assert quality.task == "segmentation"
    assert quality.reference_warnings == ["fp32 logits are the same for every class on 2 of 32 pixels"]


def test_an_inf_in_the_reference_leaves_every_figure_a_number_the_session_can_hold(tmp_path):
    """The error is taken where the reference is a number (its NaN/Inf are counted apart): a session with an Inf
    logit in its reference is written and read back."""
    rng = np.random.default_rng(5)
    ref = rng.normal(size=(3, 10)).astype(np.float32)
    cand = ref + np.float32(0.25)
    ref[1, 4] = np.inf
    quality = compare(ref, cand, "fp32", "test", len(ref))
    finite = np.isfinite(ref)
    assert quality.max_abs_logit_error == pytest.approx(float(np.abs(ref - cand)[finite].max()))
    assert np.isfinite(quality.max_abs_logit_error)


def near_uniform_rows(ref: np.ndarray) -> int:
    """Rows whose largest softmax probability is at most 1 % above 1 / classes, and whose logits are not all equal:
    softmax by math.exp over each row's values."""
    found = 0
    for row in ref.tolist():
        weights = [math.exp(v - max(row)) for v in row]
        if max(weights) / sum(weights) * len(row) <= 1.01 and max(row) != min(row):
            found += 1
    return found


def nearly_the_same(count: int, rows: int, unit: str = "images") -> str:
    return (f"fp32 logits are nearly the same for every class on {count} of {rows} {unit}: no class is 1% more likely "
            "than uniform, so top-1 picks among near-ties, and one logit for every class would score a KL below 0.01")


def test_tiny_logits_whose_softmax_is_near_uniform_are_named_whatever_their_scale():
    """lcnet_050's case: logits of about 1e-6, a softmax uniform to 1e-6, where top-1 and KL say nothing though every
    logit differs from the others by far more than fp32 rounds."""
    ref = logits() * np.float32(1e-6 / 3.0)
    cand = ref + np.random.default_rng(2).normal(0.0, 2e-7, ref.shape).astype(np.float32)
    assert near_uniform_rows(ref) == 8
    quality = compare(ref, cand, "fp32", "test", len(ref))
    assert quality.reference_warnings == [nearly_the_same(8, 8)]


def test_near_uniform_rows_are_counted_apart_from_equal_ones_and_from_class_scores():
    ref = logits(6, 100)
    ref[1] = 0.5  # equal: named as the same, not again as nearly the same
    ref[2] = 0.0
    ref[2, 7] = 0.009  # the top class 0.9 % more likely than uniform
    ref[3] = 0.0
    ref[3, 7] = 0.012  # 1.2 %: class scores, barely
    ref[4] *= np.float32(1e-4)
    assert near_uniform_rows(ref) == 2
    quality = compare(ref, ref.copy(), "fp32", "test", len(ref))
    assert quality.reference_warnings == ["fp32 logits are the same for every class on 1 of 6 images",
                                          nearly_the_same(2, 6)]


def test_huge_and_constant_logits_are_not_called_nearly_the_same():
    assert compare(logits() * np.float32(1e12), logits(), "fp32", "test", 8).reference_warnings == [
        f"fp32 logits reach {largest_abs(logits() * np.float32(1e12)):.3g}, past fp16's largest value 65504"]
    constant = np.full((3, 10), 2.5, np.float32)
    assert compare(constant, logits(3), "fp32", "test", 3).reference_warnings == [
        "fp32 logits are the same for every class on 3 of 3 images",
        "fp32 logits are the same for all 3 images: the output does not depend on the input"]


def test_segmentation_pixels_of_a_near_uniform_softmax_are_counted():
    ref = np.random.default_rng(6).normal(0.0, 2.0, (1, 4, 2, 3)).astype(np.float32)  # 4 classes, 6 pixels
    ref[0, :, 1, :] *= np.float32(1e-3)  # three pixels of near-uniform softmax
    pixels = np.moveaxis(ref, 1, -1).reshape(-1, 4)
    assert near_uniform_rows(pixels) == 3
    assert compare(ref, ref.copy(), "fp32", "test", 1).reference_warnings == [nearly_the_same(3, 6, "pixels")]


def test_a_model_whose_head_outputs_tiny_logits_is_named():
    """A network as random initialisation can leave it: a head of weights near zero (lcnet_050's), so every image's
    logits are about 1e-6 and its fp16 copy agrees on top-1 by chance."""
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1),
                                torch.nn.Flatten(), torch.nn.Linear(16, 1000)).eval()
    with torch.no_grad():
        model[-1].weight.mul_(1e-6)
        model[-1].bias.zero_()
        images = torch.randn(4, 3, 16, 16, generator=torch.Generator().manual_seed(1))
        ref, cand = model(images).numpy(), model.half()(images.half()).float().numpy()
    assert near_uniform_rows(ref) == 4
    assert compare(ref, cand, "fp32", "test", 4).reference_warnings == [nearly_the_same(4, 4)]
