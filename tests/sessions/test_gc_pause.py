"""The collector pause: off inside, back as it was after, and what was built left collectable but out of the young
generations."""

import gc

from sessions.documents.gc_pause import gc_paused


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
