"""Batches handed to a loop the user writes: ``for ids, frames in pipeline.iter_batches()``.

:class:`Batches` runs the pipeline on a thread of its own, into a :class:`HandoffSink` that
gives each batch to the loop and waits until the loop asks for the next one: the loop holds
one batch (a view of the pool's slot, valid until the next step: copy what you keep) while
the pipeline runs ahead within its budget. Leaving the loop early (``break``, an exception
in its body, Ctrl-C) stops the run: the sink refuses the next batch, the run unwinds as after
any failure (threads joined, slots released), and nothing is left running.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from .base import Sink


class LoopLeft(Exception):
    """The loop stopped taking batches: the run ends here (not an error)."""


class HandoffSink(Sink):
    """Gives each batch to one consumer and waits until it is done with it."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._item: tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]] | None = None
        self._holding = False  # the consumer holds a batch
        self._released = True  # the last batch written was given back
        self._stopped = False
        self._ended = False

    def write(self, frames: np.ndarray, index: np.ndarray, meta: dict[str, np.ndarray]) -> None:
        with self._cond:
            if self._stopped:
                raise LoopLeft
            self._item, self._released = (index, frames, meta), False
            self._cond.notify_all()
            # the slot stays ours until the loop asks for the next batch or leaves
            while not self._stopped and not self._released:
                self._cond.wait()
            if self._stopped:
                raise LoopLeft

    def close(self, *, ok: bool) -> None:
        self.end()

    def end(self) -> None:
        """No more batches will come (the run ended, whichever way)."""
        with self._cond:
            self._ended = True
            self._cond.notify_all()

    def take(self) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]] | None:
        """The next batch (the one before is given back), or ``None`` at the end."""
        with self._cond:
            if self._holding:  # done with the last one: the run may reuse its slot
                self._holding, self._released = False, True
                self._cond.notify_all()
            while self._item is None and not self._ended:
                self._cond.wait()
            if self._item is None:
                return None
            item, self._item, self._holding = self._item, None, True
            return item

    def stop(self) -> None:
        """The loop left: refuse every batch from now on."""
        with self._cond:
            self._stopped = True
            self._cond.notify_all()


class Batches:
    """``(ids, frames)`` (or ``(ids, frames, meta)``) of each batch in input order, from a
    run started on a thread when iteration starts; :attr:`report` once it has ended.

    Args:
        start: runs the pipeline into the sink it is given and returns the report.
        meta: yield the batch's metadata (``{key: array}``) as a third item.
    """

    def __init__(self, start: Callable[[Sink], Any], *, meta: bool = False) -> None:
        self._start, self._meta = start, meta
        self._sink = HandoffSink()
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
                yield (ids, frames, meta) if self._meta else (ids, frames)
        finally:
            self.close()
        if self._error is not None:
            raise self._error

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
