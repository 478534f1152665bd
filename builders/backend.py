"""The one small interface every engine backend implements (PyTorch, TensorRT)."""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass, field
from typing import Any, Protocol

from sessions.errors import InputError
from sessions.model import Layer, Variant

PRECISIONS = ("fp32", "fp16", "bf16", "fp8")


@dataclass(frozen=True)
class VariantSpec:
    """What to build: a precision, and for FP8 a layout and exclusion patterns."""

    precision: str
    layout: str | None = None
    exclude: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return f"fp8-{self.layout}" if self.precision == "fp8" else self.precision


def parse_variants(text: str, layouts: list[str], exclude: list[str]) -> list[VariantSpec]:
    """`fp16,fp8` with layouts [all, no-se] -> fp16, fp8-all, fp8-no-se; `fp8-no-se` names one directly."""
    specs: list[VariantSpec] = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        match = re.fullmatch(r"fp8(?:-(.+))?", item)
        if match:
            for layout in [match.group(1)] if match.group(1) else layouts:
                specs.append(VariantSpec("fp8", layout, tuple(exclude)))
        elif item in PRECISIONS:
            specs.append(VariantSpec(item))
        else:
            raise InputError(f"unknown variant {item!r}; use {', '.join(PRECISIONS)} or fp8-<layout>")
    unique = list(dict.fromkeys(specs))
    if not unique:
        raise InputError("no variants given")
    return unique


@dataclass
class BuildResult:
    engine: "Engine"
    variant: Variant  # name, precision, recipe, build_s, artifact_bytes filled in
    notes: list[str] = field(default_factory=list)


class Engine(Protocol):
    """One built variant, bound to a static input of the study's batch size."""

    def infer(self, batch: Any) -> Any:
        """Outputs (logits) for a float32 CPU batch, as a float32 CPU tensor."""

    def run_once(self) -> None:
        """One eager inference on the static input (what the tracers record)."""

    def timing_step(self) -> tuple[Any, bool]:
        """The callable the timer repeats, and whether it replays a CUDA graph."""

    def layer_ranges(self, kind: str) -> contextlib.AbstractContextManager:
        """While active, each layer runs inside a range of `kind` (nvtx | annotation)."""

    def layers(self) -> list[Layer]:
        """The engine's layers in execution order, with what is known before tracing."""

    def release(self) -> None:
        """Free device memory."""

    # Optional: `layer_times(calls) -> dict[str, float]`, per-layer times from the engine's own
    # profiler (TensorRT's IProfiler), which the study prefers to kernel sums where it exists.


class Backend(Protocol):
    name: str  # torch | tensorrt

    def build(self, spec: VariantSpec, calibration: Any) -> BuildResult: ...

    def reference(self, batch: Any) -> Any:
        """fp32 outputs for quality comparisons."""
