"""Sources shown at other times, numbered or sized otherwise: a source played several
times in a row, as one longer sequence (:class:`Looped`), its samples shown at the times
they were asked for (:class:`Retimed`), numbered 0, 1, 2... (:class:`Renumbered`), or
resized (:class:`Resized`: a store read at another size).

Example (a 132-frame clip played 25 times is 3,300 frames)::

    source = Looped(lambda: VideoSource("clip.mp4"), times=25)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np

from ..frames import FrameSpec
from .base import Chunk, Footprint, Source


class Looped(Source):
    """The frames of ``make()`` repeated ``times`` times, with ids and ``pts`` running on.

    Args:
        make: builds a fresh source for each pass.
        times: how many passes, at least 1.
    """

    def __init__(self, make: Callable[[], Source], *, times: int) -> None:
        if isinstance(times, bool) or not isinstance(times, int) or times < 1:
            raise ValueError(f"times must be a positive integer, got {times!r}")
        self._make = make
        self.times = times
        self._memory: int | None = None  # what the run's plan gave the reader
        self._by_bytes = False  # what the run lets the reader fill (fill_by_bytes)
        self._inner = make()
        self.spec, self.several_sizes = self._inner.spec, self._inner.several_sizes
        inner_len = self._inner.length
        self.length = None if inner_len is None else inner_len * times
        self.info = dict(getattr(self._inner, "info", {}), loops=times)
        self._start_over()

    def _start_over(self) -> None:
        self._pass = 0
        self._frame_offset = 0
        self._time_offset = 0.0
        self._seen = 0
        self._last_pts: float | None = None
        self._step = 0.0

    def footprint(self) -> Footprint:
        return self._inner.footprint()

    def use_memory(self, nbytes: int) -> None:
        self._memory = nbytes
        self._inner.use_memory(nbytes)

    def fill_by_bytes(self, allowed: bool) -> None:
        self._by_bytes = allowed
        self._inner.fill_by_bytes(allowed)

    def _fresh(self) -> None:
        """A new reader for the next pass, given what the plan gave the first."""
        self._inner = self._make()
        if self._memory is not None:
            self._inner.use_memory(self._memory)
        self._inner.fill_by_bytes(self._by_bytes)

    def open(self) -> None:
        """Start from the first pass: a second run reads every pass again."""
        if self._pass or self._seen:
            self._start_over()
            self._fresh()
        self._inner.open()

    def close(self) -> None:
        self._inner.close()

    def read_into(self, out: np.ndarray) -> Chunk:
        while self._pass < self.times:
            chunk = self._inner.read_into(out)
            if len(chunk):
                return self._shifted(chunk)
            self._next_pass()
        return Chunk(np.empty(0, np.int64))

    def _shifted(self, chunk: Chunk) -> Chunk:
        meta = dict(chunk.meta)
        pts = meta.get("pts")
        if pts is not None and len(pts):
            if len(pts) > 1:
                self._step = float(pts[-1] - pts[-2])
            self._last_pts = float(pts[-1])
            meta["pts"] = pts + self._time_offset
        self._seen = max(self._seen, int(chunk.index[-1]) + 1)
        return Chunk(chunk.index + self._frame_offset, meta, chunk.spec)

    def _next_pass(self) -> None:
        self._inner.close()
        self._pass += 1
        if self._pass >= self.times:
            return
        self._frame_offset += self._seen
        if self._last_pts is not None:
            self._time_offset += self._last_pts + self._step
        self._seen, self._last_pts = 0, None
        self._fresh()
        self._inner.open()


class _Around(Source):
    """A source around another: its frames, with what the subclass changes."""

    def __init__(self, inner: Source) -> None:
        self._inner = inner
        self.spec, self.length = inner.spec, inner.length
        self.several_sizes = inner.several_sizes
        self.info = dict(getattr(inner, "info", {}))

    def open(self) -> None:
        self._inner.open()

    def close(self) -> None:
        self._inner.close()

    def notes(self) -> dict[str, Any]:
        return self._inner.notes()

    def footprint(self) -> Footprint:
        return self._inner.footprint()

    def use_memory(self, nbytes: int) -> None:
        self._inner.use_memory(nbytes)

    def fill_by_bytes(self, allowed: bool) -> None:
        self._inner.fill_by_bytes(allowed)


class Retimed(_Around):
    """A sampled source's frames shown at the times asked for (``meta["at"]``, as
    ``fps=`` gives them: a constant rate), or, with ``rate``, one after the other at that
    rate (``at=`` times, which may go back).

    Args:
        inner: a source whose chunks carry ``meta["at"]`` (``fps=`` or ``at=``).
        rate: show sample ``k`` at ``k / rate`` seconds instead.
    """

    def __init__(self, inner: Source, *, rate: float | None = None) -> None:
        super().__init__(inner)
        self._rate = rate

    def read_into(self, out: np.ndarray) -> Chunk:
        chunk = self._inner.read_into(out)
        meta = dict(chunk.meta)
        if self._rate is not None:
            meta["pts"] = chunk.index / self._rate
        elif len(chunk):
            meta["pts"] = meta["at"]
        return Chunk(chunk.index, meta, chunk.spec)


class Renumbered(_Around):
    """A source's frames numbered 0, 1, 2... (as a store holds them), each keeping its
    index in the input in ``meta["input_frame"]`` and its own time."""

    def __init__(self, inner: Source) -> None:
        super().__init__(inner)
        self._next = 0

    def open(self) -> None:
        self._next = 0
        self._inner.open()

    def read_into(self, out: np.ndarray) -> Chunk:
        chunk = self._inner.read_into(out)
        meta = dict(chunk.meta)
        meta.setdefault("input_frame", chunk.index)
        ids = np.arange(self._next, self._next + len(chunk), dtype=np.int64)
        self._next += len(chunk)
        return Chunk(ids, meta, chunk.spec)


STAGED = 8
"""Frames a :class:`Resized` source reads at a time at their own size, before resizing
them into the run's slot: its memory outside the pools, in its footprint."""


