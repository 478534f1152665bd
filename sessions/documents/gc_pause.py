"""Python's cyclic garbage collector held off while a large, acyclic document is built or compared.

A 100,000-layer file decodes into millions of dicts, lists and strings, and a session of that size into
as many dataclasses; every few hundred new containers the collector runs, and each full pass walks all
of them again, so building one costs a multiple of the building itself. Sessions
and TensorRT documents hold no reference cycles: reference counting frees them, the collector finds nothing in them.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

# Whether `freeze_heap` froze the heap, with no `thaw_heap` since. Kept here: `gc.get_freeze_count` walks every frozen
# object (60 ms for 5 million: benchmarks/results/cpu/interpreter-costs.txt), and a study's every save asks.
_heap_frozen = False


def freeze_heap() -> None:
    """Everything alive now frozen out of every later collection (`gc.freeze`) until `thaw_heap`: a study command's
    set-up (`inspector.process.settle_heap`). `gc_paused` inside neither freezes nor unfreezes."""
    global _heap_frozen
    _heap_frozen = True  # before the freeze: an interrupt between them still thaws
    gc.freeze()


def thaw_heap() -> None:
    """What `freeze_heap` froze collectable again (`gc.unfreeze`); nothing where it froze nothing."""
    global _heap_frozen
    if _heap_frozen:
        gc.unfreeze()
        _heap_frozen = False


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """The collector off for the `with` block and back as it was after (nested blocks leave it to the outermost).

    What the block built is then moved to the oldest generation without a pass over it (`gc.freeze` and
    `gc.unfreeze`): it stays collectable, but the next young collections do not walk millions of new objects. Where
    the heap is frozen (`freeze_heap`: a study command's set-up), nothing is frozen or unfrozen: `gc.unfreeze` would
    undo that freeze, and `gc.freeze` would freeze with the block's objects whatever garbage cycles the study has
    made since (a failed build's model copy on the GPU), never to be collected.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            if not _heap_frozen:
                gc.freeze()
                gc.unfreeze()
            gc.enable()
