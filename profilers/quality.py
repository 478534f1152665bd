"""Quality of a variant against the fp32 reference on the same real images (numpy: any backend's outputs).

Classification: top-1 agreement, KL, largest logit error, and that error over the reference's scale (its largest
|logit|). Segmentation (outputs N x C x H x W): the same per pixel, so `top1_agreement` is the fraction of pixels
whose class equals fp32's; `agreement_baseline` the fraction equal to the baseline variant (fp16); mIoU against label
maps. A reference whose logits are degenerate (huge, the same or nearly the same for every class, the same for every
image, not finite) is named in `Quality.reference_warnings`: agreement and KL then say little about the variant.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from sessions.documents.model import Quality

FP16_MAX = 65504.0  # fp16's largest finite value: logits past it are not class scores an fp16 variant can hold
SAME = 1e-5  # logits within this fraction of the reference's scale are taken as equal (fp32 rounds at about 1e-7)
# A row whose most likely class is at most this fraction more likely than 1 / classes is near uniform: KL(p || uniform)
# is then at most ln(1 + NEAR_UNIFORM), about 0.01 nats, so a variant that outputs one logit for every class scores a
# KL no worse than an FP8 recipe's, and top-1 picks among classes the reference does not tell apart.
NEAR_UNIFORM = 0.01


def class_logits(output: Any) -> np.ndarray:
    """(N, C) or (N, C, H, W...) -> rows of class logits, one per image or per pixel."""
    array = np.asarray(output, dtype=np.float64)
    if array.ndim == 2:
        return array
    return np.moveaxis(array, 1, -1).reshape(-1, array.shape[1])


def predicted_classes(output: Any) -> np.ndarray:
    """Argmax over the class axis: (N,) for classification, (N, H, W) for segmentation."""
    array = np.nan_to_num(np.asarray(output, dtype=np.float32), nan=0.0, posinf=0.0, neginf=0.0)
    return array.argmax(axis=1).astype(np.int32)


def _log_softmax(x: np.ndarray) -> np.ndarray:
    shifted = x - x.max(axis=1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))


def compare(reference: Any, candidate: Any, reference_name: str, image_source: str, images: int,
            baseline: tuple[str, np.ndarray] | None = None, masks: Sequence[np.ndarray] = ()) -> Quality:
    """`baseline`: (variant name, its predicted_classes) to count agreement with; `masks`: label maps.

    Image by image, so that segmentation outputs (150 classes x 160 x 160 per image) stay small in float64.
    """
    totals = np.zeros(4)  # rows, agreeing rows, KL sum, nonfinite values
    max_error = scale = 0.0  # scale: the reference's largest finite |logit|
    reference_nonfinite = 0
    spans: list[np.ndarray] = []  # per row (image or pixel): the reference's largest minus smallest logit
    lifts: list[np.ndarray] = []  # per row: classes x the reference's largest probability, minus 1 (0: uniform)
    differences: list[float] = []  # per image: the largest |logit - the first finite image's logit| of the reference
    first: np.ndarray | None = None
    for ref_image, cand_image in zip(np.asarray(reference), np.asarray(candidate), strict=False):
        ref, cand = class_logits(ref_image[None]), class_logits(cand_image[None])
        cand_clean = np.nan_to_num(cand, nan=0.0, posinf=0.0, neginf=0.0)
        log_p, log_q = _log_softmax(ref), _log_softmax(cand_clean)
        totals += (len(ref), (ref.argmax(axis=1) == cand_clean.argmax(axis=1)).sum(),
                   (np.exp(log_p) * (log_p - log_q)).sum(), (~np.isfinite(cand)).sum())
        finite = np.isfinite(ref)
        if finite.any():  # the error where the reference is a number; its NaN/Inf are counted apart
            max_error = max(max_error, float(np.abs(ref - cand_clean)[finite].max()))
        ref_clean = np.where(finite, ref, 0.0)
        reference_nonfinite += int((~finite).sum())
        scale = max(scale, float(np.abs(ref_clean).max()))
        # a row or image holding NaN/Inf is never "the same": its own line names it
        spans.append(np.where(finite.all(axis=1), ref_clean.max(axis=1) - ref_clean.min(axis=1), np.inf))
        lifts.append(np.where(finite.all(axis=1), ref.shape[1] * np.exp(log_p.max(axis=1)) - 1.0, np.inf))
        if finite.all():
            first = ref_clean if first is None else first
        differences.append(float(np.abs(ref_clean - first).max()) if finite.all() and first is not None else np.inf)
    task = "segmentation" if np.ndim(candidate) == 4 else "classification"
    quality = Quality(
        reference=reference_name,
        image_source=image_source,
        images=images,
        top1_agreement=float(totals[1] / totals[0]),
        mean_kl=max(0.0, float(totals[2] / totals[0])),  # >= 0; rounding can dip below
        max_abs_logit_error=max_error,
        nonfinite=int(totals[3]),
        task=task,
        reference_scale=scale,
        relative_error=max_error / scale if scale > 0 else None,
        reference_warnings=degenerate_reference(reference_name, scale, reference_nonfinite, np.concatenate(spans),
                                                np.concatenate(lifts), np.asarray(differences),
                                                "pixels" if task == "segmentation" else "images"),
    )
    classes = predicted_classes(candidate)
    if baseline is not None:
        quality.baseline, quality.agreement_baseline = baseline[0], float((classes == baseline[1]).mean())
    if len(masks) and quality.task == "segmentation":
        quality.miou, quality.labelled_images = mean_iou(classes, masks, np.shape(candidate)[1]), len(masks)
    return quality


def degenerate_reference(name: str, scale: float, nonfinite: int, spans: np.ndarray, lifts: np.ndarray,
                         differences: np.ndarray, rows: str) -> list[str]:
    """One line per way the reference `name`'s logits are degenerate, none where they look like class scores.

    `scale`: the largest finite |logit|; `nonfinite`: NaN/Inf logits; `spans`: per row (`rows`: images or pixels) the
    largest minus the smallest logit; `lifts`: per row, classes x the largest softmax probability, minus 1;
    `differences`: per image the largest difference from the first image's logits.
    Logits within SAME x `scale` of each other count as equal. Huge: past fp16's range (a trained classifier's logits
    are tens). The same for every class: argmax is a tie and KL compares uniform distributions. Nearly the same for
    every class (a row not the same whose lift is at most NEAR_UNIFORM, whatever the logits' scale: tiny logits):
    top-1 and KL say little (NEAR_UNIFORM). The same for every image (two or more): the output does not depend on the
    input.
    """
    lines = []
    if nonfinite:
        lines.append(f"{name} holds {nonfinite} NaN/Inf logits")
    if scale > FP16_MAX:
        lines.append(f"{name} logits reach {scale:.3g}, past fp16's largest value {FP16_MAX:g}")
    tolerance = SAME * scale
    constant = spans <= tolerance
    if constant.any():
        lines.append(f"{name} logits are the same for every class on {int(constant.sum())} of {len(spans)} {rows}")
    near_uniform = int(((lifts <= NEAR_UNIFORM) & ~constant).sum())
    if near_uniform:
        lines.append(f"{name} logits are nearly the same for every class on {near_uniform} of {len(lifts)} {rows}: "
                     f"no class is {NEAR_UNIFORM:.0%} more likely than uniform, so top-1 picks among near-ties, and "
                     f"one logit for every class would score a KL below {math.log1p(NEAR_UNIFORM):.2g}")
    if len(differences) > 1 and bool((differences <= tolerance).all()):
        lines.append(f"{name} logits are the same for all {len(differences)} images: the output does not depend "
                     "on the input")
    return lines


def mean_iou(predicted: np.ndarray, masks: Sequence[np.ndarray], num_classes: int, ignore: int = 255) -> float:
    """Mean over classes present in predictions or labels of intersection / union, summed over all images.

    Predictions (at the network's output resolution) are resized to each label map by nearest neighbour.
    """
    intersection = np.zeros(num_classes, np.int64)
    union = np.zeros(num_classes, np.int64)
    for pred, mask in zip(predicted, masks, strict=False):
        rows = np.arange(mask.shape[0]) * pred.shape[0] // mask.shape[0]
        cols = np.arange(mask.shape[1]) * pred.shape[1] // mask.shape[1]
        resized = pred[rows][:, cols]
        valid = mask != ignore
        p, t = resized[valid], mask[valid]
        intersection += np.bincount(t[p == t], minlength=num_classes)[:num_classes]
        area_p = np.bincount(p, minlength=num_classes)[:num_classes]
        area_t = np.bincount(t, minlength=num_classes)[:num_classes]
        union += area_p + area_t - np.bincount(t[p == t], minlength=num_classes)[:num_classes]
    present = union > 0
    return float((intersection[present] / union[present]).mean()) if present.any() else 0.0


def stress_check(infer: Callable[[Any], Any], inputs: Sequence[tuple[str, Any]]) -> list[str]:
    """The names of the stress inputs whose output holds NaN or Inf."""
    return [name for name, batch in inputs if not np.isfinite(np.asarray(infer(batch), dtype=np.float64)).all()]
