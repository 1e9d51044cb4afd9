"""Sinks that hand frames to Python code: a callback, a list in memory, or nothing.

Example:
    >>> sink = CallbackSink(lambda i, frame: print(i, frame.shape))
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..engine.frames import FrameSpec
from .base import Sink


class CallbackSink(Sink):
    """Calls ``fn(index, frame)`` per frame, or ``fn(index_array, frames)`` per batch.

    The arrays are views into a pool slot, valid only during the call: copy what you keep.
    """

    def __init__(self, fn: Callable[..., Any], *, batched: bool = False) -> None:
        if not callable(fn):
            raise TypeError(f"for_each needs a callable, got {type(fn).__name__}")
        self.fn = fn
        self.batched = batched

    def write(self, frames: np.ndarray, index: np.ndarray, meta: dict[str, np.ndarray]) -> None:
        if self.batched:
            self.fn(index, frames)
            return
        for i, frame in zip(index.tolist(), frames, strict=True):
            self.fn(i, frame)


class CollectSink(Sink):
    """Keeps a copy of every frame; ``close`` returns them as one array.

    Note:
        This grows with the sequence; it is for short sequences and tests.
    """

    def __init__(self) -> None:
        self._parts: list[np.ndarray] = []
        self._spec: FrameSpec | None = None

    def open(self, spec: FrameSpec, info: dict[str, Any]) -> None:
        self._parts = []
        self._spec = spec

    def write(self, frames: np.ndarray, index: np.ndarray, meta: dict[str, np.ndarray]) -> None:
        self._parts.append(frames.copy())

    def close(self, *, ok: bool) -> Any:
        parts, self._parts = self._parts, []
        if not ok:
            return None
        if parts:
            return np.concatenate(parts)
        spec = self._spec
        return np.empty((0, *spec.shape), spec.dtype) if spec else np.empty((0,))


class NullSink(Sink):
    """Drops every frame (to measure the line itself)."""

    def write(self, frames: np.ndarray, index: np.ndarray, meta: dict[str, np.ndarray]) -> None:
        return None
