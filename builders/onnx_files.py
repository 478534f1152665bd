"""The ONNX files a TensorRT study builds from, written without TensorRT: one per variant."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from builders.backend import VariantSpec
from builders.onnx_export import QdqCounts, export, qdq_counts


@dataclass
class OnnxFile:
    variant: str
    path: Path
    counts: QdqCounts


def onnx_backend(model, static_input):
    """The PyTorch backend the files are exported from: on the CPU, FP8 on an fp16 model as TensorRT runs it."""
    import torch

    from builders.torch_backend import TorchBackend

    return TorchBackend(model, "cpu", static_input, fp8_base=torch.float16)


def write_onnx_files(model, specs: list[VariantSpec], static_input, calibration, folder: Path) -> list[OnnxFile]:
    """fp16 as a plain fp16 graph (strongly typed); FP8 as fp16 with standard FP8 Q/DQ pairs."""
    import onnx

    backend = onnx_backend(model, static_input)
    files = []
    for spec in specs:
        engine = backend.build(spec, calibration).engine
        path = export(engine.module, engine.static_input, folder / f"{model.name}-{spec.name}.onnx")
        files.append(OnnxFile(spec.name, path, qdq_counts(onnx.load(str(path), load_external_data=False))))
    return files
