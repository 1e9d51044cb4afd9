"""Frames, batch handles and the preallocated pool they live in.

The pool owns every pixel that moves through a pipeline. It is one block of memory cut
into ``slots``; each slot holds up to ``batch_size`` frames of one :class:`FrameSpec`,
or as many smaller ones of the same kind as fit (the inputs of a job over videos of
several sizes: :meth:`FramePool.view` with a spec). What travels between stages is a
:class:`Batch`: a thin handle naming a slot plus the ids and metadata of the frames in
it.

Example:
    >>> spec = FrameSpec((720, 1280, 3), "uint8")
    >>> pool = FramePool(spec, batch_size=8, slots=4)
    >>> slot = pool.acquire(holder="source")
    >>> pool.view(slot).shape
    (8, 720, 1280, 3)
    >>> pool.release(slot)

Longer than 300 lines: FrameSpec, Batch and FramePool refer to each other; they are the
bottom floor and move together.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from .errors import Cancelled, PoolExhausted

MAX_BATCH_SIZE = 4096

MEMORY_SHARE = 0.5
"""The pools of one run may take at most this share of physical memory."""


def check_batch_size(batch_size: int) -> int:
    """Return ``batch_size`` if it is a power of two in 1..4096, else raise ``ValueError``."""
    if (
        isinstance(batch_size, bool)
        or not isinstance(batch_size, int | np.integer)
        or batch_size < 1
        or batch_size > MAX_BATCH_SIZE
        or batch_size & (batch_size - 1)
    ):
        lower = 1 << max(0, int(batch_size).bit_length() - 1) if isinstance(batch_size, int) else 64
        lower = min(max(lower, 1), MAX_BATCH_SIZE)
        upper = min(lower * 2, MAX_BATCH_SIZE)
        hint = f"{lower} or {upper}" if lower != upper else str(lower)
        raise ValueError(
            f"batch_size must be a power of two between 1 and {MAX_BATCH_SIZE}, "
            f"got {batch_size!r}; try {hint}"
        )
    return int(batch_size)


def check_pool_memory(nbytes: int, *, what: str) -> None:
    """Refuse pools that would take more than half of physical memory, before allocating."""
    try:
        physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return
    if nbytes > MEMORY_SHARE * physical:
        raise MemoryError(
            f"{what} needs {nbytes / 2**30:.1f} GiB, more than half of this machine's "
            f"{physical / 2**30:.1f} GiB; lower batch_size= or slots=, or downscale the frames"
        )


def describe_shape(shape: tuple[int, ...], dtype: Any) -> str:
    """Frames of ``shape`` as people say sizes, width first: ``"1280x720, 3 channels,
    uint8"`` for ``(720, 1280, 3)``, ``"1280x720 uint8"`` for ``(720, 1280)``; any shape
    (for messages about frames that are wrong)."""
    if len(shape) == 2:
        return f"{shape[1]}x{shape[0]} {dtype}"
    if len(shape) == 3:
        height, width, channels = shape
        return f"{width}x{height}, {channels} channel{'s' if channels != 1 else ''}, {dtype}"
    return f"shape {tuple(shape)} {dtype}"


@dataclass(frozen=True)
class FrameSpec:
    """The shape and dtype of one frame, e.g. ``FrameSpec((720, 1280, 3), "uint8")``."""

    shape: tuple[int, ...]
    dtype: np.dtype[Any]

    def __init__(self, shape: tuple[int, ...] | list[int], dtype: Any = "uint8") -> None:
        try:
            dims = tuple(int(d) for d in shape)
        except TypeError as exc:
            raise TypeError(f"FrameSpec shape must be a tuple of ints, got {shape!r}") from exc
        if not dims or any(d < 1 for d in dims):
            raise ValueError(f"FrameSpec shape must have positive dimensions, got {dims}")
        kind = np.dtype(dtype)
        if kind.hasobject or kind.itemsize == 0:
            raise TypeError(f"FrameSpec dtype must be a fixed-size numeric type, got {kind}")
        object.__setattr__(self, "shape", dims)
        object.__setattr__(self, "dtype", kind)

    @classmethod
    def of(cls, frame: np.ndarray) -> FrameSpec:
        """The spec of one frame array."""
        return cls(frame.shape, frame.dtype)

    @property
    def nbytes(self) -> int:
        """Bytes of one frame."""
        return int(np.prod(self.shape)) * self.dtype.itemsize

    def describe(self) -> str:
        """The frames as people say sizes (see :func:`describe_shape`)."""
        return describe_shape(self.shape, self.dtype)

    def holds(self, other: FrameSpec) -> bool:
        """Whether a slot of frames of this spec holds as many frames of ``other``: the
        same dtype and number of axes (channels where there are three), no more bytes. A
        job over inputs of several sizes plans its slots for the largest."""
        same_kind = other.dtype == self.dtype and len(other.shape) == len(self.shape)
        channels = len(self.shape) < 3 or other.shape[2:] == self.shape[2:]
        return same_kind and channels and other.nbytes <= self.nbytes

    def __repr__(self) -> str:
        return f"FrameSpec(shape={self.shape}, dtype={self.dtype})"


class StageFailure(NamedTuple):
    """A stage's failure for good on a frame of one input (see :attr:`Batch.failed`)."""

    stage: str
    error: Exception
    input: int  # the frame's meta["input"]
    frame: int  # its frame in that input (meta["input_frame"], else its id)


