"""Opening what ``hyperframes view`` shows: a store as it is, or a video packed first.

A video is packed once into a store in a temporary folder (grouped, lossless), so the
page scrubs it through the same random access and tiered cache as any store; the pack
records the adjacent MSE on the way, so the timeline is complete at once. Seeking a
video file for each frame instead would cost a decode from the previous keyframe per
request (tens of milliseconds at 720p for a long GOP), far over the scrubbing budget.

Example:
    >>> with open_viewed("clip.mp4") as viewed:  # doctest: +SKIP
    ...     viewed.store[0].shape
    (720, 1280, 3)
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np

from ..engine.watch import Monitor, ProgressFn
from ..hyper.grouping.grouper import GroupingOptions
from ..io.video import VideoSource
from ..pipeline import Pipeline
from ..store import FrameStore, StoreSink, is_store


class _RecordingSink(StoreSink):
    """A :class:`StoreSink` that also keeps the adjacent MSE the grouping stage measured."""

    def __init__(self, path: Path, **options: Any) -> None:
        super().__init__(path, **options)
        self.distances: list[np.ndarray] = []

    def write(self, frames: np.ndarray, index: np.ndarray, meta: dict[str, np.ndarray]) -> None:
        if "distance" in meta:
            self.distances.append(np.asarray(meta["distance"], np.float64).copy())
        super().write(frames, index, meta)


class Viewed:
    """An open store for the viewer, and the temporary folder it lives in, if any.

    Attributes:
        store: the open store.
        name: what the page calls it (the file name given, never a full path).
        distances: per-frame adjacent MSE when known from packing, else ``None``.
    """

    def __init__(
        self, store: FrameStore, *, name: str, distances: np.ndarray | None = None,
        temporary: Path | None = None,
    ) -> None:  # fmt: skip
        self.store, self.name, self.distances = store, name, distances
        self._temporary = temporary

    def close(self) -> None:
        """Close the store and remove the temporary folder of a packed video."""
        self.store.close()
        if self._temporary is not None:
            shutil.rmtree(self._temporary, ignore_errors=True)
            self._temporary = None

    def __enter__(self) -> Viewed:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Viewed({self.name!r}, {self.store!r})"


def open_viewed(
    path: str | os.PathLike[str],
    *,
    start: int = 0,
    stop: int | None = None,
    progress: ProgressFn | None = None,
    monitor: Monitor | None = None,
) -> Viewed:
    """Open ``path`` for viewing: a store directly, a video by packing it first.

    Args:
        path: a store folder or a video file.
        start: first frame of a video to pack.
        stop: one past the last frame of a video to pack (``None``: to the end).
        progress: a progress callback for the pack (as for ``Pipeline.run``).
        monitor: watches the pack (a live page).

    Raises:
        FileNotFoundError: nothing at ``path``.
        StoreError: a store that cannot be opened.
        MediaError: a video that cannot be decoded.
    """
    source = Path(path)
    if not source.exists():
        raise FileNotFoundError(f"{str(source)!r} does not exist; give a store folder or a video")
    if is_store(source):
        return Viewed(FrameStore(source), name=source.name)
    folder = Path(tempfile.mkdtemp(prefix="hf-view-"))
    try:
        target = folder / "packed.hfs"
        options = GroupingOptions()
        grouping = {"threshold": options.threshold, "min_len": options.min_len,
                    "max_len": options.max_len}  # fmt: skip
        sink = _RecordingSink(target, grouping=grouping)
        video = VideoSource(source, start=start, stop=stop)
        pipeline = Pipeline.from_source(video, batch_size=16).group(
            threshold=options.threshold, min_len=options.min_len, max_len=options.max_len
        )
        pipeline.to(sink).run(progress=progress, monitor=monitor)
        distances = np.concatenate(sink.distances) if sink.distances else None
        if distances is not None and len(distances):
            distances[0] = np.nan  # the first frame has no predecessor
        return Viewed(FrameStore(target), name=source.name, distances=distances, temporary=folder)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
