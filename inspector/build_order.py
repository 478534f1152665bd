"""The line a study reports before its builds: its variants in the order they are built, each with the backend that
builds it, as text and as data, so that the time left (`inspector.eta.Estimate`) can time the variants to go from
the finished variants of their own backend (docs/method.md, "Time left")."""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Self


class BuildOrder(str):
    """`variants, in build order: fp16 (PyTorch); cudnn-fp16, cudnn-fp8-all (cuDNN / cuBLASLt engine)`, carrying
    `backends` (variant name -> the label of the backend that builds it, in build order) as data: whoever reads the
    order takes `backends`, never the names back out of the text."""

    backends: dict[str, str]

    def __new__(cls, backends: Mapping[str, str]) -> Self:
        runs = itertools.groupby(backends.items(), key=lambda item: item[1])
        text = "variants, in build order: " + "; ".join(
            f"{', '.join(name for name, _ in run)} ({label})" for label, run in runs)
        line = super().__new__(cls, text)
        line.backends = dict(backends)
        return line

    def __getnewargs__(self) -> tuple[dict[str, str]]:  # type: ignore[override]  # str's: the text alone
        """What a copy or a pickle builds the line again from: the backends by variant."""
        return (self.backends,)
