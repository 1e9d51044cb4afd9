"""Restore input order from batches that finish out of order.

The buffer is keyed on contiguous sequence numbers (0, 1, 2, ...). It holds
only the batches that arrived ahead of the one it waits for, so its size is
bounded by the batches in flight (the pool's slots). It is a plain data
structure with no threads or clocks, so it is tested directly.

Example:
    >>> buf = ReorderBuffer()
    >>> buf.push(1, "b")
    []
    >>> buf.push(0, "a")
    ['a', 'b']
"""

from __future__ import annotations

from typing import Generic, TypeVar

T = TypeVar("T")


class ReorderBuffer(Generic[T]):
    """Emits items in sequence order as soon as the next one is present."""

    def __init__(self, start: int = 0) -> None:
        self.next_seq = start
        self._waiting: dict[int, T] = {}
        self.high_water = 0

    def __len__(self) -> int:
        return len(self._waiting)

    def push(self, seq: int, item: T) -> list[T]:
        """Add ``item`` with sequence number ``seq``; return the items now ready, in order.

        Raises:
            ValueError: ``seq`` was already emitted or is already waiting.
        """
        if seq < self.next_seq or seq in self._waiting:
            raise ValueError(f"sequence number {seq} arrived twice")
        self._waiting[seq] = item
        self.high_water = max(self.high_water, len(self._waiting))
        ready: list[T] = []
        while self.next_seq in self._waiting:
            ready.append(self._waiting.pop(self.next_seq))
            self.next_seq += 1
        return ready

    def drain(self) -> list[T]:
        """Remove and return every waiting item (after a failure, to release their slots)."""
        items = [self._waiting[k] for k in sorted(self._waiting)]
        self._waiting.clear()
        return items
