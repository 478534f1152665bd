"""What a study records of any model, whatever its source."""

from __future__ import annotations

from dataclasses import dataclass

from sessions.documents.vocab import Source


@dataclass
class ModelInfo:
    """builders.models.catalog.LoadedModel adds the PyTorch module and the input transform."""

    name: str
    source: Source
    input_size: tuple[int, ...]  # one sample
