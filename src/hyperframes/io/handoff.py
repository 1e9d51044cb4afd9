"""Batches handed to a loop the user writes: ``for ids, frames in pipeline.iter_batches()``.

:class:`Batches` runs the pipeline on a thread of its own, into a :class:`HandoffSink` that
gives each batch to the loop while the pipeline runs ahead within its budget.

**The loop owns what it is given.** Each batch is a view of the pool's slot (no copy), and
the slot goes back to the run only when nothing refers to that view any more (the loop
moved on and kept nothing of it: the common loop). A loop that keeps batches (a list, a
prefetch queue, ``torch.from_numpy``) keeps them right: the slots of up to
:data:`KEPT_VIEWS` kept batches stay out of the pool (the run's plan counts them), and
while that many are kept, the next batches come as copies of their own. No frame is ever
overwritten under the loop, and memory stays within the plan plus what the loop keeps. A
loop given tensors of its own (float ones: ``Tensors().views`` is false) holds no slot
past their making, and the plan gives it none.

Leaving the loop early (``break``, an exception in its body, Ctrl-C) stops the run: the
sink refuses the next batch, the run unwinds as after any failure (threads joined, slots
released), and nothing is left running.
"""

from __future__ import annotations

import contextlib
import threading
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from ..frames import FrameSpec
from .base import Footprint, Sink

KEPT_VIEWS = 2
"""Batches the loop may keep as views of their slots at once (the current one and one
more, e.g. the previous batch for a difference); with that many kept, batches come as
copies. The plan gives the run's pools this many slots more."""


class LoopLeft(Exception):
    """The loop stopped taking batches: the run ends here (not an error)."""


class HandoffSink(Sink):
    """Gives each batch to one consumer: a view of its slot, whose slot goes back to the
    run when the view (and every view of it) is gone, or a copy while the consumer keeps
    :data:`KEPT_VIEWS` views (see the module's notes). Which of the two is decided when
    the consumer takes the batch, from what it holds then.

    Args:
        keeps: the consumer may keep what it is given; ``False`` where it turns each batch
            into something of its own at once (float tensors), so its slots need no room
            in the plan.
    """

    takes_sizes = True  # (each batch its own shape)

    def __init__(self, *, keeps: bool = True) -> None:
        self._keeps = keeps
        self._cond = threading.Condition()
        self._item: tuple[Any, ...] | None = None  # index, frames, meta, release
        self._views: list[weakref.finalize] = []  # one per view handed out and alive
        self._stopped = False
        self._ended = False
        self.copies = 0  # batches handed as copies (the loop kept views)

    def footprint(self, spec: FrameSpec, facts: dict[str, Any]) -> Footprint:
        return Footprint("loop", held_batches=KEPT_VIEWS if self._keeps else 0)

    def write(self, frames: np.ndarray, index: np.ndarray, meta: dict[str, np.ndarray]) -> None:
        self.write_owned(frames.copy(), index, meta, lambda: None)

    def write_owned(
        self,
        frames: np.ndarray,
        index: np.ndarray,
        meta: dict[str, np.ndarray],
        release: Callable[[], None],
    ) -> None:
        with self._cond:
            while not self._stopped and self._item is not None:  # the one before is taken
                self._cond.wait()
            if self._stopped:
                raise LoopLeft
            self._item = (index, frames, meta, release)
            self._cond.notify_all()

    def close(self, *, ok: bool) -> None:
        self.end()

    def end(self) -> None:
        """No more batches will come (the run ended, whichever way): the slots of views
        the loop still holds go back (nothing will write to them any more)."""
        with self._cond:
            self._ended = True
            views, self._views = self._views, []
            self._cond.notify_all()
        for view in views:
            view()  # releases now, and not again when the view dies

    def take(self) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]] | None:
        """The next batch, the loop's own (a view or a copy), or ``None`` at the end."""
        with self._cond:
            while self._item is None and not self._ended:
                self._cond.wait()
            if self._item is None:
                return None
            (index, frames, meta, release), self._item = self._item, None
            self._cond.notify_all()
            self._views = [view for view in self._views if view.alive]
            copy = len(self._views) >= KEPT_VIEWS and not self._ended
            if not copy:
                # a view over a memoryview: every view derived from it refers to it (numpy
                # would point a plain view's views at the pool's block), so it dies last
                handed = np.asarray(memoryview(frames))
                if self._ended:  # the run is over: nothing will write to the slot
                    _give_back(release)
                else:
                    self._views.append(weakref.finalize(handed, _give_back, release))
                return index, handed, meta
        handed = frames.copy()  # the loop keeps batches: this one is its own
        self.copies += 1
        _give_back(release)
        return index, handed, meta

    def stop(self) -> None:
        """The loop left: refuse every batch from now on."""
        with self._cond:
            self._stopped = True
            self._cond.notify_all()


def _give_back(release: Callable[[], None]) -> None:
    """A handed view is gone: its slot goes back (unless the run gave every slot back
    already, after a failure)."""
    with contextlib.suppress(ValueError):
        release()


class Batches:
    """``(ids, frames)`` (or ``(ids, frames, meta)``) of each batch in input order, from a
    run started on a thread when iteration starts; :attr:`report` once it has ended.

    Args:
        start: runs the pipeline into the sink it is given and returns the report.
        meta: yield the batch's metadata (``{key: array}``) as a third item.
        convert: what the loop gets of each batch's frames (torch tensors, say).
        keeps: what ``convert`` gives may be a view of the batch, which the loop may keep
            (``False``: it is a copy, and the batch's slot goes back once it is made).
    """

    def __init__(
        self,
        start: Callable[[Sink], Any],
        *,
        meta: bool = False,
        convert: Callable[[np.ndarray], Any] | None = None,
        keeps: bool = True,
    ) -> None:
        self._start, self._meta, self._convert = start, meta, convert
        self._sink = HandoffSink(keeps=keeps)
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self.report: Any = None

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        if self._thread is not None:
            raise RuntimeError("iter_batches() gives one pass; call it again for another")
        self._thread = threading.Thread(target=self._run, name="hf-iter-batches", daemon=True)
        self._thread.start()
        try:
            while (item := self._sink.take()) is not None:
                ids, frames, meta = item
                del item  # the loop's references alone keep the batch's slot
                if self._convert is not None:
                    frames = self._convert(frames)
                yield (ids, frames, meta) if self._meta else (ids, frames)
                del ids, frames, meta
        finally:
            self.close()
        if self._error is not None:
            raise self._error

    @property
    def copies(self) -> int:
        """Batches handed as copies because the loop kept views of others."""
        return self._sink.copies

    def close(self) -> None:
        """Stop the run (if it is still going) and wait for it to unwind."""
        self._sink.stop()
        if self._thread is not None:
            self._thread.join()

    def _run(self) -> None:
        try:
            self.report = self._start(self._sink)
        except LoopLeft:
            pass
        except BaseException as exc:  # handed to the loop's thread
            self._error = exc
        finally:
            self._sink.end()
