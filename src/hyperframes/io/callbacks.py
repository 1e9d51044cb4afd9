"""Sinks that hand frames to Python code: a callback, a list in memory, or nothing.

Example:
    >>> sink = CallbackSink(lambda i, frame: print(i, frame.shape))
    >>> sink = CallbackSink(lambda ids, frames, meta: print(meta["pts"]), batched=True, meta=True)
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import numpy as np

from ..frames import FrameSpec
from .base import Sink


class CallbackSink(Sink):
    """Hands frames in input order to ``fn``, frame by frame or batch by batch.

    ========  ==========  ======================================================
    batched   meta        ``fn`` is called
    ========  ==========  ======================================================
    False     False       ``fn(i, frame)`` per frame
    True      False       ``fn(ids, frames)`` per batch
    False     True        ``fn(i, frame, meta)``; ``meta[key]`` is this frame's value
    True      True        ``fn(ids, frames, meta)``; ``meta[key]`` holds one value per
                          frame of the batch, in the order of ``ids``
    ========  ==========  ======================================================

    ``meta`` holds what the source and stages recorded per frame: ``"pts"`` (seconds) from
    a video, ``"hyperframe"``, ``"hf_pos"`` and ``"hf_len"`` from ``group()``, and the
    values of every ``map(..., into=key)`` stage (a numeric array when all are numbers,
    else an array of objects).

    The frame arrays are views into a pool slot, valid only during the call: copy what
    you keep. The ``meta`` dict and its arrays are the callback's to keep.

    Args:
        fn: the callback.
        batched: call once per batch instead of once per frame.
        meta: pass the per-frame metadata as a third argument.

    Raises:
        TypeError: ``fn`` is not callable.
    """

    takes_sizes = True  # (each call gets its own frames' shape)

    def __init__(
        self, fn: Callable[..., Any], *, batched: bool = False, meta: bool = False
    ) -> None:
        if not callable(fn):
            raise TypeError(f"for_each needs a callable, got {type(fn).__name__}")
        self.fn = fn
        self.batched = batched
        self.meta = meta

    def for_run(self) -> Sink:
        """Itself, shared: several runs may call the same function at once (a new object,
        so no run's claim stops another)."""
        return copy.copy(self)

    def write(self, frames: np.ndarray, index: np.ndarray, meta: dict[str, np.ndarray]) -> None:
        if self.batched:
            if self.meta:
                self.fn(index, frames, {k: v.copy() for k, v in meta.items()})
            else:
                self.fn(index, frames)
            return
        if self.meta:
            for j, i in enumerate(index.tolist()):
                self.fn(i, frames[j], {k: _item(v[j]) for k, v in meta.items()})
            return
        for i, frame in zip(index.tolist(), frames, strict=True):
            self.fn(i, frame)


def _item(value: Any) -> Any:
    """A numpy scalar as the Python number it holds; anything else as it is."""
    return value.item() if isinstance(value, np.generic) else value


class CollectSink(Sink):
    """Keeps a copy of every frame; ``close`` returns them as one array.

    Note:
        This grows with the sequence; it is for short sequences and tests.
    """

    def __init__(self) -> None:
        self._parts: list[np.ndarray] = []
        self._spec: FrameSpec | None = None

    def for_run(self) -> Sink:
        return CollectSink()  # each run collects its own frames

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

    takes_sizes = True

    def for_run(self) -> Sink:
        return NullSink()

    def write(self, frames: np.ndarray, index: np.ndarray, meta: dict[str, np.ndarray]) -> None:
        return None
