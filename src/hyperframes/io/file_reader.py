"""The inputs of a job opened one by one, here or in a reader process that can be stopped.

:func:`open_item` opens one input of a job (its range, its manifest's times, an image
sequence's rate). :class:`ReaderProcess` does the same in a child process of its own
(:class:`~hyperframes.executors.worker.Worker`) and gives back a :class:`RemoteSource`:
the child decodes into shared memory and the parent copies each batch into its slot.
Every call waits at most ``timeout`` seconds, so a file whose read hangs (a stalled
network mount, a FIFO, a decoder caught in a loop) fails alone with
:class:`FileStalled`, and one that crashes its decoder with :class:`ReaderDied`; the next
call starts a fresh child. The child holds one input open at a time: a source read after
another was opened is opened again from where it began (its start, its resume point).

Example:
    >>> reader = ReaderProcess(timeout=60.0)  # doctest: +SKIP
    >>> source = reader.open(Input("clip.mp4"), options={"size": (640, 360)})  # doctest: +SKIP
    >>> chunk = source.read_into(out)  # doctest: +SKIP
    >>> reader.close()  # doctest: +SKIP
"""

from __future__ import annotations

from fractions import Fraction
from typing import TYPE_CHECKING, Any

import numpy as np

from ..executors.worker import Worker, WorkerDied, WorkerStalled
from .base import Chunk, Footprint, Source
from .decoder_memory import decoding_of
from .formats import PixFmt, rate_of
from .inputs import Input, is_image_sequence
from .positions import DEFAULT_RATE, frame_range
from .sampling import times_of
from .sources import open_input

if TYPE_CHECKING:
    from .images import ImageSequenceSource
    from .video import VideoSource


class FileStalled(TimeoutError):
    """Reading an input gave no answer within the file timeout; its read was stopped."""


class ReaderDied(ChildProcessError):
    """The process reading an input ended during the read (a crash in the decoder)."""


def open_item(
    item: Input,
    *,
    rate: Fraction | float | str | None = None,
    start: int | None = None,
    **options: Any,
) -> VideoSource | ImageSequenceSource:
    """The source of one input of a job: its range (``start``/``stop``, times turned into
    frames), its manifest's ``at`` times, an image sequence at ``rate`` (25 unless given);
    from ``start`` where given."""
    images = is_image_sequence(item.path)
    every = (DEFAULT_RATE if rate is None else rate_of(rate)) if images else None
    first, stop = frame_range(item.path, item.start, item.stop, rate=every)  # times: frames
    if "at" in item.columns:  # this row's own times
        options = {**options, "at": times_of(item.columns["at"], item.path)}
    return open_input(item.path, start=first if start is None else start, stop=stop,
                      rate=every, **options)  # fmt: skip


def header_footprint(item: Input, *, size: Any, pix_fmt: PixFmt) -> Footprint:
    """The decoder an input will need, from its header alone (an image at a time: none)."""
    if is_image_sequence(item.path):
        return Footprint("decoder")
    return decoding_of(item.path, resized=size, pix_fmt=pix_fmt)


