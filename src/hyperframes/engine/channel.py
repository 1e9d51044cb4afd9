"""Bounded, cancellable hand-off between pipeline threads.

A :class:`Channel` carries batch handles from one stage to the next. It is
bounded (a full channel blocks the producer), closes with an end marker that
every consumer sees, and can be cancelled, which wakes every blocked thread
with :class:`~hyperframes.errors.Cancelled`, or stopped, which refuses producers
the same way but lets consumers drain it. Nobody polls: waits block on a
condition variable.

Example:
    >>> ch = Channel(capacity=2)
    >>> ch.put("a"); ch.close()
    >>> ch.get(), ch.get() is END
    ('a', True)
"""

from __future__ import annotations

import threading
from collections import deque
from typing import Any, Final

from ..errors import Cancelled


class _End:
    def __repr__(self) -> str:
        return "END"


END: Final = _End()
"""The end-of-input marker returned by :meth:`Channel.get` once a channel is closed and drained."""


class Channel:
    """A bounded FIFO queue with close and cancel.

    Args:
        capacity: items it holds before :meth:`put` blocks.
    """

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"channel capacity must be at least 1, got {capacity}")
        self.capacity = capacity
        self._items: deque[Any] = deque()
        self._cond = threading.Condition()
        self._closed = False
        self._cancelled = False
        self._stopped = False
        self.high_water = 0

    def __len__(self) -> int:
        with self._cond:
            return len(self._items)

    def put(self, item: Any) -> None:
        """Append ``item``, blocking while the channel is full."""
        with self._cond:
            while len(self._items) >= self.capacity and not self._cancelled and not self._stopped:
                self._cond.wait()
            if self._cancelled or self._stopped:
                raise Cancelled("the pipeline stopped")
            if self._closed:
                raise RuntimeError("put() on a closed channel")
            self._items.append(item)
            self.high_water = max(self.high_water, len(self._items))
            self._cond.notify_all()

    def get(self) -> Any:
        """Next item, blocking while empty; :data:`END` once closed and drained."""
        with self._cond:
            while not self._items and not self._closed and not self._cancelled:
                self._cond.wait()
            if self._cancelled:
                raise Cancelled("the pipeline stopped")
            if not self._items:
                return END
            item = self._items.popleft()
            self._cond.notify_all()
            return item

    def close(self) -> None:
        """No more items will come; consumers get :data:`END` after the last one."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def stop(self) -> None:
        """Take no more items (a producer gets :class:`Cancelled`), but let consumers take
        those it holds, then :data:`END`: what was finished before a failure still gets
        where it was going."""
        with self._cond:
            self._stopped = self._closed = True
            self._cond.notify_all()

    def cancel(self) -> None:
        """Wake every waiter with :class:`Cancelled`, now and on every later call."""
        with self._cond:
            self._cancelled = True
            self._items.clear()
            self._cond.notify_all()
