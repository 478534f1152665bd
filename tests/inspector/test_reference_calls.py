"""The fp32 reference's calls: the study's batches joined, in order, into calls of up to
`REFERENCE_IMAGES_PER_CALL` images (a larger study batch stays as it is), every image once."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from inspector.study import REFERENCE_IMAGES_PER_CALL, reference_calls, reference_outputs


def numbered(count: int, batch: int) -> list[np.ndarray]:
    """`count` one-value images numbered 0.. in batches of `batch` (the last one shorter)."""
    images = np.arange(count, dtype=np.float32).reshape(count, 1)
    return [images[start:start + batch] for start in range(0, count, batch)]


@pytest.mark.parametrize(("count", "batch", "sizes"), [
    (18, 1, [18]),  # the main job: eighteen batch-1 forwards become one
    (40, 1, [32, 8]),
    (45, 20, [20, 25]),  # the first two do not fit together; the short last one joins the second
    (128, 64, [64, 64]),  # batches over the limit stay as they are
    (3, 3, [3]),
])
def test_the_batches_join_in_order_into_calls_of_at_most_the_limit(count, batch, sizes):
    assert REFERENCE_IMAGES_PER_CALL == 32  # the sizes above are written for it
    calls = reference_calls(numbered(count, batch))
    assert [len(call) for call in calls] == sizes
    assert np.concatenate(calls).ravel().tolist() == list(range(count))  # every image once, in order


def test_torch_batches_join_as_torch_tensors():
    batches = [torch.full((1, 2), float(index)) for index in range(5)]
    (call,) = reference_calls(batches)
    assert isinstance(call, torch.Tensor) and call[:, 0].tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]


class RecordingBackend:
    """A backend whose reference doubles its images, recording each call's size; a call of more than `capacity`
    images raises, as a forward past the device's memory does."""

    def __init__(self, capacity: int | None = None) -> None:
        self.capacity, self.sizes = capacity, []

    def reference(self, batch: np.ndarray) -> np.ndarray:
        self.sizes.append(len(batch))
        if self.capacity is not None and len(batch) > self.capacity:
            raise RuntimeError("CUDA out of memory")
        return batch * 2


def test_the_study_asks_the_backend_for_the_reference_in_the_joined_calls():
    backend = RecordingBackend()
    outputs = reference_outputs(backend, SimpleNamespace(quality_batches=numbered(40, 1)))  # type: ignore[arg-type]
    assert backend.sizes == [32, 8]
    assert outputs.ravel().tolist() == [2.0 * index for index in range(40)]


def test_joined_calls_that_fail_are_made_again_in_the_studys_batches():
    backend = RecordingBackend(capacity=4)
    outputs = reference_outputs(backend, SimpleNamespace(quality_batches=numbered(10, 2)))  # type: ignore[arg-type]
    assert backend.sizes == [10, 2, 2, 2, 2, 2]
    assert outputs.ravel().tolist() == [2.0 * index for index in range(10)]


def test_a_backend_without_a_reference_gives_none():
    class Without:
        def reference(self, batch: np.ndarray) -> None:
            return None

    assert reference_outputs(Without(), SimpleNamespace(quality_batches=numbered(10, 1))) is None  # type: ignore[arg-type]
