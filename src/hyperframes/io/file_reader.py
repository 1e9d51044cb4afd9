"""The inputs of a job opened one by one, and what a reader process does with them.

:func:`open_item` opens one input of a job (its range, its manifest's times, an image
sequence's rate); :func:`header_footprint` says what its decoder will hold. :class:`Reads`
is what a reader process (:mod:`.reader_process`) runs: it holds one input open and reads
it into the slots the parent names.

Example:
    >>> reads = Reads()  # doctest: +SKIP
    >>> facts = reads.open({"item": Input("clip.mp4")}, None, None)  # doctest: +SKIP
    >>> chunk = reads.read(out)  # doctest: +SKIP
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor, wait
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import numpy as np

from .base import Chunk, Footprint
from .decoder_memory import decoding_of
from .formats import PixFmt, rate_of
from .inputs import Input, is_image_sequence
from .kinds import InputKind, kind_of
from .positions import DEFAULT_RATE, frame_range
from .sampling import times_of
from .sources import open_input

if TYPE_CHECKING:
    from .images import ImageSequenceSource
    from .video import VideoSource

    Opened = VideoSource | ImageSequenceSource


def frames_of(
    path: str | os.PathLike[str],
    start: Any,
    stop: Any,
    *,
    rate: Fraction | float | str | None,
    kinds: tuple[InputKind, ...] = (),
) -> tuple[int, int | None]:
    """``start`` and ``stop`` (frame indices, or :class:`~.positions.Seconds`) as frame
    indices of ``path``: a video's by its frames' timestamps, an image sequence's at
    ``rate`` (25 unless given; a video's ``rate`` is not used here), an input of one of
    ``kinds`` as its kind says."""
    kind = kind_of(path, kinds)
    if kind is not None:
        return kind.frames(os.fspath(path), start, stop)
    every = None
    if is_image_sequence(path):
        every = DEFAULT_RATE if rate is None else rate_of(rate)
    return frame_range(path, start, stop, rate=every)


def open_item(
    item: Input,
    *,
    rate: Fraction | float | str | None = None,
    start: int | None = None,
    kinds: tuple[InputKind, ...] = (),
    **options: Any,
) -> VideoSource | ImageSequenceSource:
    """The source of one input of a job: its range (``start``/``stop``, times turned into
    frames), its manifest's ``at`` times, an image sequence at ``rate`` (25 unless given),
    an input of one of ``kinds`` as its kind opens it; from ``start`` where given."""
    first, stop = frames_of(item.path, item.start, item.stop, rate=rate, kinds=kinds)
    kind = kind_of(item.path, kinds)
    if kind is not None:
        opened: Opened = kind.open(
            item.path, start=first if start is None else start, stop=stop, **options
        )  # (one that reads as a video)
        return opened
    images = is_image_sequence(item.path)
    if "at" in item.columns:  # this row's own times
        options = {**options, "at": times_of(item.columns["at"], item.path)}
    return open_input(item.path, start=first if start is None else start, stop=stop,
                      rate=rate if images else None, **options)  # fmt: skip


def header_footprint(
    item: Input, *, size: Any, pix_fmt: PixFmt, kinds: tuple[InputKind, ...] = ()
) -> Footprint:
    """The decoder an input will need, from its header alone (an image at a time: none;
    an input of one of ``kinds``: what its kind says)."""
    kind = kind_of(item.path, kinds)
    if kind is not None:
        return kind.footprint(item.path, size=size, pix_fmt=pix_fmt)
    if is_image_sequence(item.path):
        return Footprint("decoder")
    return decoding_of(item.path, resized=size, pix_fmt=pix_fmt)


def facts_of(source: Opened) -> dict[str, Any]:
    """What the parent keeps of an opened input (a :class:`~.reader_process.RemoteSource`)."""
    return {"spec": source.spec, "length": source.length, "info": source.info,
            "start": source.start, "sampling": source.sampling,
            "footprint": source.footprint()}  # fmt: skip


class Reads:
    """The child's side: the one input open now, and what the parent asks of it."""

    def __init__(self) -> None:
        self.source: Opened | None = None

    def __call__(self, op: str, *args: Any) -> Any:
        return getattr(self, op)(*args)

    def open(
        self, opening: dict[str, Any], memory: int | None, after: int | None
    ) -> dict[str, Any]:
        self.close()
        source = self.source = open_item(**opening)
        facts = facts_of(source)
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

    def header(
        self, item: Input, size: Any, pix_fmt: PixFmt, kinds: tuple[InputKind, ...]
    ) -> Footprint:
        return header_footprint(item, size=size, pix_fmt=pix_fmt, kinds=kinds)

    def headers(
        self,
        items: list[Input],
        size: Any,
        pix_fmt: PixFmt,
        kinds: tuple[InputKind, ...],
        within: float,
    ) -> list[Footprint | None]:
        """Each item's :func:`header_footprint`, read on a thread a core; ``None`` for
        those that gave nothing within ``within`` seconds (their threads are left stuck:
        the parent ends this process)."""
        threads = min(32, 2 * len(os.sched_getaffinity(0)))
        pool = ThreadPoolExecutor(threads, thread_name_prefix="hf-headers")
        futures = [pool.submit(header_footprint, i, size=size, pix_fmt=pix_fmt, kinds=kinds)
                   for i in items]  # fmt: skip
        wait(futures, timeout=within)
        pool.shutdown(wait=False, cancel_futures=True)
        return [f.result() if f.done() else None for f in futures]

    def close(self) -> None:
        if self.source is not None:
            self.source.close()
            self.source = None
