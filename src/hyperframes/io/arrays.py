"""Sources of frames held in memory or made on demand.

* :class:`ArraySource`: slices of one ``(N, *shape)`` array.
* :class:`IterableSource`: frames from any iterable (a list, a generator), checked one by one.
* :class:`IndexSource`: frame ids only, for stages that render frame ``i`` themselves
  (``Pipeline.from_generator``).

Example:
    >>> src = ArraySource(np.zeros((10, 4, 4, 3), np.uint8))
    >>> src.spec, src.length
    (FrameSpec(shape=(4, 4, 3), dtype=uint8), 10)
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np

from ..errors import FrameError
from ..frames import FrameSpec, describe_shape
from .base import Chunk, Source

SAME_AS_BEFORE = "like the frames before it"


def check_frame(
    frame: Any, spec: FrameSpec, i: int, *, origin: str, fixed_by: str = SAME_AS_BEFORE
) -> np.ndarray:
    """Return ``frame`` if it is an array matching ``spec``; else raise ``FrameError`` naming it.

    Args:
        frame: what the source or render function gave for frame ``i``.
        spec: the shape and dtype every frame must have.
        i: the frame's index.
        origin: who gave it, e.g. ``"render(12)"``.
        fixed_by: where ``spec`` comes from, as the message should say it.
    """
    if not isinstance(frame, np.ndarray):
        raise FrameError(
            f"frame {i} from {origin} is a {type(frame).__name__}, expected a numpy array of "
            f"{spec.describe()}"
        )
    if frame.shape != spec.shape or frame.dtype != spec.dtype:
        raise FrameError(
            f"frame {i} from {origin} is {describe_shape(frame.shape, frame.dtype)}, "
            f"expected {spec.describe()} {fixed_by}; every frame of a "
            "sequence must have the same shape and dtype"
        )
    return frame


class ArraySource(Source):
    """Frames from one array of shape ``(N, *frame_shape)``."""

    def __init__(self, frames: np.ndarray) -> None:
        if frames.ndim < 2:
            raise ValueError(
                f"an array of frames needs shape (N, height, width[, channels]), got {frames.shape}"
            )
        self.frames = frames
        self.spec = FrameSpec(frames.shape[1:], frames.dtype)
        self.length = len(frames)
        self.info = {"source": "array", "frames": self.length}
        self._next = 0

    def for_run(self) -> Source:
        """A copy with its own position: several runs may read the same frames at once."""
        return copy.copy(self)

    def open(self) -> None:
        self._next = 0

    def read_into(self, out: np.ndarray) -> Chunk:
        start = self._next
        stop = min(start + len(out), len(self.frames))
        np.copyto(out[: stop - start], self.frames[start:stop])
        self._next = stop
        return Chunk(np.arange(start, stop, dtype=np.int64))


class IterableSource(Source):
    """Frames from an iterable; the first frame fixes the spec unless ``spec`` is given.

    Note:
        The iterable is consumed once; a second run of the same pipeline sees no frames.
    """

    def __init__(
        self,
        frames: Iterable[np.ndarray],
        *,
        spec: FrameSpec | None = None,
        length: int | None = None,
    ) -> None:
        self._it: Iterator[Any] = iter(frames)
        self._fixed_by = SAME_AS_BEFORE
        if spec is None:
            try:
                first = next(self._it)
            except StopIteration:
                raise ValueError(
                    "the iterable of frames is empty and no spec= was given, so the frame "
                    "shape is unknown; pass spec=FrameSpec(shape, dtype)"
                ) from None
            if not isinstance(first, np.ndarray):
                raise FrameError(f"frame 0 is a {type(first).__name__}, expected a numpy array")
            spec = FrameSpec.of(first)
            self._it = itertools.chain([first], self._it)
        else:
            self._fixed_by = "as the spec= given says"
        self.spec = spec
        if length is None and hasattr(frames, "__len__"):
            length = len(frames)  # type: ignore[arg-type]
        self.length = length
        self.info = {"source": "iterable", "frames": length}
        self._next = 0

    def read_into(self, out: np.ndarray) -> Chunk:
        start = self._next
        count = 0
        for frame in itertools.islice(self._it, len(out)):
            out[count] = check_frame(
                frame, self.spec, start + count, origin="the source", fixed_by=self._fixed_by
            )
            count += 1
        self._next += count
        return Chunk(np.arange(start, start + count, dtype=np.int64))


class IndexSource(Source):
    """Frame ids ``start .. start+count-1`` with no pixels: a later stage renders each frame."""

    def __init__(self, count: int, spec: FrameSpec, start: int = 0) -> None:
        for name, value in (("count", count), ("start", start)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
        self.spec = spec
        self.count = self.length = count
        self.start = start
        self.info = {"source": "generator", "frames": count}
        self._next = 0

    def for_run(self) -> Source:
        """A copy with its own position: several runs may read the same frames at once."""
        return copy.copy(self)

    def open(self) -> None:
        self._next = 0

    def read_into(self, out: np.ndarray) -> Chunk:
        start = self._next
        stop = min(start + len(out), self.count)
        self._next = stop
        return Chunk(np.arange(self.start + start, self.start + stop, dtype=np.int64))