def laid(out: np.ndarray, spec: FrameSpec) -> np.ndarray:
    """The memory of the contiguous frames ``out`` as all the frames of ``spec`` (which
    their spec :meth:`~FrameSpec.holds`: smaller ones) that it fits, from its start; no
    copy. (At least ``len(out)`` of them.)"""
    own = FrameSpec(out.shape[1:], out.dtype)
    if spec == own:
        return out
    if not own.holds(spec) or not out.flags.c_contiguous:
        raise ValueError(f"frames of {own.describe()} cannot hold frames of {spec.describe()}")
    count = out.nbytes // spec.nbytes
    return out.reshape(-1)[: count * int(np.prod(spec.shape))].reshape(count, *spec.shape)


@dataclass
class Batch:
    """A handle to up to ``batch_size`` consecutive frames held in one pool slot (or as
    many smaller ones as the slot fits: :attr:`sized`).

    Attributes:
        seq: position of the batch in the sequence (0, 1, 2, ...); order is restored on it.
        index: the frame ids of the frames in the batch, ``int64`` of length ``count``.
        pool: the pool whose slot holds the pixels.
        slot: the slot number in ``pool``.
        meta: per-frame metadata arrays of length ``count`` (e.g. ``"pts"``, ``"hyperframe"``).
        held: slots of earlier pools this batch still holds. A batch keeps every slot it
            took until it leaves the pipeline, so the source pool's slot count bounds the
            batches in flight everywhere, and no later pool can run dry (see ``runner``).
        failed: where a stage failed for good on a frame of one input: the batch holds
            the frames before it (maybe none), which the later stages still take; the
            sink writes them and then, in order, asks the source whether the run goes on
            without that input (``Source.input_failed``).
        sized: the frames' spec where it is not the pool's: frames of a smaller size (an
            input of a job over videos of several sizes) laid from the slot's start.
    """

    seq: int
    index: np.ndarray
    pool: FramePool
    slot: int
    meta: dict[str, np.ndarray] = field(default_factory=dict)
    held: tuple[tuple[FramePool, int], ...] = ()
    failed: StageFailure | None = None
    sized: FrameSpec | None = None

    @property
    def count(self) -> int:
        return len(self.index)

    @property
    def spec(self) -> FrameSpec:
        """The spec of this batch's frames: the pool's, or a smaller one (:attr:`sized`)."""
        return self.sized or self.pool.spec

    @property
    def frames(self) -> np.ndarray:
        """The ``(count, *shape)`` view of the frames: no copy; valid until the slot is released."""
        return self.pool.view(self.slot, self.sized)[: self.count]

    def moved_to(self, pool: FramePool, slot: int, sized: FrameSpec | None = None) -> Batch:
        """The same batch, now in ``slot`` of ``pool`` (frames of ``sized`` where they are
        not the pool's); the old slot stays held."""
        held = (*self.held, (self.pool, self.slot))
        return Batch(self.seq, self.index, pool, slot, self.meta, held, self.failed, sized)

    def one(self, j: int, pool: FramePool, slot: int) -> Batch:
        """Frame ``j`` of this batch as a batch of its own, held in ``slot`` of ``pool``
        (which the caller fills): its id and metadata (a kind of batch that carries more,
        such as ``engine.window``'s halo, carries frame ``j``'s share of it)."""
        meta = {k: v[j : j + 1] for k, v in self.meta.items()}
        sized = None if self.spec == pool.spec else self.spec
        return Batch(self.seq, self.index[j : j + 1], pool, slot, meta, sized=sized)

    def keep(self, rows: list[int]) -> None:
        """Drop every frame not in ``rows`` (sorted), moving the kept ones to the front."""
        if len(rows) == self.count:
            return
        frames = self.frames
        kept = frames[rows]
        self.index = self.index[rows]
        self.meta = {k: v[rows] for k, v in self.meta.items()}
        frames[: len(rows)] = kept

    def hand_over(self, holder: str) -> None:
        """Record ``holder`` as the holder of every slot of this batch."""
        for pool, slot in ((self.pool, self.slot), *self.held):
            pool.hand_over(slot, holder)

    def release(self) -> None:
        """Give back every slot the batch holds."""
        for pool, slot in ((self.pool, self.slot), *self.held):
            pool.release(slot)

    def describe(self) -> str:
        """``"batch 3 (frames 192..255)"``, for error messages."""
        if self.count == 0:
            return f"batch {self.seq} (no frames)"
        first, last = int(self.index[0]), int(self.index[-1])
        return f"batch {self.seq} (frames {first}..{last})"

    def __repr__(self) -> str:
        return (
            f"Batch(seq={self.seq}, count={self.count}, slot={self.slot}, "
            f"spec={self.spec!r}, meta={sorted(self.meta)})"
        )


