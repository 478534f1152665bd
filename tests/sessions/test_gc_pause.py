"""The collector pause: off inside, back as it was after, and what was built left collectable but out of the young
generations."""

import gc

from sessions.documents.gc_pause import freeze_heap, gc_paused, thaw_heap


def test_the_collector_pause_restores_the_state_it_found():
    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled()
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the inner block leaves it to the outer one
    assert gc.isenabled()
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()  # off before, off after
    finally:
        gc.enable()


def test_what_the_block_built_is_not_walked_by_the_next_young_collection():
    with gc_paused():
        built = [[index] for index in range(50_000)]
    assert any(item is built for item in gc.get_objects(generation=2))  # moved to the oldest generation, unwalked
    assert gc.get_freeze_count() == 0  # nothing left frozen: still collectable


def test_a_pause_inside_a_frozen_heap_leaves_the_freeze_and_never_counts_the_frozen_objects(monkeypatch):
    """A study's every save pauses the collector inside the heap its set-up froze; `gc.get_freeze_count` walks every
    frozen object (a settled study: millions, 50 ms a call), so the pause must know of the freeze without it."""
    def walks_the_frozen_heap() -> int:
        raise AssertionError("gc.get_freeze_count walks every frozen object")

    kept = [[index] for index in range(1000)]
    freeze_heap()
    try:
        with monkeypatch.context() as patch:
            patch.setattr(gc, "get_freeze_count", walks_the_frozen_heap)
            with gc_paused():
                built = [[index] for index in range(1000)]
        assert gc.get_freeze_count() >= len(kept)  # still frozen: the pause neither thawed nor refroze
        assert any(item is built for item in gc.get_objects())  # what the pause built is collectable, not frozen
    finally:
        thaw_heap()
    assert gc.get_freeze_count() == 0
    thaw_heap()  # nothing frozen: nothing to do
    assert gc.get_freeze_count() == 0 and gc.isenabled()
