"""Inputs read in a child process that can be stopped: a file that hangs or crashes its
decoder fails alone.

:class:`ReaderProcess` opens each input of a job in a child process of its own
(:class:`~hyperframes.executors.worker.Worker`, running :class:`~.file_reader.Reads`) and
gives back a :class:`RemoteSource`. Every call waits at most ``timeout`` seconds, so a
file whose read hangs (a stalled network mount, a FIFO, a decoder caught in a loop) fails
alone with :class:`FileStalled`, and one that crashes its decoder with
:class:`ReaderDied`; the next call starts a fresh child. The run's pool is a shared block
of the reader's (:meth:`ReaderProcess.pool_memory`), so the child decodes straight into
its slots. The child holds one input open at a time: a source read after another was
opened is opened again from where it began (its start, its resume point).

Example:
    >>> reader = ReaderProcess(timeout=60.0)  # doctest: +SKIP
    >>> source = reader.open(Input("clip.mp4"), options={"size": (640, 360)})  # doctest: +SKIP
    >>> chunk = source.read_into(out)  # doctest: +SKIP
    >>> reader.close()  # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..executors.worker import SharedBlocks, SharedMemoryFull, Worker, WorkerDied, WorkerStalled
from .base import Chunk, Footprint, Source
from .file_reader import Reads
from .formats import PixFmt
from .inputs import Input

HEADERS_AT_ONCE = 256
"""Inputs whose headers one call reads (in about a second), within one timeout."""


class FileStalled(TimeoutError):
    """Reading an input gave no answer within the file timeout; its read was stopped."""

    @classmethod
    def after(cls, timeout: float) -> FileStalled:
        """The error, in the words every way of running a job lists the input with."""
        return cls(f"nothing came of it in {timeout:g} s (the file timeout): its read was stopped")


class ReaderDied(ChildProcessError):
    """The process reading an input ended during the read (a crash in the decoder)."""


class ReaderProcess:
    """Inputs read in one child process, each call within ``timeout`` seconds.

    Args:
        timeout: the longest a call may go without an answer (opening an input, or
            reading one batch of it), in seconds.
    """

    def __init__(self, timeout: float) -> None:
        if not timeout > 0:
            raise ValueError(f"timeout must be a number of seconds above 0, got {timeout!r}")
        self.timeout = float(timeout)
        self._worker: Worker | None = None
        self._current: RemoteSource | None = None  # the source the child holds open
        self._blocks = SharedBlocks()  # the pool the child decodes into, and a staging one
        self._staging: np.ndarray | None = None  # for a read into memory not shared
        self.copies = 0  # batches read through it (the pool was not shared)

    def pool_memory(self, nbytes: int) -> Any:
        """A shared block for the run's pool: the child decodes straight into its slots
        (``None`` where ``/dev/shm`` has no room: each batch is then copied)."""
        try:
            return self._blocks.create(nbytes)
        except SharedMemoryFull:
            return None

    def open(
        self,
        item: Input,
        *,
        rate: Any = None,
        start: int | None = None,
        options: dict[str, Any],
        memory: int | None = None,
    ) -> RemoteSource:
        """``open_item(item, ...)`` in the child (its decoder within ``memory``, where
        given); its facts and reads as a source here."""
        opening = {"item": item, "rate": rate, "start": start, **options}
        self._current = None  # the child closes what it held first
        facts = self._call("open", opening, memory, None)
        source = RemoteSource(self, opening, facts)
        source.memory, self._current = memory, source
        return source

    def headers(
        self, items: list[Input], *, size: Any, pix_fmt: PixFmt, kinds: tuple[Any, ...] = ()
    ) -> list[Footprint | OSError]:
        """:func:`header_footprint` of each of ``items``, read in the child on a thread a
        core, or the error of one that gave nothing within the timeout
        (:class:`FileStalled`) or crashed the child (:class:`ReaderDied`)."""
        found: list[Footprint | OSError] = []
        for at in range(0, len(items), HEADERS_AT_ONCE):
            part = items[at : at + HEADERS_AT_ONCE]
            try:  # the child keeps to the timeout; the call's own is a backstop
                got = self._call("headers", part, size, pix_fmt, kinds, self.timeout,
                                 slack=60.0)  # fmt: skip
            except (FileStalled, ReaderDied):  # all at once gave no answer: one by one
                found += [self._header(item, size, pix_fmt, kinds) for item in part]
                continue
            if None in got:  # stuck threads in the child: end it
                self._end_child()
            stalled = FileStalled.after(self.timeout)
            found += [stalled if f is None else f for f in got]
        return found

    def _header(
        self, item: Input, size: Any, pix_fmt: PixFmt, kinds: tuple[Any, ...]
    ) -> Footprint | OSError:
        try:
            footprint: Footprint = self._call("header", item, size, pix_fmt, kinds)
        except (FileStalled, ReaderDied) as exc:
            return exc
        return footprint

    def read(self, source: RemoteSource, out: np.ndarray) -> Chunk:
        self._hold(source)
        source.begun = True
        if self._blocks.locate(out) is not None:  # a slot of shared memory: no copy
            chunk: Chunk = self._call("read", out)
            return chunk
        if self._staging is None or self._staging.nbytes < out.nbytes:
            try:
                self._staging = np.frombuffer(self._blocks.create(out.nbytes), np.uint8)
            except SharedMemoryFull:
                raise SharedMemoryFull(
                    f"the reader process needs a batch of {out.nbytes / 2**20:.0f} MiB of "
                    "shared memory, more than /dev/shm has free; give it more room (docker "
                    "run --shm-size=...), pass a smaller batch_size, or read the files in "
                    "this process (file_timeout=None, --file-timeout 0)"
                ) from None
        staging = self._staging[: out.nbytes].view(out.dtype).reshape(out.shape)
        chunk = self._call("read", staging)
        out[: len(chunk)] = staging[: len(chunk)]
        self.copies += 1
        return chunk

    def resume_from(self, source: RemoteSource, sample: int) -> int | None:
        self._hold(source)
        length: int | None = self._call("resume_from", sample)
        return length

    def use_memory(self, source: RemoteSource, nbytes: int) -> None:
        if self._current is source:
            self._call("use_memory", nbytes)

    def release(self, source: RemoteSource) -> None:
        """``source`` is done with: the child closes it when it opens the next (or ends)."""
        if self._current is source:
            self._current = None

    def _hold(self, source: RemoteSource) -> None:
        """Have the child hold ``source`` open, where it was left."""
        if self._current is not source:
            if source.begun:  # its reader ended since: opened again, it would start over
                raise ReaderDied("the process reading it ended while it was read")
            self._current = None
            self._call("open", source.opening, source.memory, source.after)
            self._current = source

    def _call(self, op: str, *args: Any, slack: float = 0.0) -> Any:
        if self._worker is None:
            self._worker = Worker(Reads(), name="hf-reader", preload=(Reads.__module__,))
        try:
            return self._worker.call(op, *args, timeout=self.timeout + slack)
        except WorkerStalled:
            self._forget()
            raise FileStalled.after(self.timeout) from None
        except WorkerDied as exc:
            self._forget()
            raise ReaderDied(f"the process reading it stopped: {exc}") from None

    def _forget(self) -> None:
        self._worker, self._current = None, None

    def _end_child(self) -> None:
        worker = self._worker
        self._forget()
        if worker is not None:
            worker.close()

    def close(self) -> None:
        """End the child process (the next call starts another) and unlink the shared
        memory (views of it stay valid)."""
        self._staging = None
        try:
            self._end_child()
        finally:
            self._blocks.unlink_all()


class RemoteSource(Source):
    """One input as a :class:`ReaderProcess` reads it: its facts here, its frames there."""

    def __init__(self, reader: ReaderProcess, opening: dict[str, Any], facts: dict[str, Any]):
        self.reader, self.opening = reader, opening
        self.spec, self.length, self.info = facts["spec"], facts["length"], facts["info"]
        self.start, self.sampling = facts["start"], facts["sampling"]
        self._footprint: Footprint = facts["footprint"]
        self.memory: int | None = None
        self.after: int | None = None  # resumed from this sample
        self.begun = False  # read from: it cannot be opened again where it was

    def footprint(self) -> Footprint:
        return self._footprint

    def use_memory(self, nbytes: int) -> None:
        self.memory = nbytes
        self.reader.use_memory(self, nbytes)

    def resume_from(self, sample: int) -> None:
        self.length = self.reader.resume_from(self, sample)
        self.after = sample

    def read_into(self, out: np.ndarray) -> Chunk:
        return self.reader.read(self, out)

    def close(self) -> None:
        self.reader.release(self)
