"""``StoreSource``: a store's frames as a pipeline source (for unpacking and reprocessing).

The source reads in order, each hyperframe decoded once (:meth:`FrameStore.group`):
straight into the run's batch where the whole hyperframe falls within it, or the part of
it that does where that part decodes alone (frames coded alone: a simulation's, say),
else into an array of its own whose frames go to this batch and the next; the run's source thread
decodes ahead of the stages as far as the pool's slots allow. It holds no store open
between runs: :meth:`StoreSource.open` opens it and starts at ``start`` again,
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
            by default (``"rgb48"``: in 16 bits), its planes with ``"native"`` (or the
            layout's name).

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
            if pix_fmt not in ("rgb24", "rgb48") and store.header.pixels:  # planes' layout, tags
                self.info.update(store.header.pixels)
        self.start, self.stop, self._next = start, end, start
        self.length = end - start
        self.info.update(frames=self.length, store=str(path))
        self._store: FrameStore | None = None
        self._rest: np.ndarray | None = None  # a hyperframe's frames not yet handed on
        self._figures = SourceFigures()  # the last run's, once its store is closed

    def for_run(self) -> Source:
        """A copy with its own reader and position, so several runs may read at once."""
        run = copy.copy(self)
        run._store, run._next, run._figures = None, self.start, SourceFigures()
        run._rest = None
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
        self._store, self._next, self._rest = store, self.start, None

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
        done = 0
        while done < count:
            if self._rest is None:  # a hyperframe begins here, or goes on
                at = a + done
                g = store.groups.group_of(at)
                first, stop = store.groups.span(g)
                part = range(at - first, min(stop, at + count - done) - first)
                if part == range(stop - first):  # the whole hyperframe: into the slot
                    store.group(g, out[done : done + len(part)])
                    done += len(part)
                    continue
                got, which = store.part(g, part, out[done : done + len(part)])
                if which == part:  # (its frames decode alone: into the slot too)
                    done += len(part)
                    continue
                self._rest = got[at - first : min(stop, self.stop) - first]
            take = min(count - done, len(self._rest))  # (a hyperframe across two batches)
            out[done : done + take] = self._rest[:take]
            self._rest = self._rest[take:] if take < len(self._rest) else None
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
            self._store, self._rest = None, None
            store.close()

    def __repr__(self) -> str:
        return f"StoreSource({str(self.path)!r}, start={self.start}, stop={self.stop})"