MADV_POPULATE_WRITE = getattr(mmap, "MADV_POPULATE_WRITE", 23)
"""Linux 5.14+: map (and zero) a range's pages now, in one call (23 where Python lacks it)."""


def _libc_madvise() -> Any:
    """``madvise(2)`` from the C library, called without the GIL (``mmap.madvise`` keeps it
    the whole call: 12 ms a 44 MiB slot in which no other thread of the process ran);
    ``None`` where there is none."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        call = libc.madvise
    except (OSError, AttributeError):
        return None
    call.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
    call.restype = ctypes.c_int
    return call


_madvise = _libc_madvise()


def committed_memory(nbytes: int) -> Any:
    """Anonymous memory for a pool; its pages are mapped slot by slot, on first use.

    A fresh block is mapped lazily: the first write to each 4 KiB page faults, which
    made the first pass through a 720p pool about 8 x slower than later ones (4.8 vs
    0.6 ms per frame copy). Mapping the whole block up front (``MAP_POPULATE``, about
    0.8 ms per MiB) made every run pay for slots it never used, so :class:`FramePool`
    maps each slot when it is first acquired instead (:func:`populate`).
    """
    if nbytes == 0:
        return bytearray(0)
    return mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)


def populate(buffer: Any, block: np.ndarray, start: int, stop: int) -> None:
    """Map the pages of bytes ``start..stop`` of ``block`` (laid over ``buffer``) now.

    One ``madvise(MADV_POPULATE_WRITE)`` where the buffer is an mmap and the kernel has
    it; else one write per page, which faults the same pages from Python.
    """
    if stop <= start:
        return
    page = mmap.PAGESIZE
    if isinstance(buffer, mmap.mmap):
        low, high = start - start % page, min(len(buffer), -(-stop // page) * page)
        if _madvise is not None:  # (through ctypes, which lets go of the GIL meanwhile)
            if _madvise(block.ctypes.data + low, high - low, MADV_POPULATE_WRITE) == 0:
                return
        else:
            try:
                buffer.madvise(MADV_POPULATE_WRITE, low, high - low)
                return
            except (OSError, ValueError):
                pass
        # an older kernel: touch the pages instead
    flat = block.reshape(-1).view(np.uint8)
    flat[start:stop:page] = 0


class FramePool:
    """One preallocated block of frames divided into batch slots.

    Slots are handed out by :meth:`acquire` and returned by :meth:`release`.
    The pool counts every acquire and release and keeps the high-water mark
    of slots in use, so a leak shows as ``acquired != released``.

    Args:
        spec: the frame spec every slot holds.
        batch_size: frames per slot.
        slots: number of slots.
        name: a label for error messages and reports.
        buffer: an existing writable buffer to lay the block over (e.g. a
            ``multiprocessing.shared_memory`` block); a fresh numpy array when omitted.
    """

    def __init__(
        self,
        spec: FrameSpec,
        *,
        batch_size: int,
        slots: int,
        name: str = "pool",
        buffer: Any = None,
    ) -> None:
        if slots < 1:
            raise ValueError(f"a pool needs at least one slot, got slots={slots}")
        self.spec = spec
        self.batch_size = check_batch_size(batch_size)
        self.slots = int(slots)
        self.name = name
        shape = (self.slots, self.batch_size, *spec.shape)
        if buffer is None:
            buffer = committed_memory(int(np.prod(shape)) * spec.dtype.itemsize)
        self.block: np.ndarray = np.ndarray(shape, dtype=spec.dtype, buffer=buffer)
        self._buffer = buffer
        self._mapped = [False] * self.slots
        self._cond = threading.Condition()
        self._free = list(range(self.slots - 1, -1, -1))
        self._holders: dict[int, str] = {}
        self._cancelled = False
        self.acquired = 0
        self.released = 0
        self.high_water = 0

    @staticmethod
    def bytes_needed(spec: FrameSpec, batch_size: int, slots: int) -> int:
        return spec.nbytes * batch_size * slots

    @property
    def slot_nbytes(self) -> int:
        return self.spec.nbytes * self.batch_size

    @property
    def nbytes(self) -> int:
        return self.slot_nbytes * self.slots

    @property
    def in_use(self) -> int:
        with self._cond:
            return len(self._holders)

    def view(self, slot: int, spec: FrameSpec | None = None) -> np.ndarray:
        """The ``(batch_size, *shape)`` array of one slot; no copy. With ``spec`` (frames
        the pool's spec :meth:`~FrameSpec.holds`, of another size): all the frames of it
        that the slot fits (:meth:`capacity`), laid from its start."""
        return self.block[slot] if spec is None else laid(self.block[slot], spec)

    def capacity(self, spec: FrameSpec) -> int:
        """How many frames of ``spec`` one slot holds: ``batch_size`` of the pool's own,
        more of smaller ones that its spec :meth:`~FrameSpec.holds`, none of others."""
        return self.slot_nbytes // spec.nbytes if self.spec.holds(spec) else 0

    def acquire(self, *, holder: str, timeout: float | None = None) -> int:
        """Take a free slot, blocking while none is free.

        Args:
            holder: who takes the slot (a stage name), reported if the pool runs dry.
            timeout: seconds to wait; ``None`` waits until a slot is free or the pool is
                cancelled.

        Raises:
            PoolExhausted: no slot came free within ``timeout``; the message says who holds
                how many slots.
            Cancelled: the pool was cancelled while waiting.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while not self._free:
                if self._cancelled:
                    raise Cancelled("the pipeline stopped") from None
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    raise PoolExhausted(self._exhausted_message(holder, timeout))
                self._cond.wait(remaining)
            if self._cancelled:
                raise Cancelled("the pipeline stopped") from None
            slot = self._free.pop()
            self._holders[slot] = holder
            self.acquired += 1
            self.high_water = max(self.high_water, len(self._holders))
            first_use, self._mapped[slot] = not self._mapped[slot], True
        if first_use:  # outside the lock: the slot is this caller's alone
            size = self.slot_nbytes
            populate(self._buffer, self.block, slot * size, (slot + 1) * size)
        return slot

    def hand_over(self, slot: int, holder: str) -> None:
        """Record that ``holder`` now holds ``slot`` (for reports on who holds what)."""
        with self._cond:
            if slot in self._holders:
                self._holders[slot] = holder

    def release(self, slot: int) -> None:
        """Give a slot back. Releasing a slot that is not held raises ``ValueError``."""
        with self._cond:
            if slot not in self._holders:
                raise ValueError(f"slot {slot} of pool {self.name!r} is not held")
            del self._holders[slot]
            self._free.append(slot)
            self.released += 1
            self._cond.notify()

    def release_all(self) -> int:
        """Give back every held slot (after a failure); returns how many were held."""
        with self._cond:
            held = list(self._holders)
            for slot in held:
                del self._holders[slot]
                self._free.append(slot)
            self.released += len(held)
            self._cond.notify_all()
            return len(held)

    def cancel(self) -> None:
        """Wake every waiter with :class:`Cancelled`; later acquires fail the same way."""
        with self._cond:
            self._cancelled = True
            self._cond.notify_all()

    def holders(self) -> Mapping[str, int]:
        """How many slots each holder has, e.g. ``{"map:blur": 3, "sink": 1}``."""
        with self._cond:
            return self._holders_counts()

    def _exhausted_message(self, holder: str, timeout: float | None) -> str:
        held = ", ".join(f"{who} holds {n}" for who, n in sorted(self._holders_counts().items()))
        return (
            f"{holder} waited {timeout:g} s for a slot of pool {self.name!r} "
            f"({self.slots} slots of {self.batch_size} frames): {held or 'nobody holds any'}; "
            "a stage may be stuck or slow: raise slots=, lower batch_size= or "
            "raise slot_timeout="
        )

    def _holders_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for who in self._holders.values():
            counts[who] = counts.get(who, 0) + 1
        return counts

    def __repr__(self) -> str:
        return (
            f"FramePool(name={self.name!r}, spec={self.spec!r}, batch_size={self.batch_size}, "
            f"slots={self.slots}, nbytes={self.nbytes})"
        )
