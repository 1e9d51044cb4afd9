"""``StoreSource``: a store's frames as a pipeline source (for unpacking and reprocessing).

The source reads in order, each hyperframe decoded once and the next one while this
one's frames are handed on (:meth:`FrameStore.runs`). It holds no store open between
runs: :meth:`StoreSource.open` opens it and starts at ``start`` again,
:meth:`StoreSource.close` closes it, so one source serves run after run, and
:meth:`StoreSource.for_run` gives every run its own reader (LMDB readers in one process
share one environment), so several runs may read one store at once.
While a run goes, :meth:`StoreSource.figures` reports the store's cache tiers (hot, warm,
cold: hits, misses, bytes) to monitors.

Example:
    >>> source = StoreSource("clip.hfs")  # doctest: +SKIP
    >>> Pipeline.from_source(source).to(VideoSink("out.mkv")).run()  # doctest: +SKIP
"""

from __future__ import annotations

import copy
import os
from collections.abc import Generator
from typing import Any

import numpy as np

from ..errors import StoreError
from ..io.base import Chunk, Source, SourceFigures
from .lmdb_store import FrameStore


class StoreSource(Source):
    """Frames ``start..stop-1`` of a store, in order, with their timestamps (``meta["pts"]``).

    Args:
        path: the store folder.
        start: first frame.
        stop: one past the last frame; ``None`` for the end (as the store is now).
        pix_fmt: as for :class:`FrameStore`: a store of a video's native planes gives RGB
            by default, its planes with ``"native"`` (or the layout's name).

    Raises:
        StoreError, StoreCorrupt: as :class:`FrameStore`.
        ValueError: a range outside the store.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        start: int = 0,
        stop: int | None = None,
        pix_fmt: str = "rgb24",
    ) -> None:
        self.path, self.pix_fmt = path, pix_fmt
        with FrameStore(path, hot_bytes=0, read_ahead=False, pix_fmt=pix_fmt) as store:
            n = len(store)
            end = n if stop is None else stop
            if not 0 <= start <= end <= n:
                raise ValueError(f"need 0 <= start <= stop <= {n}, got start={start}, stop={stop}")
            self.spec = store.spec
            self.info: dict[str, Any] = dict(store.info.source)
            if pix_fmt != "rgb24" and store.header.pixels:  # the planes' layout and tags
                self.info.update(store.header.pixels)
        self.start, self.stop, self._next = start, end, start
        self.length = end - start
        self.info.update(frames=self.length, store=str(path))
        self._store: FrameStore | None = None
        self._runs: Generator[np.ndarray, None, None] | None = None
        self._run: np.ndarray | None = None  # the run being handed on, from frame _at
        self._at = 0
        self._figures = SourceFigures()  # the last run's, once its store is closed

    def for_run(self) -> Source:
        """A copy with its own reader and position, so several runs may read at once."""
        run = copy.copy(self)
        run._store, run._next, run._figures = None, self.start, SourceFigures()
        run._runs, run._run = None, None
        run.info = dict(self.info)
        return run

    def open(self) -> None:
        """Open the store (again, after :meth:`close`) and go back to ``start``.

        Raises:
            StoreError: the store no longer holds frame ``stop - 1``.
        """
        self.close()
        store = FrameStore(self.path, hot_bytes=0, read_ahead=False, pix_fmt=self.pix_fmt)
        if len(store) < self.stop:
            store.close()
            raise StoreError(
                f"store {str(self.path)!r} holds {len(store)} frames now, fewer than the "
                f"{self.stop} this source reads; make a new StoreSource"
            )
        self._store, self._next = store, self.start
        self._runs, self._run, self._at = store.runs(self.start, self.stop), None, 0

    def read_into(self, out: np.ndarray) -> Chunk:
        """The next frames; opens the store first if :meth:`open` was not called."""
        if self._store is None:
            self.open()
        store = self._store
        assert store is not None
        count = min(len(out), self.stop - self._next)
        if count <= 0:
            return Chunk(np.empty(0, np.int64))
        a, b = self._next, self._next + count
        assert self._runs is not None
        done = 0
        while done < count:  # (whole runs of a hyperframe's frames copied at once)
            if self._run is None or self._at == len(self._run):
                self._run, self._at = next(self._runs), 0
            take = min(count - done, len(self._run) - self._at)
            out[done : done + take] = self._run[self._at : self._at + take]
            self._at += take
            done += take
        self._next = b
        meta: dict[str, np.ndarray] = {}
        pts = store.groups.pts[a:b]
        if not np.isnan(pts).any():
            meta["pts"] = pts.copy()
        return Chunk(np.arange(a, b, dtype=np.int64), meta)

    def figures(self) -> SourceFigures:
        """The cache tiers of the store being read (``Source.figures``);
        after :meth:`close`, those it had at the end."""
        store = self._store
        return self._figures if store is None else SourceFigures(cache=store.cache_tiers())

    def close(self) -> None:
        """Close the store (a later :meth:`open` or read opens it again)."""
        store = self._store
        if store is not None:
            self._figures = SourceFigures(cache=store.cache_tiers())  # before it goes
            self._store = None
            if self._runs is not None:  # (its read-ahead thread ends with it)
                self._runs.close()
                self._runs, self._run = None, None
            store.close()

    def __repr__(self) -> str:
        return f"StoreSource({str(self.path)!r}, start={self.start}, stop={self.stop})"
