"""What building a model on the meta device costs, with PyTorch's meta device alone and with
`builders.models.meta_build.meta_device` (in-place value ops skipped, batch norm shaped like its input), and the
structure pass on each: the figures `builders/models/meta_build.py` states. Best of three, in seconds, on this
machine's CPU.

    python benchmarks/meta_build_cost.py [MODEL]    (senet154 by default)
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

import torch

from builders.models import structure as structures
from builders.models.catalog import load_model
from builders.models.meta_build import meta_device


def best_of_three(work: Callable[[], object]) -> float:
    times = []
    for _ in range(3):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return min(times)


def main(name: str) -> None:
    load_model(name)  # imports and timm's registry out of the timed calls
    contexts: dict[str, Callable[[], AbstractContextManager[Any]]] = {
        "torch.device('meta')": lambda: torch.device("meta"), "meta_device()": meta_device}
    print(f"{name}, torch {torch.__version__}, {torch.get_num_threads()} threads")
    for label, context in contexts.items():
        build = best_of_three(lambda context=context: load_model(name, construct=context))
        model = load_model(name, construct=context)

        def structure(model: Any = model, context: Callable[[], AbstractContextManager[Any]] = context) -> None:
            structures._CACHE.pop(model.module, None)  # found afresh each time
            with context():
                structures.model_structure(model.module, torch.zeros(1, *model.input_size))

        print(f"{label:22s} build {build:.3f} s, structure pass {best_of_three(structure):.3f} s")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "senet154")
