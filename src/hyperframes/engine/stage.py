"""A stage: a function over batches, and how its result lands back in a pool.

A stage function takes the ``(n, *shape)`` frames of a batch and returns an
array of ``n`` frames. If it works in place, or returns frames of the same
spec, the result stays in (or is copied into) the batch's slot. If it returns
another shape or dtype, the result is copied into a slot of the stage's own
output pool and the batch handle moves there. The first batch fixes a stage's
output spec unless it is declared; every later batch must match it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from ..errors import StageError
from .frames import Batch, FramePool, FrameSpec

BatchFn = Callable[[Batch], "np.ndarray | None"]
"""Internal form of a stage: gets the batch handle, returns frames or ``None`` (wrote in place)."""


class Stream(Protocol):
    """An ordered, stateful stage: sees every batch in input order on one thread.

    It may hold batches back (to look ahead) and let them go later, in order. ``holds`` is
    the most batches it keeps at once; the runner adds that many slots to the pool so the
    held batches can never starve the source.
    """

    holds: int

    def push(self, batch: Batch) -> list[Batch]:
        """Take the next batch in order; return the batches now ready to go on, in order."""
        ...

    def finish(self) -> list[Batch]:
        """The input has ended: return every batch still held, in order."""
        ...


@dataclass
class Stage:
    """One step of a pipeline.

    Attributes:
        name: shown in reports and errors, e.g. ``"map:invert"``.
        process: the internal batch function (see :data:`BatchFn`).
        workers: threads that run ``process`` concurrently.
        spec: the declared output spec, or ``None`` to take it from the first result.
        queue: capacity of the stage's input channel.
        make_stream: makes the state of an ordered stage, fresh for each run (then
            ``process`` is not used).
    """

    name: str
    process: BatchFn
    workers: int = 1
    spec: FrameSpec | None = None
    queue: int | None = None
    make_stream: Callable[[], Stream] | None = None
    stream: Stream | None = field(default=None, init=False, repr=False)
    _out_pool: FramePool | None = field(default=None, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def __post_init__(self) -> None:
        if isinstance(self.workers, bool) or not isinstance(self.workers, int) or self.workers < 1:
            raise ValueError(f"workers must be a positive integer, got {self.workers!r}")
        if self.make_stream is not None and self.workers != 1:
            raise ValueError(f"an ordered stage runs on one worker, got workers={self.workers}")
        if self.queue is None:
            self.queue = 2 * self.workers + 1
        elif self.queue < 1:
            raise ValueError(f"queue must be at least 1, got {self.queue}")

    def reset(self) -> None:
        """Forget the output pool and state of an earlier run."""
        self._out_pool = None
        self.stream = None if self.make_stream is None else self.make_stream()

    @property
    def out_pool(self) -> FramePool | None:
        return self._out_pool

    def apply(self, batch: Batch, *, slots: int) -> Batch:
        """Run the stage on ``batch`` and return the handle of the result (maybe moved)."""
        result = self.process(batch)
        if result is None:
            return batch
        return self._land(batch, result, slots=slots)

    def _land(self, batch: Batch, result: object, *, slots: int) -> Batch:
        if not isinstance(result, np.ndarray):
            raise StageError(
                f"stage {self.name!r} returned {type(result).__name__} for {batch.describe()}; "
                f"a stage function must return an array of {batch.count} frames"
            )
        if result.ndim < 2 or len(result) != batch.count:
            raise StageError(
                f"stage {self.name!r} returned an array of shape {result.shape} for "
                f"{batch.describe()}; expected {batch.count} frames along the first axis"
            )
        got = FrameSpec(result.shape[1:], result.dtype)
        frames = batch.frames
        if self._out_pool is None and got == batch.pool.spec and self.spec in (None, got):
            if not (result is frames or _same_memory(result, frames)):
                np.copyto(frames, result)
            return batch
        pool = self._output_pool(got, batch, slots=slots)
        if got != pool.spec:
            raise StageError(
                f"stage {self.name!r} returned frames of {got.describe()} for "
                f"{batch.describe()}, expected {pool.spec.describe()} (fixed by "
                f"{'its declared spec' if self.spec else 'its first batch'}); a stage must "
                "return one shape and dtype for every batch"
            )
        slot = pool.acquire(holder=self.name)
        moved = batch.moved_to(pool, slot)
        np.copyto(moved.frames, result)
        return moved

    def _output_pool(self, got: FrameSpec, batch: Batch, *, slots: int) -> FramePool:
        with self._lock:
            if self._out_pool is None:
                spec = self.spec or got
                self._out_pool = FramePool(
                    spec, batch_size=batch.pool.batch_size, slots=slots, name=self.name
                )
            return self._out_pool


def _same_memory(a: np.ndarray, b: np.ndarray) -> bool:
    return (
        a.shape == b.shape
        and a.dtype == b.dtype
        and a.__array_interface__["data"][0] == b.__array_interface__["data"][0]
        and a.strides == b.strides
    )
