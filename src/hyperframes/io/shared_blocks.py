"""Blocks of shared memory a ``DataLoader``'s worker fills with batches and reuses once the
loop has let them go (:class:`Blocks`), so that memory is touched once, not every batch.

A batch made in a fresh block of shared memory (what torch does for every batch a worker
hands over) has the kernel find and zero every page of it on first touch: 1.5 million
page faults for 1,500 frames of 720p, five of the fourteen CPU seconds of the epoch. A
block is reused only once the loop cannot see it any more: the batch reaches the loop as
a tensor on the block (:func:`owned`), and when the last tensor or view on it dies in the
loop's process, a finalizer there clears the block's byte in a small flags block that the
worker reads before it reuses one. While the loop keeps every batch (``list(loader)``),
the worker takes fresh blocks, as torch would: the frames a loop holds never change under
it. Both blocks are torch's shared storages, passed as file descriptors and unlinked at
once, so nothing is left in ``/dev/shm`` whatever ends the processes.
"""

from __future__ import annotations

import weakref
from typing import Any

from .tensors import import_torch

torch = import_torch()

KEPT = 8
"""Blocks a worker keeps for reuse: the batches in flight (the loader's prefetch, two a
worker by default), the one the loop holds, and the one being filled, with room over."""


class Blocks:
    """A worker's reusable blocks of shared memory, and the flags that say which of them
    the loop may still hold."""

    def __init__(self, kept: int = KEPT) -> None:
        self.flags = torch.UntypedStorage._new_shared(kept)
        self._held = _bytes_of(self.flags)
        self._held.zero_()
        self.blocks: list[Any] = []
        self.kept = kept

    def tensor(self, shape: tuple[int, ...]) -> tuple[Any, int | None]:
        """A uint8 tensor of ``shape`` on a block the loop has let go, or on a new one;
        and the block's number (``None``: a block not kept, all of them being held)."""
        nbytes = _count(shape)
        held = self._held.tolist()
        free = [k for k in range(len(self.blocks)) if not held[k]]
        if free:
            k = free[0]
            if self.blocks[k].nbytes() < nbytes:  # (a batch of another size)
                self.blocks[k] = torch.UntypedStorage._new_shared(nbytes)
        elif len(self.blocks) < self.kept:
            k = len(self.blocks)
            self.blocks.append(torch.UntypedStorage._new_shared(nbytes))
        else:
            return _bytes_of(torch.UntypedStorage._new_shared(nbytes)).view(shape), None
        self._held[k] = 1
        return _bytes_of(self.blocks[k])[:nbytes].view(shape), k

    def handed(self, tensor: Any, k: int | None) -> Any:
        """What to hand the loop for ``tensor`` (a view of block ``k``): an object that
        reaches the loop's process as the tensor, watched there until it dies."""
        return tensor if k is None else Handed(tensor, self.flags, k)


class Handed:
    """A tensor on a kept block, on its way to the loop: pickled (as a ``DataLoader``'s
    queue does), it is rebuilt there by :func:`owned`."""

    def __init__(self, tensor: Any, flags: Any, k: int) -> None:
        self.tensor, self.flags, self.k = tensor, flags, k

    def __reduce__(self) -> tuple[Any, ...]:
        t = self.tensor
        where = (t.storage_offset(), tuple(t.shape), tuple(t.stride()))
        return owned, (t.untyped_storage(), *where, self.flags, self.k)


class ByValue:
    """A small array on its way to the loop, which gets it as a tensor: pickled by value
    (a tensor would go through a block of shared memory of its own, a file descriptor
    passed and mapped for a few bytes)."""

    def __init__(self, array: Any) -> None:
        self.array = array

    def __reduce__(self) -> tuple[Any, ...]:
        return torch.from_numpy, (self.array,)


def owned(
    storage: Any, offset: int, shape: tuple[int, ...], stride: tuple[int, ...], flags: Any,
    k: int,
) -> Any:  # fmt: skip
    """The loop's tensor on ``storage``; when the last tensor on it dies, block ``k`` is
    marked free in ``flags`` for the worker to reuse."""
    tensor = torch.empty(0, dtype=torch.uint8).set_(storage, offset, shape, stride)
    done = weakref.finalize(storage, _let_go, flags, k)
    done.atexit = False
    return tensor


def _let_go(flags: Any, k: int) -> None:
    _bytes_of(flags)[k] = 0


def _bytes_of(storage: Any) -> Any:
    return torch.empty(0, dtype=torch.uint8).set_(storage)


def _count(shape: tuple[int, ...]) -> int:
    n = 1
    for size in shape:
        n *= size
    return n
