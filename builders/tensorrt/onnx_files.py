"""The ONNX files a TensorRT study builds from, written without TensorRT: one per variant."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from builders.tensorrt.onnx_export import QdqCounts, qdq_counts
from builders.tensorrt.onnx_source import variant_onnx
from sessions.documents.plan import VariantPlan


@dataclass
class OnnxFile:
    variant: str
    path: Path
    counts: QdqCounts


def write_onnx_files(model, variants: list[VariantPlan], static_input, calibration, folder: Path) -> list[OnnxFile]:
    """fp16 as a plain fp16 graph (strongly typed); FP8 as fp16 with standard FP8 Q/DQ pairs."""
    import onnx

    files = []
    for variant in variants:
        source = variant_onnx(model, variant, calibration, static_input, folder)
        files.append(OnnxFile(variant.name, source.path,
                              qdq_counts(onnx.load(str(source.path), load_external_data=False))))
    return files
