"""Quality that means something: the error over the reference's scale beside the absolute error,
and a warning where the reference's logits are degenerate. Expected figures from plain Python loops over the values."""

from __future__ import annotations

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