class _Reads:
    """The child's side: the one input open now, and what the parent asks of it."""

    def __init__(self) -> None:
        self.source: VideoSource | ImageSequenceSource | None = None

    def __call__(self, op: str, *args: Any) -> Any:
        return getattr(self, op)(*args)

    def open(
        self, opening: dict[str, Any], memory: int | None, after: int | None
    ) -> dict[str, Any]:
        self.close()
        source = self.source = open_item(**opening)
        facts = {"spec": source.spec, "length": source.length, "info": source.info,
                 "start": source.start, "sampling": source.sampling,
                 "footprint": source.footprint()}  # fmt: skip
        if memory is not None:
            source.use_memory(memory)
        if after is not None:
            source.resume_from(after)
        return facts

    def read(self, out: np.ndarray) -> Chunk:
        assert self.source is not None
        return self.source.read_into(out)

    def use_memory(self, nbytes: int) -> None:
        assert self.source is not None
        self.source.use_memory(nbytes)

    def resume_from(self, sample: int) -> int | None:
        assert self.source is not None
        self.source.resume_from(sample)
        return self.source.length

    def header(self, item: Input, size: Any, pix_fmt: PixFmt) -> Footprint:
        return header_footprint(item, size=size, pix_fmt=pix_fmt)

    def close(self) -> None:
        if self.source is not None:
            self.source.close()
            self.source = None


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
        self._staging: np.ndarray | None = None  # the child writes a batch here

    def open(
        self, item: Input, *, rate: Any = None, start: int | None = None, options: dict[str, Any]
    ) -> RemoteSource:
        """``open_item(item, ...)`` in the child; its facts and reads as a source here."""
        opening = {"item": item, "rate": rate, "start": start, **options}
        self._current = None  # the child closes what it held first
        facts = self._call("open", opening, None, None)
        source = RemoteSource(self, opening, facts)
        self._current = source
        return source

    def header(self, item: Input, *, size: Any, pix_fmt: PixFmt) -> Footprint:
        """:func:`header_footprint` of ``item``, read in the child."""
        footprint: Footprint = self._call("header", item, size, pix_fmt)
        return footprint

    def read(self, source: RemoteSource, out: np.ndarray) -> Chunk:
        self._hold(source)
        if self._staging is None or self._staging.nbytes < out.nbytes:
            assert self._worker is not None
            self._staging = np.frombuffer(self._worker.blocks.create(out.nbytes), np.uint8)
        staging = self._staging[: out.nbytes].view(out.dtype).reshape(out.shape)
        chunk: Chunk = self._call("read", staging)
        out[: len(chunk)] = staging[: len(chunk)]
        return chunk

    def resume_from(self, source: RemoteSource, sample: int) -> int | None:
        self._hold(source)
        length: int | None = self._call("resume_from", sample)
        return length

    def use_memory(self, source: RemoteSource, nbytes: int) -> None:
        if self._current is source:
            self._call("use_memory", nbytes)

    def release(self, source: RemoteSource) -> None:
        """``source`` is done with: the child closes it if it holds it."""
        if self._current is source and self._worker is not None:
            self._current = None
            self._call("close")

    def _hold(self, source: RemoteSource) -> None:
        """Have the child hold ``source`` open, where it was left."""
        if self._current is not source:
            self._current = None
            self._call("open", source.opening, source.memory, source.after)
            self._current = source

    def _call(self, op: str, *args: Any) -> Any:
        if self._worker is None:
            self._worker = Worker(_Reads(), name="hf-reader")
        try:
            return self._worker.call(op, *args, timeout=self.timeout)
        except WorkerStalled:
            self._forget()
            raise FileStalled(
                f"nothing came of it in {self.timeout:g} s (the file timeout): its read was stopped"
            ) from None
        except WorkerDied as exc:
            self._forget()
            raise ReaderDied(f"the process reading it stopped: {exc}") from None

    def _forget(self) -> None:
        self._worker, self._current, self._staging = None, None, None

    def close(self) -> None:
        """End the child process (the next call starts another)."""
        worker, self._staging = self._worker, None
        self._forget()
        if worker is not None:
            worker.close()


class RemoteSource(Source):
    """One input as a :class:`ReaderProcess` reads it: its facts here, its frames there."""

    def __init__(self, reader: ReaderProcess, opening: dict[str, Any], facts: dict[str, Any]):
        self.reader, self.opening = reader, opening
        self.spec, self.length, self.info = facts["spec"], facts["length"], facts["info"]
        self.start, self.sampling = facts["start"], facts["sampling"]
        self._footprint: Footprint = facts["footprint"]
        self.memory: int | None = None
        self.after: int | None = None  # resumed from this sample

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
