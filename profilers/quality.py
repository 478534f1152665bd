"""Quality of a variant against the fp32 reference on the same real images (numpy: any backend's outputs)."""

from __future__ import annotations

from typing import Any

import numpy as np

from sessions.model import Quality


def class_logits(output: Any) -> np.ndarray:
    """(N, C) or (N, C, H, W...) -> rows of class logits, one per image or per pixel."""
    array = np.asarray(output, dtype=np.float64)
    if array.ndim == 2:
        return array
    return np.moveaxis(array, 1, -1).reshape(-1, array.shape[1])


def _log_softmax(x: np.ndarray) -> np.ndarray:
    shifted = x - x.max(axis=1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))


def compare(reference: Any, candidate: Any, reference_name: str, image_source: str, images: int) -> Quality:
    ref = class_logits(reference)
    cand = class_logits(candidate)
    nonfinite = int((~np.isfinite(cand)).sum())
    cand_clean = np.nan_to_num(cand, nan=0.0, posinf=0.0, neginf=0.0)
    agreement = float((ref.argmax(axis=1) == cand_clean.argmax(axis=1)).mean())
    log_p = _log_softmax(ref)
    log_q = _log_softmax(cand_clean)
    kl = max(0.0, float((np.exp(log_p) * (log_p - log_q)).sum(axis=1).mean()))  # >= 0; rounding can dip below
    return Quality(
        reference=reference_name,
        image_source=image_source,
        images=images,
        top1_agreement=agreement,
        mean_kl=kl,
        max_abs_logit_error=float(np.abs(ref - cand_clean).max()),
        nonfinite=nonfinite,
    )
