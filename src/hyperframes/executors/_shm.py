"""Shared-memory blocks for process workers, and arrays described by where they lie in them.

The parent creates blocks (:class:`SharedBlocks`) and hands their buffers to the frame
pools; an array that lies inside a block crosses to a child as a :class:`ShmView`
(block name, offset, shape, strides, dtype), which the child turns back into a view of
its own mapping of the block (:class:`BlockMaps`): no pixel is copied.

Both sides map blocks with their own ``mmap`` rather than through
``SharedMemory.buf``: a numpy view keeps a buffer export on the memoryview, which made
``SharedMemory.close()`` raise ``BufferError`` while a pool was still referenced. An
``mmap`` is unmapped when its last view dies, with no error.

Each block is named after the process that made it (``hf_<pid>_<random>``,
:func:`block_name`): what ``/dev/shm`` holds says whose it is, so a block left by a
killed job can be traced to it, and a check for leftovers can tell its own blocks from
those of another job on the machine.

Example:
    >>> blocks = SharedBlocks()
    >>> buffer = blocks.create(4096)
    >>> blocks.unlink_all()
"""

from __future__ import annotations

import contextlib
import mmap
import os
import secrets
import shutil
import threading
import weakref
from dataclasses import dataclass
from multiprocessing import shared_memory
from typing import Any, NamedTuple

import numpy as np

_POPULATE = getattr(mmap, "MAP_POPULATE", 0)
BLOCK_PREFIX = "hf_"
"""What the name of every block of ours begins with (:func:`block_name`)."""


def block_name() -> str:
    """A new block's name: ``hf_<pid of this process>_<8 random hex digits>``."""
    return f"{BLOCK_PREFIX}{os.getpid()}_{secrets.token_hex(4)}"


def maker_of(name: str) -> int | None:
    """The pid of the process that made the block ``name`` (``None``: not one of ours)."""
    prefix, _, rest = name.partition(BLOCK_PREFIX)
    pid = rest.split("_", 1)[0]
    return int(pid) if not prefix and pid.isdigit() else None


class ShmView(NamedTuple):
    """Where an array lies in a shared block: enough to rebuild it in another process."""

    block: str
    offset: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    dtype: str
    writeable: bool


@dataclass
class _Block:
    name: str
    size: int
    buffer: mmap.mmap
    address: int


SHM_FOLDER = "/dev/shm"


class SharedMemoryFull(MemoryError):
    """``/dev/shm`` has less room than a shared block needs."""


def _check_room(size: int) -> None:
    """Refuse a block that ``/dev/shm`` cannot hold: writing to it would kill the process
    with SIGBUS rather than fail cleanly (containers often give ``/dev/shm`` 64 MiB)."""
    try:
        free = shutil.disk_usage(SHM_FOLDER).free
    except OSError:  # no such folder here: let shm_open decide
        return
    if size > free:
        raise SharedMemoryFull(
            f"a shared-memory pool needs {size / 2**20:.0f} MiB but {SHM_FOLDER} has "
            f"{free / 2**20:.0f} MiB free; give it more room (docker run --shm-size=...), use "
            "fewer slots or a smaller batch_size, or run with executor='threads'"
        )


def _map(name: str, size: int | None = None, *, populate: bool = False) -> mmap.mmap:
    """Map the existing shared block ``name`` (without registering it with a tracker)."""
    import _posixshmem  # the module SharedMemory itself uses on POSIX

    fd = _posixshmem.shm_open("/" + name, os.O_RDWR, mode=0o600)
    try:
        flags = mmap.MAP_SHARED | (_POPULATE if populate else 0)
        return mmap.mmap(fd, os.fstat(fd).st_size if size is None else size, flags=flags)
    finally:
        os.close(fd)


def _address(buffer: mmap.mmap) -> int:
    return int(np.frombuffer(buffer, np.uint8, count=1).ctypes.data) if len(buffer) else 0


def byte_range(array: np.ndarray) -> tuple[int, int]:
    """The first and one-past-last byte addresses ``array`` touches."""
    low = high = int(array.__array_interface__["data"][0])
    for n, stride in zip(array.shape, array.strides, strict=True):
        extent = (n - 1) * stride
        if extent < 0:
            low += extent
        else:
            high += extent
    return low, high + array.itemsize


