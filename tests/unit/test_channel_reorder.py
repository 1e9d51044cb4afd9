import threading

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hyperframes.engine.channel import END, Channel
from hyperframes.engine.reorder import ReorderBuffer
from hyperframes.errors import Cancelled


def test_channel_is_fifo_and_ends_for_every_consumer():
    ch = Channel(3)
    for x in "abc":
        ch.put(x)
    ch.close()
    assert [ch.get(), ch.get(), ch.get()] == ["a", "b", "c"]
    assert ch.get() is END
    assert ch.get() is END
    assert ch.high_water == 3


class _ToldCondition(threading.Condition):
    """A condition that says when a thread waits on it (under its lock, so whoever takes
    the lock next finds the thread waiting, not about to)."""

    def __init__(self) -> None:
        super().__init__()
        self.waiting = threading.Event()

    def wait(self, timeout: float | None = None) -> bool:
        self.waiting.set()
        return super().wait(timeout)


def test_channel_cancel_wakes_a_blocked_producer():
    ch = Channel(1)
    told = ch._cond = _ToldCondition()  # (the test's one look inside: when put blocks)
    ch.put(1)
    errors = []

    def producer():
        try:
            ch.put(2)
        except Cancelled as exc:
            errors.append(exc)

    t = threading.Thread(target=producer)
    t.start()
    assert told.waiting.wait(5), "the producer never blocked on the full channel"
    ch.cancel()
    t.join(5)
    assert not t.is_alive() and errors
    with pytest.raises(Cancelled):
        ch.get()


def test_channel_rejects_zero_capacity():
    with pytest.raises(ValueError):
        Channel(0)


@given(st.permutations(list(range(40))))
def test_reorder_restores_order(order):
    buf = ReorderBuffer()
    out = []
    for seq in order:
        out += buf.push(seq, seq)
    assert out == list(range(40))
    assert len(buf) == 0
    # it held at most the items that arrived ahead of the one it waited for (plus that one)
    ahead = max(
        sum(1 for s in order[: k + 1] if s > min(set(range(40)) - set(order[:k])))
        for k in range(40)
    )
    assert buf.high_water <= ahead + 1


def test_reorder_bounded_by_how_far_ahead_items_arrive():
    buf = ReorderBuffer()
    for seq in [1, 2, 3]:
        assert buf.push(seq, seq) == []
    assert buf.push(0, 0) == [0, 1, 2, 3]
    assert buf.high_water == 4


def test_reorder_rejects_duplicates():
    buf = ReorderBuffer()
    buf.push(0, "a")
    with pytest.raises(ValueError, match="twice"):
        buf.push(0, "a")
