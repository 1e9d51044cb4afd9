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

The loop's process keeps its own mapping of each block of a worker while the worker runs
(:func:`keep_mappings`): a block sent again is then found mapped (torch looks a storage up
by its file), instead of being mapped afresh and every page of it faulted in again on the
first read (the loop waited 0.6 s of a 720p epoch for batches against 1.0 s). They go
when the loop lets a batch go after its worker ended (the loader done), when a worker of
a new epoch takes the same place, or with the dataset.
"""

from __future__ import annotations

import itertools
import math
import os
import weakref
from typing import Any

from .tensors import import_torch

torch = import_torch()

KEPT = 8
"""Blocks a worker keeps for reuse: the batches in flight (the loader's prefetch, two a
worker by default), the one the loop holds, and the one being filled, with room over."""


class Blocks:
    """A worker's reusable blocks of shared memory, and the flags that say which of them
    the loop may still hold.

    Args:
        owner: the key its dataset was kept under (:func:`keep_mappings`), ``None`` if not.
        worker: the worker's number in its loader.
        kept: blocks kept for reuse.
    """

    def __init__(self, owner: int | None = None, worker: int = 0, kept: int = KEPT) -> None:
        self.flags = torch.UntypedStorage._new_shared(kept)
        self._held = _bytes_of(self.flags)
        self._held.zero_()
        self.blocks: list[Any] = []
        self.owner, self.worker, self.kept = owner, (worker, os.getpid()), kept

    def tensor(self, shape: tuple[int, ...]) -> tuple[Any, int | None]:
        """A uint8 tensor of ``shape`` on a block the loop has let go, or on a new one;
        and the block's number (``None``: a block not kept, all of them being held)."""
        nbytes = math.prod(shape)
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
        return tensor if k is None else Handed(tensor, self, k)


class Handed:
    """A tensor on a kept block, on its way to the loop: pickled (as a ``DataLoader``'s
    queue does), it is rebuilt there by :func:`owned`."""

    def __init__(self, tensor: Any, blocks: Blocks, k: int) -> None:
        self.tensor, self.blocks, self.k = tensor, blocks, k

    def __reduce__(self) -> tuple[Any, ...]:
        t, blocks = self.tensor, self.blocks
        where = (t.storage_offset(), tuple(t.shape), tuple(t.stride()))
        place = (blocks.flags, self.k, blocks.owner, *blocks.worker)
        return owned, (t.untyped_storage(), *where, *place)


class ByValue:
    """A small array on its way to the loop, which gets it as a tensor: pickled by value
    (a tensor would go through a block of shared memory of its own, a file descriptor
    passed and mapped for a few bytes)."""

    def __init__(self, array: Any) -> None:
        self.array = array

    def __reduce__(self) -> tuple[Any, ...]:
        return torch.from_numpy, (self.array,)


_OWNERS: weakref.WeakValueDictionary[int, Any] = weakref.WeakValueDictionary()
"""The datasets of this process whose workers' blocks it keeps mapped, by key."""
_MAPPINGS: weakref.WeakKeyDictionary[Any, dict[int, Any]] = weakref.WeakKeyDictionary()
"""For each such dataset, by worker number: the worker's process id and this process's
mapping of each of its blocks."""
_KEYS = itertools.count()


def keep_mappings(owner: Any) -> int:
    """Keep the mappings of the blocks that ``owner``'s workers send (a dataset, in the
    loop's process), for as long as it lives; the key its workers send them under."""
    key = next(_KEYS)
    _OWNERS[key] = owner
    return key


def owned(
    storage: Any, offset: int, shape: tuple[int, ...], stride: tuple[int, ...], flags: Any,
    k: int, owner: int | None, worker: int, pid: int,
) -> Any:  # fmt: skip
    """The loop's tensor on ``storage`` (block ``k`` of worker ``worker``, process ``pid``);
    when the last tensor or view on it dies, the block is marked free in ``flags`` for the
    worker to reuse, and where the worker has ended, the mappings of its blocks go."""
    dataset = None if owner is None else _OWNERS.get(owner)
    if dataset is None:  # (not the process that made the dataset: nothing kept)
        tensor = torch.empty(0, dtype=torch.uint8).set_(storage, offset, shape, stride)
        weakref.finalize(storage, _let_go, flags, k).atexit = False
        return tensor
    kept = _MAPPINGS.setdefault(dataset, {})
    mapped = kept.get(worker)
    if mapped is None or mapped["pid"] != pid:
        mapped = kept[worker] = {"pid": pid}  # (a new worker: the old one's go)
    base = mapped.get(k)
    if base is None or base.untyped_storage().data_ptr() != storage.data_ptr():
        base = mapped[k] = _bytes_of(storage)  # (first sent, or a new block in its place)
    own = base.numpy()  # an array of the loop's alone on the mapping: its end frees the block
    tensor = torch.from_numpy(own).as_strided(shape, stride, offset)
    weakref.finalize(own, _let_go, flags, k, dataset).atexit = False
    return tensor


def _let_go(flags: Any, k: int, dataset: Any = None) -> None:
    """Mark block ``k`` free in ``flags``; and forget this process's mappings of the blocks
    of ``dataset``'s workers that have ended (their loader is done)."""
    _bytes_of(flags)[k] = 0
    kept = _MAPPINGS.get(dataset, {}) if dataset is not None else {}
    for number, mapped in list(kept.items()):
        try:
            os.kill(mapped["pid"], 0)  # (a signal of 0 only asks whether it is there)
        except ProcessLookupError:
            del kept[number]
        except OSError:
            pass


def _bytes_of(storage: Any) -> Any:
    return torch.empty(0, dtype=torch.uint8).set_(storage)