class Resized(_Around):
    """A source's frames resized to ``size`` (``(width, height)``), averaged by OpenCV's
    ``INTER_AREA`` (as a video's frames whose size changes part-way are), for a source
    that reads at one size only (a store): read :data:`STAGED` at a time into a buffer
    of its own, then each resized into the run's slot.

    Raises:
        ValueError: a size that is not two positive integers, or frames OpenCV does not
            resize (more than 4 channels).
    """

    def __init__(self, inner: Source, size: tuple[int, int]) -> None:
        super().__init__(inner)
        width, height = size
        if not (int(width) == width > 0 and int(height) == height > 0):
            raise ValueError(f"size must be (width, height), two positive integers; got {size}")
        shape = inner.spec.shape
        if len(shape) == 3 and shape[2] > 4:
            raise ValueError(f"frames of {shape[2]} channels cannot be resized; drop size")
        self._size = (int(width), int(height))
        self._from = inner.spec
        self.spec = FrameSpec((int(height), int(width), *shape[2:]), inner.spec.dtype)
        self._staged: np.ndarray | None = None

    def footprint(self) -> Footprint:
        inner, staged = self._inner.footprint(), STAGED * self._from.nbytes
        return dataclasses.replace(inner, least=inner.least + staged, wants=inner.wants + staged)

    def use_memory(self, nbytes: int) -> None:
        self._inner.use_memory(max(0, nbytes - STAGED * self._from.nbytes))

    def read_into(self, out: np.ndarray) -> Chunk:
        import cv2

        from .formats import cv_into

        if self._staged is None:
            self._staged = np.empty((STAGED, *self._from.shape), self._from.dtype)
        chunks: list[Chunk] = []
        done = 0
        while done < len(out):
            chunk = self._inner.read_into(self._staged[: min(STAGED, len(out) - done)])
            for k in range(len(chunk)):
                cv_into(out[done + k], self.spec.shape, cv2.resize, self._staged[k],
                        self._size, interpolation=cv2.INTER_AREA)  # fmt: skip
            if not len(chunk):
                break
            chunks.append(chunk)
            done += len(chunk)
        if len(chunks) == 1:
            return chunks[0]
        if not chunks:
            return Chunk(np.empty(0, np.int64))
        keys = set.intersection(*(set(c.meta) for c in chunks))
        meta = {key: np.concatenate([c.meta[key] for c in chunks]) for key in keys}
        return Chunk(np.concatenate([c.index for c in chunks]), meta)

    def close(self) -> None:
        self._staged = None
        super().close()
