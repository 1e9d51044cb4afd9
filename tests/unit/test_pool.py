import threading
import time

import numpy as np
import pytest

from hyperframes import FrameSpec, PoolExhausted
from hyperframes.errors import Cancelled
from hyperframes.frames import FramePool, check_batch_size


def make_pool(slots=3, batch_size=4):
    return FramePool(FrameSpec((2, 3, 3), np.uint8), batch_size=batch_size, slots=slots, name="p")


def test_slot_view_is_a_window_into_one_block():
    pool = make_pool()
    slot = pool.acquire(holder="a")
    view = pool.view(slot)
    assert view.shape == (4, 2, 3, 3)
    view[:] = 7
    assert np.shares_memory(view, pool.block)
    assert (pool.block[slot] == 7).all()


def test_counters_and_high_water():
    pool = make_pool(slots=3)
    a = pool.acquire(holder="x")
    b = pool.acquire(holder="y")
    pool.release(a)
    c = pool.acquire(holder="y")
    assert pool.holders() == {"y": 2}
    pool.release(b)
    pool.release(c)
    assert (pool.acquired, pool.released, pool.high_water) == (3, 3, 2)
    assert pool.in_use == 0


def test_release_of_a_free_slot_is_an_error():
    pool = make_pool()
    with pytest.raises(ValueError, match="not held"):
        pool.release(0)


def test_exhausted_pool_names_who_holds_the_slots():
    pool = make_pool(slots=2)
    pool.acquire(holder="map:slow")
    pool.acquire(holder="sink")
    with pytest.raises(PoolExhausted, match=r"map:slow holds 1, sink holds 1.*slots="):
        pool.acquire(holder="source", timeout=0.01)


def test_cancel_wakes_a_blocked_acquire():
    pool = make_pool(slots=1)
    pool.acquire(holder="a")
    raised = []
    entered = threading.Event()

    def waiter():
        entered.set()
        try:
            pool.acquire(holder="b")
        except Cancelled as exc:
            raised.append(exc)

    t = threading.Thread(target=waiter)
    t.start()
    entered.wait(5)
    pool.cancel()
    t.join(5)
    assert not t.is_alive()
    assert len(raised) == 1


def test_release_all_after_failure():
    pool = make_pool(slots=3)
    pool.acquire(holder="a")
    pool.acquire(holder="b")
    assert pool.release_all() == 2
    assert pool.acquired == pool.released == 2


@pytest.mark.parametrize("good", [1, 2, 64, 4096])
def test_batch_size_powers_of_two(good):
    assert check_batch_size(good) == good


@pytest.mark.parametrize(
    ("bad", "hint"),
    [(100, "try 64 or 128"), (0, "try 1"), (-1, "try"), (5000, "4096"), (3, "2 or 4")],
)
def test_batch_size_rejected_with_a_suggestion(bad, hint):
    with pytest.raises(ValueError, match="power of two") as info:
        check_batch_size(bad)
    assert hint in str(info.value)


def test_frame_spec_validates_and_shows_no_pixels():
    spec = FrameSpec([720, 1280, 3], "uint8")
    assert spec.shape == (720, 1280, 3) and spec.nbytes == 720 * 1280 * 3
    assert repr(spec) == "FrameSpec(shape=(720, 1280, 3), dtype=uint8)"
    with pytest.raises(ValueError):
        FrameSpec((0, 3))
    with pytest.raises(TypeError):
        FrameSpec((2, 2), object)


def test_mapping_a_slot_lets_other_threads_run():
    """A slot's pages are mapped on its first acquire; the other threads of the process
    go on meanwhile (``mmap.madvise`` held the GIL: 12 ms a 44 MiB slot of a stall)."""
    pool = FramePool(FrameSpec((2160, 3840, 3)), batch_size=16, slots=1)  # 398 MB a slot
    stamps = np.zeros(1 << 22)  # (the spinner allocates nothing: no mapping of its own)
    spins = [0]
    going, started = threading.Event(), threading.Event()

    def spin() -> None:
        started.set()
        while going.is_set() and spins[0] < len(stamps):
            stamps[spins[0]] = time.perf_counter()
            spins[0] += 1

    going.set()
    spinner = threading.Thread(target=spin)
    spinner.start()
    started.wait()
    t = time.perf_counter()
    pool.acquire(holder="test")  # maps the slot's pages now
    took = time.perf_counter() - t
    going.clear()
    spinner.join()
    assert pool.block[0].sum(dtype=np.uint64) == 0  # mapped, and zero
    ran = stamps[: spins[0]]
    middle = (ran > t + took / 3) & (ran < t + 2 * took / 3)
    assert middle.any(), f"no other thread ran in the {took * 1000:.0f} ms the mapping took"


def test_a_slot_holds_smaller_frames_of_the_same_kind_from_its_start():
    """Inputs of several sizes: a pool planned for the largest lays the smaller frames of a
    batch from its slot's start, as many as the slot fits (4 x 72x128 bytes hold 21 of
    64x27), as its own views of the block; other kinds are refused."""
    pool = FramePool(FrameSpec((72, 128, 3)), batch_size=4, slots=2)
    small = FrameSpec((27, 64, 3))
    assert pool.spec.holds(small) and not small.holds(pool.spec)
    assert not pool.spec.holds(FrameSpec((72, 128, 3), "uint16"))  # another dtype
    assert not pool.spec.holds(FrameSpec((72, 128, 1)))  # other channels, fewer bytes
    slot = pool.acquire(holder="source")
    frames = pool.view(slot, small)
    assert frames.shape == (21, 27, 64, 3) == (pool.capacity(small), *small.shape)
    assert np.shares_memory(frames, pool.view(slot)) and pool.capacity(pool.spec) == 4
    frames[:] = np.arange(21, dtype=np.uint8)[:, None, None, None]
    first, last = pool.view(slot).reshape(-1)[: 21 * small.nbytes].reshape(21, -1)[[0, 20]]
    assert not first.any() and (last == 20).all()
    assert not pool.view(1 - slot).any()  # the other slot untouched
    with pytest.raises(ValueError, match="cannot hold"):
        pool.view(slot, FrameSpec((72, 129, 3)))
    assert pool.capacity(FrameSpec((72, 128, 1))) == 0
