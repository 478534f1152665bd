"""Quality of a variant against the fp32 reference on the same real images."""

from __future__ import annotations

import torch

from sessions.model import Quality


def class_logits(output: torch.Tensor) -> torch.Tensor:
    """(N, C) or (N, C, H, W...) -> rows of class logits, one per image or per pixel."""
    output = output.float()
    if output.dim() == 2:
        return output
    return output.movedim(1, -1).reshape(-1, output.shape[1])


def compare(reference: torch.Tensor, candidate: torch.Tensor, reference_name: str, image_source: str, images: int) -> Quality:
    ref = class_logits(reference)
    cand = class_logits(candidate)
    nonfinite = int((~torch.isfinite(cand)).sum())
    cand_clean = torch.nan_to_num(cand, nan=0.0, posinf=0.0, neginf=0.0)
    agreement = (ref.argmax(dim=1) == cand_clean.argmax(dim=1)).float().mean().item()
    log_p = torch.log_softmax(ref, dim=1)
    log_q = torch.log_softmax(cand_clean, dim=1)
    kl = max(0.0, (log_p.exp() * (log_p - log_q)).sum(dim=1).mean().item())  # >= 0; rounding can dip below
    return Quality(
        reference=reference_name,
        image_source=image_source,
        images=images,
        top1_agreement=agreement,
        mean_kl=kl,
        max_abs_logit_error=(ref - cand_clean).abs().max().item(),
        nonfinite=nonfinite,
    )
