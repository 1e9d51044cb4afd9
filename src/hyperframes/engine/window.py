"""Neighbouring frames for a stage: ``.map(fn, window=(before, after))``.

A small ordered stage in front of the windowed one makes every batch a :class:`Haloed`
one: it carries a *halo*, copies of the ``before`` frames just before it and the
``after`` frames just after it, across batch boundaries (the batches of the bottom floor
know nothing of windows). The windowed stage itself then runs on any number of workers.
To know the frames after a batch it holds that batch until enough later frames have
come, at most ``ceil(after / batch_size) + 1`` batches, which the pool makes room for.

Edge policy: at the ends of the sequence the first and last frames are repeated
("clamp"), so every frame has a full window.

The stage function gets ``windows`` of shape ``(n, before + 1 + after, *frame_shape)``,
where ``windows[j, before]`` is frame ``j`` of the batch: a read-only view, no copy
per window.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..frames import Batch, FramePool
from ..io.base import Footprint
from .stage import Stream


def check_window(window: tuple[int, int]) -> tuple[int, int]:
    try:
        before, after = (int(w) for w in window)
    except (TypeError, ValueError):
        raise ValueError(f"window must be (before, after), got {window!r}") from None
    if before < 0 or after < 0 or before + after == 0:
        raise ValueError(f"window must be two counts >= 0, not both 0, like (1, 1); got {window!r}")
    return before, after


def halo_footprint(before: int, after: int) -> Footprint:
    """What the halo stage holds: the batches until ``after`` frames have come, and one."""
    return Footprint("halo", held_frames=after, held_batches=1, halo=(before, after))


@dataclass
class Haloed(Batch):
    """A batch with its halo: copies of the ``before`` frames just before it and the
    ``after`` frames just after it. The windowed stage's call drops the halo once its
    function has returned; the batch then goes on as it is."""

    halo: tuple[np.ndarray, np.ndarray] | None = None

    @classmethod
    def of(cls, batch: Batch, before: np.ndarray) -> Haloed:
        """``batch`` (the same slot) with the frames before it, none after yet."""
        return cls(
            batch.seq,
            batch.index,
            batch.pool,
            batch.slot,
            batch.meta,
            batch.held,
            halo=(before, before[:0]),
        )

    def extended(self) -> np.ndarray:
        """The frames with their halo: ``(before + count + after, *shape)``."""
        if self.halo is None:
            raise RuntimeError(f"the halo of {self.describe()} was dropped already")
        return np.concatenate([self.halo[0], self.frames, self.halo[1]])

    def one(self, j: int, pool: FramePool, slot: int) -> Batch:
        single = super().one(j, pool, slot)
        if self.halo is None:
            return single
        before, after = len(self.halo[0]), len(self.halo[1])
        extended = self.extended()
        halo = (extended[j : j + before], extended[j + before + 1 : j + before + 1 + after])
        return Haloed(single.seq, single.index, pool, slot, single.meta, halo=halo)


class HaloStream(Stream):
    """Attaches the halo to each batch, in order (an ``engine.stage.Stream``)."""

    def __init__(self, before: int, after: int) -> None:
        self.before, self.after = before, after
        self._tail: np.ndarray | None = None  # the last `before` frames seen
        self._held: deque[Batch] = deque()  # Haloed, or empty batches

    def push(self, batch: Batch) -> list[Batch]:
        if batch.count == 0:
            self._held.append(batch)
            return self._ready(final=False)
        frames = batch.frames
        if self._tail is None:
            self._tail = np.repeat(frames[:1], self.before, axis=0)
        halo_before = self._tail.copy()
        if self.before:
            self._tail = np.concatenate([self._tail, frames])[-self.before :].copy()
        self._held.append(Haloed.of(batch, halo_before))
        return self._ready(final=False)

    def finish(self) -> list[Batch]:
        return self._ready(final=True)

    def _ready(self, *, final: bool) -> list[Batch]:
        ready: list[Batch] = []
        while self._held:
            first = self._held[0]
            later = [b.frames for b in list(self._held)[1:] if b.count]
            available = sum(len(f) for f in later)
            if available < self.after and not final:
                break
            self._held.popleft()
            if not isinstance(first, Haloed) or first.halo is None:  # an empty batch
                ready.append(first)
                continue
            following = np.concatenate(later)[: self.after] if later else first.frames[:0]
            if len(following) < self.after:
                last = following[-1:] if len(following) else self._last_frame(first)
                pad = np.repeat(last, self.after - len(following), axis=0)
                following = np.concatenate([following, pad])
            first.halo = (first.halo[0], np.ascontiguousarray(following))
            ready.append(first)
        return ready

    def _last_frame(self, batch: Batch) -> np.ndarray:
        return batch.frames[-1:]


def windows_of(batch: Haloed, before: int, after: int) -> np.ndarray:
    """The ``(n, before + 1 + after, *shape)`` read-only window view of a haloed batch."""
    extended = batch.extended()
    view = np.lib.stride_tricks.sliding_window_view(extended, before + 1 + after, axis=0)
    return np.moveaxis(view, -1, 1)


class WindowCall:
    """The call of a windowed stage: ``fn(windows)`` (see the module docstring)."""

    def __init__(self, before: int, after: int) -> None:
        self.before, self.after = before, after

    def __call__(self, fn: Callable[..., Any], batch: Batch) -> Any:
        from ..errors import StageError

        if not isinstance(batch, Haloed):
            raise TypeError(f"{batch.describe()} has no halo: a window's halo stage comes first")
        result = fn(windows_of(batch, self.before, self.after))
        if result is None:
            raise StageError(f"the windowed stage function returned None for {batch.describe()}")
        batch.halo = None  # its copies are not needed past the call that succeeded
        return result