def _locate(blocks: dict[str, _Block], array: Any) -> ShmView | None:
    if not isinstance(array, np.ndarray) or array.size == 0 or array.dtype.hasobject:
        return None
    low, high = byte_range(array)
    start = int(array.__array_interface__["data"][0])
    for block in blocks.values():
        if block.address <= low and high <= block.address + block.size:
            return ShmView(
                block.name,
                start - block.address,
                tuple(array.shape),
                tuple(array.strides),
                array.dtype.str,
                bool(array.flags.writeable),
            )
    return None


def _view(block: _Block, where: ShmView) -> np.ndarray:
    array: np.ndarray = np.ndarray(
        where.shape,
        dtype=np.dtype(where.dtype),
        buffer=block.buffer,
        offset=where.offset,
        strides=where.strides,
    )
    if not where.writeable:
        array.flags.writeable = False
    return array


_LIVE: dict[str, _Block] = {}
"""Every block this process created and has not unlinked, whoever made it: an array in any
of them crosses to any child as where it lies (a reader's pool to a stage's worker)."""
_LIVE_LOCK = threading.Lock()


def _unlink(names: list[str]) -> None:
    """Remove every named block from the system (idempotent; safe at interpreter exit)."""
    while names:
        name = names.pop()
        with _LIVE_LOCK:
            _LIVE.pop(name, None)
        with contextlib.suppress(FileNotFoundError):
            shared_memory.SharedMemory(name=name).unlink()


def _created(size: int) -> shared_memory.SharedMemory:
    """A new block of ``size`` bytes under a :func:`block_name` (another name where one
    is taken)."""
    while True:
        try:
            return shared_memory.SharedMemory(name=block_name(), create=True, size=size)
        except FileExistsError:
            continue


class SharedBlocks:
    """The parent's shared blocks: created on demand, all unlinked by :meth:`unlink_all`.

    Unlinking removes the names from ``/dev/shm``; memory still viewed by arrays stays
    valid until they are gone. A finalizer unlinks whatever is left when the object is
    collected or the interpreter exits, and ``multiprocessing``'s resource tracker
    removes blocks of a parent that was killed.
    """

    def __init__(self) -> None:
        self._names: list[str] = []
        self.created: list[str] = []
        self._lock = threading.Lock()
        self._finalizer = weakref.finalize(self, _unlink, self._names)

    def create(self, nbytes: int) -> mmap.mmap:
        """A new block of ``nbytes`` (all pages mapped up front), as a writable buffer.

        Raises:
            SharedMemoryFull: ``/dev/shm`` has less free room than ``nbytes``.
        """
        size = max(int(nbytes), 1)
        _check_room(size)
        shm = _created(size)
        try:
            buffer = _map(shm.name, size, populate=True)
        except BaseException:
            shm.unlink()
            raise
        finally:
            shm.close()
        block = _Block(shm.name, size, buffer, _address(buffer))
        with self._lock:
            self._names.append(shm.name)
            self.created.append(shm.name)
        with _LIVE_LOCK:
            _LIVE[shm.name] = block
        return buffer

    def locate(self, array: Any) -> ShmView | None:
        """Where ``array`` lies in a live block of this process (these or any other
        :class:`SharedBlocks`'), or ``None``."""
        with _LIVE_LOCK:
            live = dict(_LIVE)
        return _locate(live, array)

    def view(self, where: ShmView) -> np.ndarray:
        """The parent's own view described by ``where`` (a live block of this process)."""
        with _LIVE_LOCK:
            block = _LIVE[where.block]
        return _view(block, where)

    def unlink_all(self) -> None:
        """Remove every block's name; forget the blocks."""
        with self._lock:
            _unlink(self._names)


class BlockMaps:
    """A child's mappings of the parent's blocks, each opened once and kept."""

    def __init__(self) -> None:
        self._blocks: dict[str, _Block] = {}

    def view(self, where: ShmView) -> np.ndarray:
        block = self._blocks.get(where.block)
        if block is None:
            buffer = _map(where.block, populate=True)
            block = _Block(where.block, len(buffer), buffer, _address(buffer))
            self._blocks[where.block] = block
        return _view(block, where)

    def locate(self, array: Any) -> ShmView | None:
        return _locate(self._blocks, array)
