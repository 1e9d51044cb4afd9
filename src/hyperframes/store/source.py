"""``StoreSource``: a store's frames as a pipeline source (for unpacking and reprocessing).

Example:
    >>> source = StoreSource("clip.hfs")  # doctest: +SKIP
    >>> Pipeline.from_source(source).to(VideoSink("out.mkv")).run()  # doctest: +SKIP
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from ..io.base import Chunk, Source
from .lmdb_store import FrameStore


class StoreSource(Source):
    """Frames ``start..stop-1`` of a store, in order, with their timestamps (``meta["pts"]``).

    Args:
        path: the store folder.
        start: first frame.
        stop: one past the last frame; ``None`` for the end.

    Raises:
        StoreError, StoreCorrupt: as :class:`FrameStore`.
        ValueError: a range outside the store.
    """

    def __init__(
        self, path: str | os.PathLike[str], *, start: int = 0, stop: int | None = None
    ) -> None:
        self.path = path
        self._store: FrameStore | None = FrameStore(path, hot_bytes=0, read_ahead=False)
        n = len(self._store)
        end = n if stop is None else stop
        if not 0 <= start <= end <= n:
            self._store.close()
            raise ValueError(f"need 0 <= start <= stop <= {n}, got start={start}, stop={stop}")
        self.spec = self._store.spec
        self.start, self.stop, self._next = start, end, start
        self.length = end - start
        info = self._store.info
        self.info: dict[str, Any] = dict(info.source)
        self.info.update(frames=self.length, store=str(path))

    def read_into(self, out: np.ndarray) -> Chunk:
        store = self._store
        if store is None:
            raise RuntimeError("StoreSource is closed")
        count = min(len(out), self.stop - self._next)
        if count <= 0:
            return Chunk(np.empty(0, np.int64))
        a, b = self._next, self._next + count
        out[:count] = store.get_frames_in_range(a, b)
        self._next = b
        meta: dict[str, np.ndarray] = {}
        pts = store.groups.pts[a:b]
        if not np.isnan(pts).any():
            meta["pts"] = pts.copy()
        return Chunk(np.arange(a, b, dtype=np.int64), meta)

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None

    def __repr__(self) -> str:
        return f"StoreSource({str(self.path)!r}, start={self.start}, stop={self.stop})"
