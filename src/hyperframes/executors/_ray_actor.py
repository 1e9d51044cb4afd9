"""The Ray side of a stage: an actor that runs the stage function, and how arrays travel.

On the driver's host, pools are shared-memory blocks: an array in one travels to an
actor on the same host as a :class:`~hyperframes.executors._wire.Shared` handle (block,
offset, shape, strides), the actor maps the block once and works on the very same
memory, and a result that lies in a block comes back as a handle too. Only a few
numbers cross Ray's object store.

Other arrays (or every array, for an actor on another host) travel through Ray's
object store, where they are read-only; the actor calls the function on writable
copies. What comes back tells the driver where the result belongs (:class:`Answer`): a
result that *is* one of the arguments (an in-place stage) is copied back into the
driver's own argument, so the engine sees its pool slot and copies nothing more. A
strided view of a contiguous array (the windows of a windowed stage) travels as its
base array plus strides, not as a copy of every window.

This module imports nothing from Ray; ``executors.ray`` wraps :class:`StageActor`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ._shm import BlockMaps, ShmView, byte_range
from ._wire import Failure, Shared


@dataclass(frozen=True)
class Strided:
    """A strided view of ``base`` (a contiguous array), rebuilt on the other side."""

    base: np.ndarray
    offset: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]

    def array(self) -> np.ndarray:
        view: np.ndarray = np.ndarray(
            self.shape, self.base.dtype, buffer=self.base, offset=self.offset, strides=self.strides
        )
        view.flags.writeable = False
        return view


@dataclass(frozen=True)
class Answer:
    """A stage call's outcome: ``value`` (maybe :class:`Shared`), or argument ``same_as``
    itself, plus write-backs of arguments that did not travel as handles."""

    value: Any = None
    same_as: int | None = None
    written: dict[int, np.ndarray] | None = None
    failure: Failure | None = None


def pack(value: Any) -> Any:
    """``value`` ready to send: a non-contiguous view of a contiguous base as :class:`Strided`."""
    if not isinstance(value, np.ndarray) or value.flags.c_contiguous or value.size == 0:
        return value
    base = value.base
    while base is not None and not (isinstance(base, np.ndarray) and base.flags.c_contiguous):
        base = getattr(base, "base", None)
    if base is None:
        return value
    low, high = byte_range(value)
    start = int(base.__array_interface__["data"][0])
    if low < start or high > start + base.nbytes or base.dtype != value.dtype:
        return value
    offset = int(value.__array_interface__["data"][0]) - start
    return Strided(base, offset, tuple(value.shape), tuple(value.strides))


def unpack(value: Any) -> Any:
    return value.array() if isinstance(value, Strided) else value


def same_view(a: Any, b: np.ndarray) -> bool:
    return (
        isinstance(a, np.ndarray)
        and a.shape == b.shape
        and a.dtype == b.dtype
        and a.strides == b.strides
        and a.__array_interface__["data"][0] == b.__array_interface__["data"][0]
    )


class StageActor:
    """Runs one stage function on a Ray worker (wrapped with ``ray.remote`` by the driver)."""

    def __init__(self, fn: Any) -> None:
        self.fn = fn
        self._scratch: dict[int, np.ndarray] = {}
        self._maps = BlockMaps()

    def sees(self, block: str, token: bytes) -> bool:
        """Whether this actor can map the driver's shared ``block``, which starts with ``token``.

        True exactly when the actor shares the driver's host (and its ``/dev/shm``).
        """
        where = ShmView(block, 0, (len(token),), (1,), "|u1", False)
        try:
            return bytes(self._maps.view(where)) == token
        except (OSError, ValueError):
            return False

    def call(self, *args: Any) -> Answer:
        try:
            values = [self._value(i, a) for i, a in enumerate(args)]
            result = self.fn(*values)
        except BaseException as exc:
            return Answer(failure=Failure.of(exc))
        where = self._maps.locate(result)
        if where is not None:
            return Answer(value=Shared(where))
        copied = [
            (i, v)
            for i, (v, a) in enumerate(zip(values, args, strict=True))
            if isinstance(v, np.ndarray) and not isinstance(a, Shared)
        ]
        for i, v in copied:
            if isinstance(result, np.ndarray) and same_view(v, result):
                return Answer(value=result, same_as=i)
        written = None
        if result is None:
            written = {i: v for i, v in copied if v.flags.writeable}
        return Answer(value=result, written=written)

    def _value(self, position: int, value: Any) -> Any:
        """The argument as the function sees it: a handle becomes a view of shared memory;
        a read-only array from the object store, a writable copy; windows stay read-only.

        The copy goes into a buffer kept per argument position (an actor runs one call at
        a time, and Ray copies results out when the call returns): reusing mapped memory
        avoids a page fault per 4 KiB, which made fresh copies several times slower.
        """
        if isinstance(value, Shared):
            return self._maps.view(value.where)
        if isinstance(value, Strided):
            return value.array()
        if not isinstance(value, np.ndarray) or value.flags.writeable:
            return value
        scratch = self._scratch.get(position)
        if scratch is None or scratch.shape != value.shape or scratch.dtype != value.dtype:
            scratch = self._scratch[position] = np.empty_like(value)
        np.copyto(scratch, value)
        return scratch
